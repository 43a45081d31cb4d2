/**
 * The SMTP ingest over a real socket (spec 1, 3.1; decisions.md "Receiving", "Validation and
 * headers"; architecture.md "The message pipeline", step 1): what EHLO advertises, which
 * recipients RCPT TO accepts and refuses with which reply, the recipient cap, one stored message
 * per accepted alias, the DATA size cap and the bare-LF refusal, the exact raw bytes, and the
 * alias and account counters written with the message.
 */
import { Alias, CandidateReservation } from "@burnbox/domain"
import { expectShape, type Harness, type Session, startHarness, type SmtpReply, SmtpClient } from "@burnbox/testkit"
import { Schema } from "effect"
import { MaxConnectionsPerAddress, overConnectionLimit } from "@burnbox/ingest"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let owner: Session
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 4401 })
  owner = await h.signup({ plan: "pro" })
})
afterAll(() => h.close())

// ---------------------------------------------------------------------------------------------
// A raw SMTP client: every reply code is seen exactly as the server sent it.


/** Opens a connection and says EHLO; the caller quits. */
const session = async () => {
  const client = await SmtpClient.open(h.smtpPort)
  expect((await client.read()).code).toBe(220)
  const ehlo = await client.command("EHLO client.example.org")
  expect(ehlo.code, ehlo.text).toBe(250)
  return { client, ehlo }
}

/** One SMTP transaction: MAIL FROM, each RCPT TO, and DATA when any recipient was accepted. */
const deliver = async (to: ReadonlyArray<string>, raw: Uint8Array, from = "sender@example.org") => {
  const { client } = await session()
  try {
    const mail = await client.command(`MAIL FROM:<${from}>`)
    expect(mail.code, mail.text).toBe(250)
    const rcpt: Array<SmtpReply> = []
    for (const address of to) rcpt.push(await client.command(`RCPT TO:<${address}>`))
    const data = rcpt.some((r) => r.code === 250) ? await client.data(raw) : undefined
    return { rcpt, data }
  } finally {
    await client.quit()
  }
}

/** A CRLF message; `body` lines may be written with "\n". */
const mail = (o: { to: string; subject: string; body?: string; from?: string; headers?: ReadonlyArray<string> }) =>
  Buffer.from(
    [
      `From: ${o.from ?? "Sender <sender@example.org>"}`,
      `To: ${o.to}`,
      `Subject: ${o.subject}`,
      "Date: Sat, 21 Nov 2026 12:00:00 +0000",
      `Message-ID: <${Math.random().toString(36).slice(2)}@example.org>`,
      ...(o.headers ?? [])
    ].join("\r\n") + "\r\n\r\n" + (o.body ?? "Hello.").replace(/\r?\n/g, "\r\n") + "\r\n",
    "utf8"
  )

// ---------------------------------------------------------------------------------------------
// Aliases and reading back what was stored

type Reservation = typeof CandidateReservation.Type
const AliasList = Schema.Struct({ items: Schema.Array(Alias) })

const claim = async (who: Session = owner, style: "numeric" | "words" = "numeric") => {
  const reservation = await h.request<Reservation>("/aliases/candidates", { method: "POST", session: who, body: { domainId: 1, style } })
  expect(reservation.status, reservation.text).toBe(200)
  const answer = await h.request("/aliases", {
    method: "POST",
    session: who,
    body: { aliasId: reservation.body.candidates[0]!.id, reservationToken: reservation.body.reservationToken }
  })
  expect(answer.status, answer.text).toBe(201)
  return expectShape(Alias, answer.body)
}

const aliasNow = async (id: number, who: Session = owner) => {
  const answer = await h.request("/aliases?includeBurned=true", { session: who })
  expect(answer.status, answer.text).toBe(200)
  const found = expectShape(AliasList, answer.body).items.find((a) => a.id === id)
  expect(found, `alias ${id} listed`).toBeDefined()
  return found!
}

const storedFor = (aliasId: number) =>
  h.query<{ id: number; recipient: string; size_bytes: number; source: string }>(
    "SELECT id, recipient, size_bytes, source FROM messages WHERE alias_id = $1 ORDER BY id",
    [aliasId]
  )

const messageCount = async () => Number((await h.query<{ n: string }>("SELECT count(*) AS n FROM messages"))[0]!.n)

const accountUsed = async (who: Session = owner) => {
  const me = await h.request<{ storageUsedBytes: number }>("/me", { session: who })
  expect(me.status, me.text).toBe(200)
  return me.body.storageUsedBytes
}

/** Polls GET /messages/{id} until the pipeline is done with it (bounded). */
const processed = async (id: number, who: Session = owner) => {
  const deadline = Date.now() + 15_000
  for (;;) {
    const answer = await h.request(`/messages/${id}`, { session: who })
    expect(answer.status, answer.text).toBe(200)
    if (answer.body.processingStatus === "processed" || answer.body.processingStatus === "failed") return answer.body
    if (Date.now() > deadline) throw new Error(`message ${id} still ${answer.body.processingStatus}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

// ---------------------------------------------------------------------------------------------

describe("EHLO (receive-only SMTP)", () => {
  it("advertises SIZE 15728640, 8BITMIME, SMTPUTF8 and PIPELINING, and no AUTH", async () => {
    const { client, ehlo } = await session()
    await client.quit()
    const keywords = ehlo.lines.slice(1).map((line) => line.slice(4))
    expect(keywords).toContain("SIZE 15728640")
    expect(keywords).toContain("8BITMIME")
    expect(keywords).toContain("SMTPUTF8")
    expect(keywords).toContain("PIPELINING")
    expect(keywords.filter((k) => /^AUTH\b/i.test(k))).toEqual([])
  })

  it("refuses AUTH: a receive-only server has no logins", async () => {
    const { client } = await session()
    const auth = await client.command("AUTH PLAIN AHVzZXIAcGFzcw==")
    await client.quit()
    expect(auth.code).toBeGreaterThanOrEqual(500)
  })

  it("refuses MAIL FROM declaring SIZE over 15728640 with 552", async () => {
    const { client } = await session()
    const over = await client.command("MAIL FROM:<sender@example.org> SIZE=15728641")
    const at = await client.command("MAIL FROM:<sender@example.org> SIZE=15728640")
    await client.quit()
    expect(over.code, over.text).toBe(552)
    expect(at.code, at.text).toBe(250)
  })

  it("takes pipelined commands: MAIL, RCPT, RCPT, DATA in one write get four replies in order", async () => {
    const alias = await claim()
    const { client } = await session()
    client.send(`MAIL FROM:<sender@example.org>\r\nRCPT TO:<${alias.address}>\r\nRCPT TO:<nobody-here@burnbox.test>\r\nDATA`)
    const replies = [await client.read(), await client.read(), await client.read(), await client.read()]
    expect(replies.map((r) => r.code)).toEqual([250, 250, 550, 354])
    client.writeMessage(mail({ to: alias.address, subject: "pipelined" }))
    const done = await client.read()
    await client.quit()
    expect(done.code, done.text).toBe(250)
    expect(await storedFor(alias.id)).toHaveLength(1)
  })
})

/** The text of a reply after EHLO starts with exactly one enhanced status code whose class is the reply's (RFC 2034). */
const expectEnhanced = (reply: SmtpReply, code: string) => {
  expect(`${reply.code} ${reply.text}`).toMatch(new RegExp(`^${reply.code} ${code.replaceAll(".", "\\.")} `))
  expect(reply.text.startsWith(String(reply.code)[0]!), reply.text).toBe(true)
  expect(reply.text, "one enhanced code, not two").not.toMatch(/^\d\.\d{1,3}\.\d{1,3} \d\.\d{1,3}\.\d{1,3}\b/)
}

describe("enhanced status codes (RFC 2034)", () => {
  it("EHLO advertises ENHANCEDSTATUSCODES and not CHUNKING (smtp-server has no BDAT)", async () => {
    const { client, ehlo } = await session()
    await client.quit()
    const keywords = ehlo.lines.slice(1).map((line) => line.slice(4))
    expect(keywords).toContain("ENHANCEDSTATUSCODES")
    expect(keywords.filter((k) => /^(CHUNKING|BINARYMIME)\b/.test(k))).toEqual([])
  })

  it("a normal send: every reply but the 354 carries its code, the 250 of DATA its own 2.0.0 once", async () => {
    const alias = await claim()
    const { client } = await session()
    expectEnhanced(await client.command("NOOP"), "2.0.0")
    expectEnhanced(await client.command("MAIL FROM:<sender@example.org>"), "2.1.0")
    expectEnhanced(await client.command(`RCPT TO:<${alias.address}>`), "2.1.5")
    const data = await client.data(mail({ to: alias.address, subject: "enhanced" }))
    expectEnhanced(data, "2.0.0")
    expect(data.text).toMatch(/^2\.0\.0 Ok: stored as \d+$/)
    expectEnhanced(await client.command("RSET"), "2.0.0")
    const bye = await client.command("QUIT")
    client.destroy()
    expectEnhanced(bye, "2.0.0")
    expect(await storedFor(alias.id)).toHaveLength(1)
  })

  it("refused recipients keep their own codes: unknown 550 5.1.1, paused 550 5.2.1, the 101st 452 4.5.3", async () => {
    const paused = await claim()
    expect((await h.request(`/aliases/${paused.id}/pause`, { method: "POST", session: owner })).status).toBe(200)
    const alias = await claim()
    const { client } = await session()
    try {
      expectEnhanced(await client.command("MAIL FROM:<sender@example.org>"), "2.1.0")
      expectEnhanced(await client.command("RCPT TO:<no-such-alias@burnbox.test>"), "5.1.1")
      expectEnhanced(await client.command(`RCPT TO:<${paused.address}>`), "5.2.1")
      expectEnhanced(await client.command("RCPT TO:<not an address>"), "5.1.3")
      for (let i = 1; i <= 100; i++) expect((await client.command(`RCPT TO:<${alias.localPart}+e${i}@${alias.domain.name}>`)).code).toBe(250)
      expectEnhanced(await client.command(`RCPT TO:<${alias.address}>`), "4.5.3")
    } finally {
      await client.quit()
    }
  })

  it("too big: SIZE over the limit 552 5.3.4 at MAIL FROM", async () => {
    const { client } = await session()
    const over = await client.command("MAIL FROM:<sender@example.org> SIZE=15728641")
    await client.quit()
    expect(over.code).toBe(552)
    expectEnhanced(over, "5.3.4")
  })

  it("bad sequence and unknown commands: 503 5.5.1 and 500 5.5.2", async () => {
    const { client } = await session()
    try {
      expectEnhanced(await client.command("RCPT TO:<someone@burnbox.test>"), "5.5.1")
      expectEnhanced(await client.command("DATA"), "5.5.1")
      expectEnhanced(await client.command("MAIL FROM:<sender@example.org>"), "2.1.0")
      expectEnhanced(await client.command("MAIL FROM:<sender@example.org>"), "5.5.1")
      expectEnhanced(await client.command("DATA"), "5.5.1")
      expectEnhanced(await client.command("FROBNICATE"), "5.5.2")
      expectEnhanced(await client.command("AUTH PLAIN AHVzZXIAcGFzcw=="), "5.5.2")
    } finally {
      await client.quit()
    }
    // Before EHLO the sequence is bad as well.
    const bare = await SmtpClient.open(h.smtpPort)
    try {
      expect((await bare.read()).code).toBe(220)
      expectEnhanced(await bare.command("MAIL FROM:<sender@example.org>"), "5.5.1")
    } finally {
      await bare.quit()
    }
  })
})

describe("connections", () => {
  it("takes 20 connections from one client address and answers the next 421 4.7.0; another address, and a freed slot, are taken", async () => {
    const client = "127.0.0.7"
    const open = await Promise.all(Array.from({ length: MaxConnectionsPerAddress }, () => SmtpClient.open(h.smtpPort, client)))
    try {
      for (const c of open) expect((await c.read()).code).toBe(220)
      const refused = await SmtpClient.open(h.smtpPort, client)
      const reply = await refused.read()
      expect(reply.code, reply.text).toBe(421)
      expect(reply.text).toMatch(/^4\.7\.0 /)
      await refused.quit()
      const other = await SmtpClient.open(h.smtpPort, "127.0.0.8")
      expect((await other.read()).code).toBe(220)
      await other.quit()
      // A slot is free once the server has seen the close (real time, a generous bound).
      await open.shift()!.quit()
      const deadline = Date.now() + 10_000
      let code = 0
      while (code !== 220 && Date.now() < deadline) {
        const again = await SmtpClient.open(h.smtpPort, client)
        code = (await again.read()).code
        if (code === 220) open.push(again)
        else await again.quit()
      }
      expect(code).toBe(220)
    } finally {
      await Promise.all(open.map((c) => c.quit()))
    }
  })

  it("takes a CI fleet's connections from the machine itself (127.0.0.1) beyond the per-address limit", async () => {
    const fleet = MaxConnectionsPerAddress * 3
    const open = await Promise.all(Array.from({ length: fleet }, () => SmtpClient.open(h.smtpPort, "127.0.0.1")))
    try {
      const greetings = await Promise.all(open.map((c) => c.read()))
      expect(greetings.map((g) => g.code)).toEqual(Array.from({ length: fleet }, () => 220))
    } finally {
      await Promise.all(open.map((c) => c.quit()))
    }
  })

  it("holds other addresses to the configured limit; 0 is no limit", () => {
    expect(overConnectionLimit("203.0.113.9", 20, 20)).toBe(false)
    expect(overConnectionLimit("203.0.113.9", 21, 20)).toBe(true)
    expect(overConnectionLimit("127.0.0.7", 6, 5)).toBe(true)
    expect(overConnectionLimit("::1", 500, 20)).toBe(false)
    expect(overConnectionLimit("::ffff:127.0.0.1", 500, 20)).toBe(false)
    expect(overConnectionLimit("203.0.113.9", 10_000, 0)).toBe(false)
  })
})

describe("RCPT TO", () => {
  it("accepts an active alias and stores one smtp message for it, recipient kept", async () => {
    const alias = await claim()
    const { rcpt, data } = await deliver([alias.address], mail({ to: alias.address, subject: "plain" }))
    expect(rcpt[0]!.code, rcpt[0]!.text).toBe(250)
    expect(data?.code, data?.text).toBe(250)
    const stored = await storedFor(alias.id)
    expect(stored).toHaveLength(1)
    expect(stored[0]).toMatchObject({ source: "smtp", recipient: alias.address })
  })

  it("matches local part and domain case-insensitively; the alias keeps its own case", async () => {
    const alias = await claim(owner, "words")
    expect(alias.localPart).toMatch(/[a-z]/)
    const shouted = alias.address.toUpperCase()
    const { rcpt, data } = await deliver([shouted], mail({ to: shouted, subject: "case" }))
    expect(rcpt[0]!.code, rcpt[0]!.text).toBe(250)
    expect(data?.code, data?.text).toBe(250)
    expect(await storedFor(alias.id)).toHaveLength(1)
    expect((await aliasNow(alias.id)).address).toBe(alias.address)
  })

  it("delivers local+detail@domain to the alias, keeping the subaddress as the message's recipient and To header", async () => {
    const alias = await claim()
    const sub = `${alias.localPart}+run-42@${alias.domain.name}`
    const { rcpt, data } = await deliver([sub], mail({ to: sub, subject: "subaddress" }))
    expect(rcpt[0]!.code, rcpt[0]!.text).toBe(250)
    expect(data?.code, data?.text).toBe(250)
    const stored = await storedFor(alias.id)
    expect(stored).toHaveLength(1)
    expect(stored[0]!.recipient).toBe(sub)
    const detail = await processed(stored[0]!.id)
    expect(detail.processingStatus).toBe("processed")
    expect(detail.alias.address).toBe(alias.address)
    expect(detail.headers.to).toContain(sub)
  })

  it("refuses a paused alias with 550 5.2.1, stores nothing, and counts each refusal in rejectedCount", async () => {
    const alias = await claim()
    const paused = await h.request(`/aliases/${alias.id}/pause`, { method: "POST", session: owner })
    expect(paused.status, paused.text).toBe(200)
    const before = await messageCount()
    for (const address of [alias.address, `${alias.localPart}+x@${alias.domain.name}`.toUpperCase()]) {
      const { rcpt, data } = await deliver([address], mail({ to: address, subject: "to a paused alias" }))
      expect(rcpt[0]!.code, rcpt[0]!.text).toBe(550)
      expect(rcpt[0]!.text).toMatch(/^5\.2\.1\b/)
      expect(data).toBeUndefined()
    }
    expect(await messageCount()).toBe(before)
    const after = await aliasNow(alias.id)
    expect(after.rejectedCount).toBe(2)
    expect(after.receivedCount).toBe(0)
    // Resumed, it receives again.
    expect((await h.request(`/aliases/${alias.id}/resume`, { method: "POST", session: owner })).status).toBe(200)
    const { rcpt } = await deliver([alias.address], mail({ to: alias.address, subject: "resumed" }))
    expect(rcpt[0]!.code).toBe(250)
    expect(await storedFor(alias.id)).toHaveLength(1)
  })

  it("refuses an unknown local part, a burned alias, an unclaimed candidate and a foreign domain with 550 5.1.1", async () => {
    const burned = await claim()
    expect((await h.request(`/aliases/${burned.id}/burn`, { method: "POST", session: owner })).status).toBe(200)
    const reservation = await h.request<Reservation>("/aliases/candidates", { method: "POST", session: owner, body: { domainId: 1, style: "numeric" } })
    expect(reservation.status).toBe(200)
    const candidate = reservation.body.candidates[0]!.address
    const before = await messageCount()
    for (const address of ["no-such-alias@burnbox.test", burned.address, candidate, `${burned.localPart}@example.com`, "postmaster@gmail.com"]) {
      const { rcpt, data } = await deliver([address], mail({ to: address, subject: "nobody" }))
      expect(rcpt[0]!.code, `${address}: ${rcpt[0]!.text}`).toBe(550)
      expect(rcpt[0]!.text, address).toMatch(/^5\.1\.1\b/)
      expect(data).toBeUndefined()
    }
    expect(await messageCount()).toBe(before)
    expect((await aliasNow(burned.id)).rejectedCount).toBe(0)
    await h.request("/aliases/candidates", { method: "DELETE", session: owner })
  })

  it("accepts 100 recipients and refuses the 101st with 452; the message is stored once for the alias", async () => {
    const alias = await claim()
    const { client } = await session()
    try {
      expect((await client.command("MAIL FROM:<bulk@example.org>")).code).toBe(250)
      const codes: Array<number> = []
      for (let i = 1; i <= 101; i++) codes.push((await client.command(`RCPT TO:<${alias.localPart}+r${i}@${alias.domain.name}>`)).code)
      expect(codes.slice(0, 100).every((c) => c === 250), JSON.stringify(codes)).toBe(true)
      expect(codes[100]).toBe(452)
      const data = await client.data(mail({ to: alias.address, subject: "many recipients" }))
      expect(data.code, data.text).toBe(250)
    } finally {
      await client.quit()
    }
    expect(await storedFor(alias.id)).toHaveLength(1)
  })
})

describe("one stored message per accepted alias", () => {
  it("two addresses of one alias in one envelope give one message", async () => {
    const alias = await claim()
    const raw = mail({ to: alias.address, subject: "twice addressed" })
    const { rcpt, data } = await deliver([alias.address, `${alias.localPart}+b@${alias.domain.name}`], raw)
    expect(rcpt.map((r) => r.code)).toEqual([250, 250])
    expect(data?.code).toBe(250)
    expect(await storedFor(alias.id)).toHaveLength(1)
    const after = await aliasNow(alias.id)
    expect(after.receivedCount).toBe(1)
    expect(after.storageUsedBytes).toBe(raw.byteLength)
  })

  it("two aliases (of two accounts) in one envelope give one message each, refused recipients none", async () => {
    const other = await h.signup({ plan: "pro" })
    const mine = await claim()
    const theirs = await claim(other)
    const raw = mail({ to: `${mine.address}, ${theirs.address}`, subject: "two aliases" })
    const { rcpt, data } = await deliver([mine.address, "ghost@burnbox.test", theirs.address], raw)
    expect(rcpt.map((r) => r.code)).toEqual([250, 550, 250])
    expect(data?.code, data?.text).toBe(250)
    const [a, b] = [await storedFor(mine.id), await storedFor(theirs.id)]
    expect(a).toHaveLength(1)
    expect(b).toHaveLength(1)
    expect(a[0]!.id).not.toBe(b[0]!.id)
    expect(await accountUsed(owner)).toBeGreaterThanOrEqual(raw.byteLength)
    expect(await accountUsed(other)).toBe(raw.byteLength)
    // Each account reads its own copy, and not the other's.
    expect((await h.request(`/messages/${a[0]!.id}`, { session: owner })).status).toBe(200)
    expect((await h.request(`/messages/${b[0]!.id}`, { session: other })).status).toBe(200)
    expect((await h.request(`/messages/${b[0]!.id}`, { session: owner })).status).toBe(404)
  })

  it("a second transaction on the same connection delivers only to its own recipients", async () => {
    const first = await claim()
    const second = await claim()
    const { client } = await session()
    try {
      expect((await client.command("MAIL FROM:<a@example.org>")).code).toBe(250)
      expect((await client.command(`RCPT TO:<${first.address}>`)).code).toBe(250)
      expect((await client.data(mail({ to: first.address, subject: "first transaction" }))).code).toBe(250)
      expect((await client.command("MAIL FROM:<a@example.org>")).code).toBe(250)
      expect((await client.command(`RCPT TO:<${second.address}>`)).code).toBe(250)
      expect((await client.data(mail({ to: second.address, subject: "second transaction" }))).code).toBe(250)
    } finally {
      await client.quit()
    }
    expect(await storedFor(first.id)).toHaveLength(1)
    expect(await storedFor(second.id)).toHaveLength(1)
  })

  it("RSET forgets the recipients accepted before it", async () => {
    const dropped = await claim()
    const kept = await claim()
    const { client } = await session()
    try {
      expect((await client.command("MAIL FROM:<a@example.org>")).code).toBe(250)
      expect((await client.command(`RCPT TO:<${dropped.address}>`)).code).toBe(250)
      expect((await client.command("RSET")).code).toBe(250)
      expect((await client.command("MAIL FROM:<a@example.org>")).code).toBe(250)
      expect((await client.command(`RCPT TO:<${kept.address}>`)).code).toBe(250)
      expect((await client.data(mail({ to: kept.address, subject: "after RSET" }))).code).toBe(250)
    } finally {
      await client.quit()
    }
    expect(await storedFor(dropped.id)).toHaveLength(0)
    expect(await storedFor(kept.id)).toHaveLength(1)
  })
})

describe("DATA", () => {
  it("stores a big message (streamed to PostgreSQL in pieces) byte for byte, with its counters, and leaves no staging behind", async () => {
    const alias = await claim()
    const head = Buffer.from(`From: sender@example.org\r\nTo: ${alias.address}\r\nSubject: big\r\n\r\n`)
    // 60,000 distinct numbered lines (about 4.6 MB): a piece out of order or lost would show.
    const body = Buffer.from(Array.from({ length: 60_000 }, (_, i) => `line ${String(i).padStart(6, "0")} ${"abcdefghij".repeat(6)}\r\n`).join(""))
    const raw = Buffer.concat([head, body])
    const usedBefore = await accountUsed()
    expect((await deliver([alias.address], raw)).data?.code).toBe(250)
    const [stored] = await storedFor(alias.id)
    expect(stored!.size_bytes).toBe(raw.byteLength)
    const row = await h.storedRaw(stored!.id)
    expect(Buffer.compare(row!.raw, raw)).toBe(0)
    // Stored compressed (migration 0028): numbered lines shrink several times.
    expect(row!.zstd).toBe(true)
    expect(row!.storedBytes).toBeLessThan(raw.byteLength / 4)
    expect(await accountUsed()).toBe(usedBefore + raw.byteLength)
    expect(Number((await h.query<{ n: string }>("SELECT count(*) AS n FROM pg_largeobject_metadata"))[0]!.n)).toBe(0)
  })

  it("accepts an SMTPUTF8 envelope and 8-bit UTF-8 headers", async () => {
    const alias = await claim()
    const raw = mail({ to: alias.address, subject: "Grüße, 日本", from: "Jürgen <jürgen@bücher.example>" })
    const { client } = await session()
    try {
      const from = await client.command("MAIL FROM:<jürgen@bücher.example> SMTPUTF8 BODY=8BITMIME")
      expect(from.code, from.text).toBe(250)
      expect((await client.command(`RCPT TO:<${alias.address}>`)).code).toBe(250)
      const data = await client.data(raw)
      expect(data.code, data.text).toBe(250)
    } finally {
      await client.quit()
    }
    const [stored] = await storedFor(alias.id)
    expect(stored!.size_bytes).toBe(raw.byteLength)
    const detail = await processed(stored!.id)
    expect(detail.subject).toBe("Grüße, 日本")
  })

  it("stores exactly the bytes sent (8-bit UTF-8, dot-stuffed lines, trailing CRLF) and serves them as message/rfc822", async () => {
    const alias = await claim()
    const raw = Buffer.concat([
      mail({
        to: alias.address,
        subject: "=?UTF-8?B?w6TDtsO8?=",
        headers: ["MIME-Version: 1.0", "Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: 8bit", "X-Odd:   spaced\t value  "],
        body: "Grüße aus Köln — 日本語\n.a line starting with a dot\n..two dots\n.\nend"
      })
    ])
    const { data } = await deliver([alias.address], raw)
    expect(data?.code, data?.text).toBe(250)
    const [stored] = await storedFor(alias.id)
    expect(stored!.size_bytes).toBe(raw.byteLength)
    const answer = await fetch(`${h.baseUrl}/messages/${stored!.id}/raw`, {
      headers: { cookie: `service_session=${owner.cookie}` }
    })
    expect(answer.status).toBe(200)
    expect(answer.headers.get("content-type")).toMatch(/^message\/rfc822\b/)
    const bytes = Buffer.from(await answer.arrayBuffer())
    expect(bytes.equals(raw), `got ${bytes.byteLength} bytes, sent ${raw.byteLength}`).toBe(true)
  })

  it("refuses a message with bare LF line endings with 550 5.6.11 and stores nothing", async () => {
    const alias = await claim()
    const crlf = mail({ to: alias.address, subject: "smuggling" })
    const bareLf = Buffer.from(crlf.toString("latin1").replace("Hello.\r\n", "Hello.\nMAIL FROM:<x@example.org>\r\n"), "latin1")
    const { data } = await deliver([alias.address], bareLf)
    expect(data?.code, data?.text).toBe(550)
    expectEnhanced(data!, "5.6.11")
    expect(await storedFor(alias.id)).toHaveLength(0)
    expect((await aliasNow(alias.id)).receivedCount).toBe(0)
    // The same message with CRLF line endings is taken.
    const { data: again } = await deliver([alias.address], crlf)
    expect(again?.code).toBe(250)
    expect(await storedFor(alias.id)).toHaveLength(1)
  })

  it("refuses DATA over 15728640 bytes with 552 and stores nothing, counters untouched", async () => {
    const alias = await claim()
    const usedBefore = await accountUsed()
    const head = Buffer.from(`From: big@example.org\r\nTo: ${alias.address}\r\nSubject: too big\r\n\r\n`)
    const line = Buffer.from(`${"A".repeat(998)}\r\n`)
    const lines = Math.ceil((15_728_640 - head.length) / line.length) + 1
    const raw = Buffer.concat([head, ...Array.from({ length: lines }, () => line)])
    expect(raw.byteLength).toBeGreaterThan(15_728_640)
    expect(raw.byteLength).toBeLessThan(15_728_640 + 3_000)
    const { data } = await deliver([alias.address], raw)
    expect(data?.code, data?.text).toBe(552)
    expectEnhanced(data!, "5.3.4")
    expect(await storedFor(alias.id)).toHaveLength(0)
    const after = await aliasNow(alias.id)
    expect(after.receivedCount).toBe(0)
    expect(after.storageUsedBytes).toBe(0)
    expect(await accountUsed()).toBe(usedBefore)
  }, 60_000)
})

describe("counters written with the message", () => {
  it("receivedCount, unreadCount, storageUsedBytes and lastReceivedAt of the alias and the account's storage grow by the message size at the 250", async () => {
    const alias = await claim()
    expect(alias).toMatchObject({ receivedCount: 0, unreadCount: 0, storageUsedBytes: 0, lastReceivedAt: null })
    const usedBefore = await accountUsed()
    const first = mail({ to: alias.address, subject: "one", body: "x".repeat(500) })
    h.clock.advance("1 minute")
    const at1 = h.clock.now().toISOString()
    expect((await deliver([alias.address], first)).data?.code).toBe(250)
    // Read straight after the 250: the counters are committed with the message, not by the pipeline.
    const afterOne = await aliasNow(alias.id)
    expect(afterOne).toMatchObject({ receivedCount: 1, unreadCount: 1, storageUsedBytes: first.byteLength, lastReceivedAt: at1 })
    expect(await accountUsed()).toBe(usedBefore + first.byteLength)
    const storage = await h.request("/storage", { session: owner })
    expect(storage.status, storage.text).toBe(200)
    expect(storage.body.usedBytes).toBe(usedBefore + first.byteLength)

    const second = mail({ to: alias.address, subject: "two", body: "y".repeat(1500) })
    h.clock.advance("1 minute")
    const at2 = h.clock.now().toISOString()
    expect((await deliver([alias.address], second)).data?.code).toBe(250)
    const afterTwo = await aliasNow(alias.id)
    expect(afterTwo).toMatchObject({
      receivedCount: 2,
      unreadCount: 2,
      storageUsedBytes: first.byteLength + second.byteLength,
      lastReceivedAt: at2
    })
    expect(await accountUsed()).toBe(usedBefore + first.byteLength + second.byteLength)
    await h.worker.foldCounts()
    const [row] = await h.query<{ storage_used_bytes: string }>("SELECT storage_used_bytes FROM accounts WHERE id = $1", [owner.accountId])
    expect(Number(row!.storage_used_bytes)).toBe(usedBefore + first.byteLength + second.byteLength)
  })

  it("concurrent deliveries to one alias are each counted exactly once", async () => {
    const alias = await claim()
    const usedBefore = await accountUsed()
    const raws = Array.from({ length: 8 }, (_, i) => mail({ to: alias.address, subject: `parallel ${i}`, body: "z".repeat(100 * (i + 1)) }))
    const replies = await Promise.all(raws.map((raw) => deliver([alias.address], raw)))
    expect(replies.map((r) => r.data?.code)).toEqual(raws.map(() => 250))
    const total = raws.reduce((n, raw) => n + raw.byteLength, 0)
    expect((await storedFor(alias.id)).map((m) => m.size_bytes).sort((a, b) => a - b)).toEqual(raws.map((r) => r.byteLength).sort((a, b) => a - b))
    expect(await aliasNow(alias.id)).toMatchObject({ receivedCount: 8, unreadCount: 8, storageUsedBytes: total })
    expect(await accountUsed()).toBe(usedBefore + total)
  })

  it("a stored message's sizeBytes, receivedAt and expiresAt (pro: 90 days) come from the accepting transaction", async () => {
    const alias = await claim()
    const raw = mail({ to: alias.address, subject: "timing" })
    h.clock.advance("1 minute")
    const at = h.clock.now()
    expect((await deliver([alias.address], raw)).data?.code).toBe(250)
    const [stored] = await storedFor(alias.id)
    const detail = await processed(stored!.id)
    expect(detail.sizeBytes).toBe(raw.byteLength)
    expect(detail.receivedAt).toBe(at.toISOString())
    expect(detail.expiresAt).toBe(new Date(at.getTime() + 90 * 86_400_000).toISOString())
    expect(detail.source).toBe("smtp")
  })

  it("expiresAt follows the plan the account has when the message arrives, also right after a plan change", async () => {
    const who = await h.signup({ plan: "premium" })
    const alias = await claim(who)
    const expiryOf = async (subject: string) => {
      expect((await deliver([alias.address], mail({ to: alias.address, subject }))).data?.code).toBe(250)
      const [row] = await h.query<{ days: number }>(
        "SELECT extract(epoch FROM expires_at - received_at)::float8 / 86400 AS days FROM messages WHERE alias_id = $1 ORDER BY id DESC LIMIT 1",
        [alias.id]
      )
      return row!.days
    }
    expect(await expiryOf("premium: 30 days")).toBe(30)
    await h.setPlan(who.accountId, "free")
    expect(await expiryOf("free: 3 days")).toBe(3)
    await h.setPlan(who.accountId, "pro")
    expect(await expiryOf("pro: 90 days")).toBe(90)
  })
})
