/**
 * Protected operator desks (spec 2.7 canSend, 2.22, 4.6, 7, 8; decisions.md "Protected operator
 * desks"), against a real SMTP relay (testkit `Relay`): the operator's grant and revoke, the exact
 * message the relay receives, replies with their threading headers, every validation rule, session
 * only, 404 for anything but an active desk of the caller, the relay down or missing (503 and a
 * `failed` record), the hourly limits on the harness clock, the Sent list and its 90 days.
 */
import { Alias, DeskReply, DeskSentMail } from "@burnbox/domain"
import { transportOptions } from "@burnbox/store"
import { claimAlias, expectProblem, expectShape, type Harness, type Relay, RelayCredentials, sendMail, type Session, startHarness, startRelay } from "@burnbox/testkit"
import { Option, Redacted, Schema } from "effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"

let relay: Relay
let h: Harness
beforeAll(async () => {
  relay = await startRelay()
  h = await startHarness({ outboundSmtpUrl: Option.some(Redacted.make(relay.url)) })
})
afterAll(async () => {
  await h.close()
  await relay.stop()
})
// The send limits count across the service: each test starts past the last one's hour.
beforeEach(() => h.clock.advance("2 hours"))

const SentPage = Schema.Struct({ items: Schema.Array(DeskSentMail) })
const AliasList = Schema.Struct({ items: Schema.Array(Alias) })

/** An account with one alias made a desk as `burnbox admin desk grant` makes it (the CLI's own test is below). */
const newDesk = async (plan: "free" | "premium" | "pro" = "free") => {
  const session = await h.signup({ plan })
  const alias = await claimAlias(h, { session })
  await h.query("INSERT INTO desks (alias_id, account_id, granted_at) VALUES ($1, $2, now())", [alias.id, session.accountId])
  return { session, alias }
}

const send = (session: Session, aliasId: number, body: unknown) => h.request(`/desk-mail/${aliasId}`, { method: "POST", session, body })
const sentOf = async (session: Session, aliasId: number, page?: number) => {
  const answer = await h.request(`/desk-mail/${aliasId}${page === undefined ? "" : `?page=${page}`}`, { session })
  expect(answer.status, answer.text).toBe(200)
  return expectShape(SentPage, answer.body).items
}
const mail = { to: "customer@example.org", subject: "Your ticket", body: "Hello,\nwe fixed it.\n" }

/** Mail into the desk's mailbox over the harness's SMTP ingest. */
const receive = (to: string, headers: string, text = "Can you help?") =>
  sendMail(h, to, Buffer.from(`From: Customer <customer@example.org>\r\nTo: ${to}\r\n${headers}MIME-Version: 1.0\r\nContent-Type: text/plain\r\n\r\n${text}\r\n`))

describe("granting and revoking a desk", () => {
  it("admin desk grant prints the Alias with canSend, every alias of the owner carries it, and revoke ends it", async () => {
    const session = await h.signup()
    const desk = await claimAlias(h, { session })
    const other = await claimAlias(h, { session })
    expect(desk.canSend).toBeUndefined()

    const granted = await h.cli(["admin", "desk", "grant", "--alias", desk.address.toUpperCase()])
    expect(granted.code, granted.stderr).toBe(0)
    expect(expectShape(Alias, granted.json)).toMatchObject({ id: desk.id, address: desk.address, canSend: true })
    const listed = expectShape(AliasList, (await h.request("/aliases", { session })).body).items
    expect(listed.map((a) => [a.id, a.canSend])).toEqual([[desk.id, true], [other.id, true]])
    expect((await h.request(`/desk-mail/${desk.id}`, { session })).status).toBe(200)
    // Only the desk sends: the account's other aliases are no desks.
    expectProblem(await h.request(`/desk-mail/${other.id}`, { session }), 404, "not_found")

    const revoked = await h.cli(["admin", "desk", "revoke", "--alias", desk.address])
    expect(revoked.code, revoked.stderr).toBe(0)
    expect(revoked.json.id).toBe(desk.id)
    expect(revoked.json.canSend).toBeUndefined()
    expect(expectShape(AliasList, (await h.request("/aliases", { session })).body).items.every((a) => a.canSend === undefined)).toBe(true)
    expectProblem(await h.request(`/desk-mail/${desk.id}`, { session }), 404, "not_found")
    expectProblem(await send(session, desk.id, mail), 404, "not_found")
  })

  it("refuses an address no claimed, active alias has", async () => {
    const answer = await h.cli(["admin", "desk", "grant", "--alias", "nobody@burnbox.test"])
    expect(answer.code).not.toBe(0)
    expect(answer.stdout + answer.stderr).toContain("alias_not_found")
  })
})

describe("sending from a desk through the relay", () => {
  it("hands the relay exactly one plaintext message From the desk to the one recipient, and records it sent", async () => {
    const { session, alias } = await newDesk()
    const before = relay.received.length
    const answer = await send(session, alias.id, { ...mail, subject: "Ticket #12 — résolu", message_id: null })
    expect(answer.status, answer.text).toBe(201)
    expect(Object.keys(answer.body)).toEqual(["id"])

    expect(relay.received).toHaveLength(before + 1)
    const got = relay.received.at(-1)!
    expect(got.user).toBe(RelayCredentials.user)
    expect(got.envelope).toEqual({ from: alias.address, to: ["customer@example.org"] })
    expect(got.parsed.sender.address).toBe(alias.address)
    expect(got.parsed.to).toEqual(["customer@example.org"])
    expect(got.parsed.subject).toBe("Ticket #12 — résolu")
    expect(got.parsed.text).toBe("Hello,\nwe fixed it.\n")
    expect(got.parsed.html).toBeNull()
    expect(got.parsed.attachments).toEqual([])
    expect(got.parsed.headers["in-reply-to"]).toBeUndefined()
    expect(got.raw.toString("latin1")).not.toMatch(/^(cc|bcc):/im)

    const items = await sentOf(session, alias.id)
    expect(items).toEqual([{
      id: answer.body.id,
      recipient: "customer@example.org",
      subject: "Ticket #12 — résolu",
      body: "Hello,\nwe fixed it.\n",
      status: "sent",
      sent_at: h.clock.now().toISOString()
    }])
  })

  it("sends through a relay on this machine that offers STARTTLS with a self-signed certificate, over TLS", async () => {
    const tlsRelay = await startRelay({ startTls: true })
    const viaTls = await startHarness({ outboundSmtpUrl: Option.some(Redacted.make(tlsRelay.url)) }, h)
    try {
      const { session, alias } = await newDesk()
      const answer = await viaTls.request(`/desk-mail/${alias.id}`, { method: "POST", session, body: mail })
      expect(answer.status, answer.text).toBe(201)
      expect(tlsRelay.received).toHaveLength(1)
      expect(tlsRelay.received[0]).toMatchObject({ secure: true, user: RelayCredentials.user, envelope: { from: alias.address, to: [mail.to] } })
    } finally {
      await viaTls.close()
      await tlsRelay.stop()
    }
  })

  it("checks the certificate of every relay that is not on this machine", () => {
    expect(transportOptions("smtp://u:p@127.0.0.1:2525").tls).toEqual({ rejectUnauthorized: false })
    expect(transportOptions("smtp://localhost:2525").tls).toEqual({ rejectUnauthorized: false })
    expect(transportOptions("smtp://[::1]:2525").tls).toEqual({ rejectUnauthorized: false })
    for (const url of ["smtp://u:p@relay.example.com:587", "smtps://relay.example.com", "smtp://10.0.0.5:25", "smtp://127.example.com"]) {
      expect(transportOptions(url), url).not.toHaveProperty("tls")
    }
  })

  it("prefills a reply from a message of the desk's mailbox and threads the sent reply", async () => {
    const { session, alias } = await newDesk()
    const id = await receive(alias.address, "Subject: Broken login\r\nMessage-ID: <q2@example.org>\r\nReferences: <q1@example.org>\r\nReply-To: Help Desk <help@example.org>\r\n")
    const prefill = await h.request(`/desk-mail/${alias.id}/reply/${id}`, { session })
    expect(prefill.status, prefill.text).toBe(200)
    expect(expectShape(DeskReply, prefill.body)).toEqual({ to: "help@example.org", subject: "Re: Broken login", message_id: id })

    const again = await receive(alias.address, "Subject: RE: Broken login\r\n")
    expect((await h.request(`/desk-mail/${alias.id}/reply/${again}`, { session })).body).toEqual({
      to: "customer@example.org",
      subject: "RE: Broken login",
      message_id: again
    })

    const sent = await send(session, alias.id, { to: prefill.body.to, subject: prefill.body.subject, body: "Try again now.", message_id: id })
    expect(sent.status, sent.text).toBe(201)
    const got = relay.received.at(-1)!
    expect(got.envelope.to).toEqual(["help@example.org"])
    expect(got.parsed.subject).toBe("Re: Broken login")
    expect(got.parsed.headers["in-reply-to"]).toBe("<q2@example.org>")
    expect(got.parsed.headers["references"]).toBe("<q1@example.org> <q2@example.org>")
  })

  it("refuses a reply target from another mailbox, another account or nowhere with 422 naming the field", async () => {
    const { session, alias } = await newDesk()
    const ownOther = await claimAlias(h, { session })
    const elsewhere = await receive(ownOther.address, "Subject: not for the desk\r\n")
    const stranger = await newDesk()
    const strangers = await receive(stranger.alias.address, "Subject: someone else's\r\n")
    const before = relay.received.length
    for (const target of [elsewhere, strangers, 999_999]) {
      const answer = await send(session, alias.id, { ...mail, message_id: target })
      expectProblem(answer, 422, "validation_failed")
      expect(answer.body.error.fields).toEqual({ message_id: "unavailable_reply_target" })
      const prefill = await h.request(`/desk-mail/${alias.id}/reply/${target}`, { session })
      expectProblem(prefill, 422, "validation_failed")
      expect(prefill.body.error.fields).toEqual({ messageId: "unavailable_reply_target" })
    }
    expect(relay.received.length).toBe(before)
    expect(await sentOf(session, alias.id)).toEqual([])
  })
})

describe("validation", () => {
  const cases: ReadonlyArray<readonly [string, Record<string, unknown>, Record<string, string>]> = [
    ["to missing", { subject: "s", body: "b" }, { to: "required" }],
    ["subject missing", { to: "a@example.org", body: "b" }, { subject: "required" }],
    ["body missing", { to: "a@example.org", subject: "s" }, { body: "required" }],
    ["to not an address", { ...mail, to: "not-an-address" }, { to: "invalid_recipient" }],
    ["two recipients", { ...mail, to: "a@example.org, b@example.org" }, { to: "invalid_recipient" }],
    ["two recipients without a space", { ...mail, to: "a,b@example.org" }, { to: "invalid_recipient" }],
    ["a display name", { ...mail, to: "Ann <a@example.org>" }, { to: "invalid_recipient" }],
    ["to not a string", { ...mail, to: ["a@example.org"] }, { to: "invalid_type" }],
    ["a CR in the subject", { ...mail, subject: "hi\rBcc: x@example.org" }, { subject: "line_break_not_allowed" }],
    ["an LF in the subject", { ...mail, subject: "hi\nthere" }, { subject: "line_break_not_allowed" }],
    ["a subject of 999 bytes", { ...mail, subject: "€".repeat(333) }, { subject: "too_long" }],
    ["a body of 65,537 bytes", { ...mail, body: "é".repeat(32_768) + "x" }, { body: "too_long" }],
    ["attachments", { ...mail, attachments: [{ filename: "a.txt", content: "aGk=" }] }, { attachments: "unknown_field" }],
    ["cc", { ...mail, cc: "b@example.org" }, { cc: "unknown_field" }],
    ["html", { ...mail, html: "<p>hi</p>" }, { html: "unknown_field" }],
    ["message_id 0", { ...mail, message_id: 0 }, { message_id: "too_small" }],
    ["message_id not an integer", { ...mail, message_id: "12" }, { message_id: "invalid_value" }]
  ]
  it.each(cases)("refuses %s with 422 naming the field, and sends nothing", async (_name, body, fields) => {
    const { session, alias } = await newDesk()
    const before = relay.received.length
    const answer = await send(session, alias.id, body)
    expectProblem(answer, 422, "validation_failed")
    expect(answer.body.error.fields).toEqual(fields)
    expect(relay.received.length).toBe(before)
  })

  it("takes a subject of exactly 998 bytes and a body of exactly 65,536 bytes", async () => {
    const { session, alias } = await newDesk()
    const subject = "€".repeat(332) + "xx"
    const body = "é".repeat(32_768)
    const answer = await send(session, alias.id, { to: "a@example.org", subject, body })
    expect(answer.status, answer.text).toBe(201)
    expect(relay.received.at(-1)!.parsed.subject).toBe(subject)
    expect(relay.received.at(-1)!.parsed.text?.replace(/\n$/, "")).toBe(body)
  })
})

describe("who may use a desk", () => {
  it("refuses bearer tokens with 403 on all three endpoints, and a session without its CSRF token on POST", async () => {
    const { session, alias } = await newDesk("pro")
    const id = await receive(alias.address, "Subject: q\r\n")
    const token = await h.createToken(session, ["read", "manage-aliases", "delete", "webhooks", "test"])
    expectProblem(await h.request(`/desk-mail/${alias.id}`, { token }), 403, "session_required")
    expectProblem(await h.request(`/desk-mail/${alias.id}`, { method: "POST", token, body: mail }), 403, "session_required")
    expectProblem(await h.request(`/desk-mail/${alias.id}/reply/${id}`, { token }), 403, "session_required")
    expectProblem(await h.request(`/desk-mail/${alias.id}`, { method: "POST", session, withoutCsrf: true, body: mail }), 403, "invalid_csrf_token")
    expect(await sentOf(session, alias.id)).toEqual([])
  })

  it("answers 404 for an alias that is no desk, another account's desk, a burned desk and a missing alias", async () => {
    const { session, alias } = await newDesk()
    const plain = await claimAlias(h, { session: await h.signup() })
    const stranger = await newDesk()
    const burned = await newDesk()
    expect((await h.request(`/aliases/${burned.alias.id}/burn`, { method: "POST", session: burned.session })).status).toBe(200)
    const id = await receive(alias.address, "Subject: q\r\n")
    const refusals: ReadonlyArray<readonly [Session, number]> = [
      [session, plain.id],
      [session, stranger.alias.id],
      [burned.session, burned.alias.id],
      [session, 987_654]
    ]
    for (const [who, aliasId] of refusals) {
      expectProblem(await h.request(`/desk-mail/${aliasId}`, { session: who }), 404, "not_found")
      expectProblem(await send(who, aliasId, mail), 404, "not_found")
      expectProblem(await h.request(`/desk-mail/${aliasId}/reply/${id}`, { session: who }), 404, "not_found")
    }
    expect(expectShape(AliasList, (await h.request("/aliases", { session: burned.session })).body).items.every((a) => a.canSend === undefined)).toBe(true)
  })
})

describe("when sending is unavailable", () => {
  it("answers 503 while the relay is down, with the attempt recorded failed, and sends again once it is back", async () => {
    const { session, alias } = await newDesk()
    await relay.stop()
    let down
    try {
      down = await send(session, alias.id, mail)
    } finally {
      await relay.start()
    }
    expectProblem(down, 503, "sending_unavailable")
    expect(down.body.error.message).toContain("Check Sent before retrying")
    const [failed] = await sentOf(session, alias.id)
    expect(failed).toMatchObject({ status: "failed", recipient: mail.to, subject: mail.subject })
    const [row] = await h.query("SELECT failure FROM desk_sent_mail WHERE id = $1", [failed!.id])
    expect(row.failure).toMatch(/ECONNREFUSED|ESOCKET|ECONNECTION/)
    expect(row.failure).not.toContain(RelayCredentials.pass)

    const back = await send(session, alias.id, mail)
    expect(back.status, back.text).toBe(201)
    expect((await sentOf(session, alias.id)).map((s) => s.status)).toEqual(["sent", "failed"])
  })

  it("answers 503 when the relay refuses the credentials, recording why without them", async () => {
    const wrong = relay.url.replace(RelayCredentials.pass, "not-the-password")
    const refused = await startHarness({ outboundSmtpUrl: Option.some(Redacted.make(wrong)) }, h)
    try {
      const { session, alias } = await newDesk()
      const before = relay.received.length
      const answer = await refused.request(`/desk-mail/${alias.id}`, { method: "POST", session, body: mail })
      expectProblem(answer, 503, "sending_unavailable")
      expect(relay.received.length).toBe(before)
      const [row] = await h.query("SELECT status, failure FROM desk_sent_mail WHERE alias_id = $1", [alias.id])
      expect(row.status).toBe("failed")
      expect(row.failure).toContain("EAUTH")
      expect(row.failure).not.toContain("not-the-password")
      expect(answer.text).not.toContain("not-the-password")
    } finally {
      await refused.close()
    }
  })

  it("answers 503 and records nothing when no relay is configured", async () => {
    const noRelay = await startHarness({}, h)
    try {
      const { session, alias } = await newDesk()
      const answer = await noRelay.request(`/desk-mail/${alias.id}`, { method: "POST", session, body: mail })
      expectProblem(answer, 503, "sending_unavailable")
      expect(answer.body.error.message).toContain("Check Sent before retrying")
      expect(await sentOf(session, alias.id)).toEqual([])
    } finally {
      await noRelay.close()
    }
  })

  it("a record is pending before the relay is asked: a send cut short leaves it pending, never unrecorded", async () => {
    const { session, alias } = await newDesk()
    // A relay that never answers the greeting: the send waits on it while the record already exists.
    const { createServer } = await import("node:net")
    const silent = createServer(() => {})
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve))
    const port = (silent.address() as { port: number }).port
    const stalled = await startHarness({ outboundSmtpUrl: Option.some(Redacted.make(`smtp://127.0.0.1:${port}`)) }, h)
    try {
      const pending = stalled.request(`/desk-mail/${alias.id}`, { method: "POST", session, body: mail, signal: AbortSignal.timeout(1_500) })
      await expect(pending).rejects.toThrow()
      const rows = await h.query("SELECT status FROM desk_sent_mail WHERE alias_id = $1", [alias.id])
      expect(rows.map((r) => r.status)).toEqual(["pending"])
    } finally {
      silent.close()
      await stalled.close()
    }
  })
})

describe("send limits", () => {
  it("allows 10 sends per account per hour, then 429 with Retry-After until the first leaves the hour", async () => {
    const { session, alias } = await newDesk()
    const start = h.clock.now().getTime()
    for (let i = 0; i < 10; i++) {
      h.clock.set(start + i * 60_000)
      expect((await send(session, alias.id, { ...mail, subject: `n${i}` })).status).toBe(201)
    }
    const before = relay.received.length
    const limited = await send(session, alias.id, mail)
    expectProblem(limited, 429, "desk_send_limit_reached")
    // The first send (at start) leaves the hour at start + 60 min; now is start + 9 min.
    expect(limited.headers.get("retry-after")).toBe(String(51 * 60))
    // Another account's desk still sends.
    const other = await newDesk()
    expect((await send(other.session, other.alias.id, mail)).status).toBe(201)

    h.clock.set(start + 60 * 60_000 - 1_000)
    expect((await send(session, alias.id, mail)).headers.get("retry-after")).toBe("1")
    expect(relay.received.length).toBe(before + 1)
    h.clock.set(start + 60 * 60_000)
    expect((await send(session, alias.id, mail)).status).toBe(201)
    expectProblem(await send(session, alias.id, mail), 429, "desk_send_limit_reached")
  })

  it("allows 60 sends per hour across the service, then 429 for every account", async () => {
    const desks = await Promise.all(Array.from({ length: 7 }, () => newDesk()))
    for (const { session, alias } of desks.slice(0, 6)) {
      for (let i = 0; i < 10; i++) expect((await send(session, alias.id, mail)).status).toBe(201)
    }
    const last = desks[6]!
    const limited = await send(last.session, last.alias.id, mail)
    expectProblem(limited, 429, "desk_send_limit_reached")
    expect(limited.body.error.message).toContain("across the service")
    expect(limited.headers.get("retry-after")).toBe("3600")
    h.clock.advance("1 hour")
    expect((await send(last.session, last.alias.id, mail)).status).toBe(201)
  })

  it("counts a failed attempt", async () => {
    const { session, alias } = await newDesk()
    await relay.stop()
    try {
      for (let i = 0; i < 10; i++) expectProblem(await send(session, alias.id, mail), 503, "sending_unavailable")
    } finally {
      await relay.start()
    }
    expectProblem(await send(session, alias.id, mail), 429, "desk_send_limit_reached")
  })
})

describe("the Sent list", () => {
  it("lists 50 records a page, newest first", async () => {
    const { session, alias } = await newDesk()
    const ids: Array<number> = []
    for (let i = 0; i < 55; i++) {
      if (i % 10 === 0) h.clock.advance("61 minutes")
      const answer = await send(session, alias.id, { ...mail, subject: `s${i}` })
      expect(answer.status, answer.text).toBe(201)
      ids.push(answer.body.id)
    }
    const first = await sentOf(session, alias.id)
    expect(first.map((s) => s.id)).toEqual(ids.toReversed().slice(0, 50))
    expect((await sentOf(session, alias.id, 1)).map((s) => s.id)).toEqual(first.map((s) => s.id))
    expect((await sentOf(session, alias.id, 2)).map((s) => s.id)).toEqual(ids.slice(0, 5).toReversed())
    expect(await sentOf(session, alias.id, 3)).toEqual([])
    for (const page of ["0", "-1", "x", "1.5"]) {
      expectProblem(await h.request(`/desk-mail/${alias.id}?page=${page}`, { session }), 422, "validation_failed")
    }
  })

  // Last in the file: it moves the clock 91 days.
  it("keeps records 90 days: the retention job deletes older ones", async () => {
    const desk = await newDesk()
    const old = await send(desk.session, desk.alias.id, { ...mail, subject: "old" })
    h.clock.advance("89 days")
    // Sessions last 30 days: sign in again at the new time.
    const login = await h.request("/auth/login", { method: "POST", body: { email: desk.session.email, password: "correct horse battery" } })
    expect(login.status, login.text).toBe(200)
    const cookie = /service_session=([^;]+)/.exec(login.headers.get("set-cookie") ?? "")![1]!
    const csrf = (await h.request("/bootstrap", { headers: { cookie: `service_session=${cookie}` } })).body.csrfToken as string
    const session: Session = { ...desk.session, cookie, csrf }
    const alias = desk.alias
    const recent = await send(session, alias.id, { ...mail, subject: "recent" })
    expect((await sentOf(session, alias.id)).map((s) => s.id)).toEqual([recent.body.id, old.body.id])
    const kept = async () => (await h.query("SELECT id FROM desk_sent_mail WHERE alias_id = $1 ORDER BY id", [alias.id])).map((r) => r.id)
    await h.worker.retention()
    expect(await kept()).toEqual([old.body.id, recent.body.id])
    h.clock.advance("1 day")
    // The worker's retention job (every five minutes) deletes what is 90 days old.
    await h.worker.retention()
    expect(await kept()).toEqual([recent.body.id])
    expect((await sentOf(session, alias.id)).map((s) => s.id)).toEqual([recent.body.id])
  })
})
