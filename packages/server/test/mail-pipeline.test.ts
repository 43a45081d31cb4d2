/**
 * The message pipeline on mail that arrived over SMTP (spec 1, 2.10, 2.11, 3.4, 6.1, 6.3, 7;
 * architecture.md "The message pipeline"): every MessageDetail field, what parsing extracts
 * (sender, lowercase headers, otpCodes, verificationLinks, snippet, attachments with the
 * dangerous flag and previews only for safe images), the events written exactly once, mail that
 * cannot be parsed (failed, raw bytes kept), the raw download and who may read a message.
 */
import { Alias, CandidateReservation, MessageDetail, MessagePage } from "@burnbox/domain"
import { expectProblem, expectShape, type Harness, type Session, startHarness, SmtpClient } from "@burnbox/testkit"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let owner: Session
let stranger: Session
let readToken: string
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 5501 })
  ;[owner, stranger] = await Promise.all([h.signup({ plan: "pro" }), h.signup({ plan: "pro" })])
  readToken = await h.createToken(owner, ["read"])
})
afterAll(() => h.close())

// ---------------------------------------------------------------------------------------------
// A raw SMTP client


const deliver = async (to: string, raw: Uint8Array) => {
  const client = await SmtpClient.open(h.smtpPort)
  try {
    expect((await client.read()).code).toBe(220)
    expect((await client.command("EHLO client.example.org")).code).toBe(250)
    expect((await client.command("MAIL FROM:<bounce@mailer.example>")).code).toBe(250)
    const rcpt = await client.command(`RCPT TO:<${to}>`)
    expect(rcpt.code, rcpt.text).toBe(250)
    const data = await client.data(raw)
    expect(data.code, data.text).toBe(250)
  } finally {
    await client.quit()
  }
}

const crlf = (text: string) => Buffer.from(text.replace(/\r?\n/g, "\r\n"), "utf8")

// ---------------------------------------------------------------------------------------------
// Aliases, messages, events

type Reservation = typeof CandidateReservation.Type

const claim = async (extra: Record<string, unknown> = {}, who: Session = owner) => {
  const reservation = await h.request<Reservation>("/aliases/candidates", { method: "POST", session: who, body: { domainId: 1, style: "numeric" } })
  expect(reservation.status, reservation.text).toBe(200)
  const answer = await h.request("/aliases", {
    method: "POST",
    session: who,
    body: { aliasId: reservation.body.candidates[0]!.id, reservationToken: reservation.body.reservationToken, ...extra }
  })
  expect(answer.status, answer.text).toBe(201)
  return expectShape(Alias, answer.body)
}

/** Sends over SMTP and answers the id of the one message stored for the alias by it. */
const receive = async (alias: { id: number; address: string }, raw: Uint8Array) => {
  const before = await h.query<{ id: number }>("SELECT id FROM messages WHERE alias_id = $1", [alias.id])
  await deliver(alias.address, raw)
  const after = await h.query<{ id: number }>("SELECT id FROM messages WHERE alias_id = $1 ORDER BY id", [alias.id])
  const fresh = after.filter((row) => !before.some((b) => b.id === row.id))
  expect(fresh).toHaveLength(1)
  return fresh[0]!.id
}

type Detail = typeof MessageDetail.Type

/** Polls GET /messages/{id} until processed or failed, at most 15 s. */
const settled = async (id: number, who: { session: Session } | { token: string } = { session: owner }): Promise<Detail> => {
  const deadline = Date.now() + 15_000
  for (;;) {
    const answer = await h.request(`/messages/${id}`, who)
    expect(answer.status, answer.text).toBe(200)
    if (answer.body.processingStatus === "processed" || answer.body.processingStatus === "failed") return answer.body
    if (Date.now() > deadline) throw new Error(`message ${id} still ${answer.body.processingStatus} after 15 s`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

const rawOf = async (id: number, who: Session = owner) => {
  const response = await fetch(`${h.baseUrl}/messages/${id}/raw`, { headers: { cookie: `service_session=${who.cookie}` } })
  return { status: response.status, type: response.headers.get("content-type"), bytes: Buffer.from(await response.arrayBuffer()) }
}

const eventsOf = (id: number) =>
  h.query<{ id: string; type: string; alias_id: number | null; account_id: number; time: Date; data: any }>(
    "SELECT id, type, alias_id, account_id, time, data FROM events WHERE data->>'message_id' = $1 ORDER BY type",
    [String(id)]
  )

const Email = /^[^\s@]+@[^\s@]+\.[^\s@]+$/
const EventId = /^evt_[0-9A-HJKMNP-TV-Z]{26}$/
const Iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/

// Spec 6.3, with no extra properties.
const EventAlias = Schema.Struct({ id: Schema.Int, address: Schema.String, label: Schema.NullOr(Schema.String) })
const EventOtp = Schema.Struct({ code: Schema.NullOr(Schema.String), links: Schema.Array(Schema.String).check(Schema.isMaxLength(3)) })
const MessageReceivedData = Schema.Struct({
  alias: EventAlias,
  message_id: Schema.Int,
  from: Schema.Struct({ address: Schema.String, name: Schema.NullOr(Schema.String) }),
  subject: Schema.String,
  snippet: Schema.String,
  otp: EventOtp,
  auth: Schema.Struct({ spf: Schema.NullOr(Schema.String), dkim: Schema.NullOr(Schema.String), dmarc: Schema.NullOr(Schema.String) }),
  spam_score: Schema.NullOr(Schema.Finite),
  size: Schema.Int,
  has_attachments: Schema.Boolean,
  source: Schema.Literals(["smtp", "test"]),
  received_at: Schema.String,
  url: Schema.String,
  text_body: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(32768)))
}).annotate({ identifier: "message.received data" })
const OtpExtractedData = Schema.Struct({
  alias: EventAlias,
  message_id: Schema.Int,
  otp: EventOtp,
  source: Schema.Literals(["smtp", "test"]),
  received_at: Schema.String,
  url: Schema.String
}).annotate({ identifier: "message.otp_extracted data" })

// ---------------------------------------------------------------------------------------------
// Fixtures

const png = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "base64")
const exe = Buffer.concat([Buffer.from("MZ"), Buffer.alloc(62, 0x90)])
const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')
const pdf = Buffer.from("%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n")
const b64 = (bytes: Buffer) => (bytes.toString("base64").match(/.{1,76}/g) ?? []).join("\r\n")

const richMessage = (to: string) =>
  crlf(`From: "Acme Support" <support@acme.example>
To: ${to}
Subject: Verify your Acme account
Date: Sat, 21 Nov 2026 11:59:00 +0000
Message-ID: <rich-1@acme.example>
X-Campaign: one
X-Campaign: two
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="mixed-b"

--mixed-b
Content-Type: multipart/alternative; boundary="alt-b"

--alt-b
Content-Type: text/plain; charset=utf-8

Hello,

Your verification code is 482913. Your order 20261121 ships to postcode 10115.

Verify your email: https://acme.example/verify?token=abc123

Unsubscribe: https://acme.example/unsubscribe?u=1
--alt-b
Content-Type: text/html; charset=utf-8

<p>Hello,</p><p>Your verification code is <b>482913</b>. Your order 20261121 ships to postcode 10115.</p>
<p><a href="https://acme.example/verify?token=abc123">Verify your email</a></p>
<img src="https://tracker.example/pixel.png" alt="">
<p><a href="https://acme.example/unsubscribe?u=1">Unsubscribe</a></p>
--alt-b--
--mixed-b
Content-Type: image/png; name="logo.png"
Content-Disposition: attachment; filename="logo.png"
Content-Transfer-Encoding: base64

${b64(png)}
--mixed-b
Content-Type: application/octet-stream; name="setup.exe"
Content-Disposition: attachment; filename="setup.exe"
Content-Transfer-Encoding: base64

${b64(exe)}
--mixed-b
Content-Type: image/svg+xml; name="chart.svg"
Content-Disposition: attachment; filename="chart.svg"
Content-Transfer-Encoding: base64

${b64(svg)}
--mixed-b
Content-Type: application/pdf; name="invoice.pdf"
Content-Disposition: attachment; filename="invoice.pdf"
Content-Transfer-Encoding: base64

${b64(pdf)}
--mixed-b--
`)

const plainMessage = (to: string, subject: string, body: string) =>
  crlf(`From: news@shop.example
To: ${to}
Subject: ${subject}
Date: Sat, 21 Nov 2026 11:59:00 +0000
Message-ID: <${subject.replace(/\W/g, "")}-${Date.now()}@shop.example>

${body}
`)

// ---------------------------------------------------------------------------------------------

describe("MessageDetail of a processed SMTP message (spec 2.10, 2.11)", () => {
  let alias: typeof Alias.Type
  let id: number
  let raw: Buffer
  let detail: Detail
  let receivedAt: Date
  beforeAll(async () => {
    alias = await claim({ label: "shop" })
    raw = richMessage(alias.address)
    h.clock.advance("1 minute")
    receivedAt = h.clock.now()
    id = await receive(alias, raw)
    detail = await settled(id)
  })

  it("has every field of MessageSummary and MessageDetail with its type, and nothing the schema does not name", async () => {
    const answer = await h.request(`/messages/${id}`, { token: readToken })
    expect(answer.status, answer.text).toBe(200)
    expectShape(MessageDetail, answer.body)
    expect(answer.body.processingStatus).toBe("processed")
  })

  it("names the source, the alias (id, address, label, domain) and the sender (display name and address)", () => {
    expect(detail.id).toBe(id)
    expect(detail.source).toBe("smtp")
    expect(detail.alias).toEqual({ id: alias.id, address: alias.address, label: "shop", domain: "burnbox.test" })
    expect(detail.sender).toEqual({ name: "Acme Support", address: "support@acme.example" })
    expect(detail.subject).toBe("Verify your Acme account")
  })

  it("has receivedAt at acceptance, expiresAt at the pro retention of 90 days, sizeBytes the raw size", () => {
    expect(detail.receivedAt).toBe(receivedAt.toISOString())
    expect(detail.expiresAt).toBe(new Date(receivedAt.getTime() + 90 * 86_400_000).toISOString())
    expect(detail.sizeBytes).toBe(raw.byteLength)
  })

  it("starts unread, unstarred, unpinned, unarchived, untagged and out of the trash", () => {
    expect(detail).toMatchObject({
      isRead: false,
      unread: true,
      starred: false,
      pinned: false,
      archived: false,
      trashed: false,
      trashedAt: null,
      trashPurgeAt: null,
      tags: []
    })
    expect(detail.unread).toBe(!detail.isRead)
  })

  it("lists digit runs of 4 to 8 as otpCodes in order of appearance, at most 3", () => {
    expect(detail.otpCodes).toEqual(["482913", "20261121", "10115"])
  })

  it("puts the verification link first in verificationLinks and leaves out the unsubscribe footer link", () => {
    expect(detail.verificationLinks.length).toBeLessThanOrEqual(3)
    expect(detail.verificationLinks[0]).toBe("https://acme.example/verify?token=abc123")
    expect(detail.verificationLinks.some((l) => /unsubscribe/i.test(l))).toBe(false)
    for (const link of detail.verificationLinks) expect(() => new URL(link)).not.toThrow()
  })

  it("keys headers by lowercase name, keeping repeated headers", () => {
    const names = Object.keys(detail.headers)
    expect(names.length).toBeGreaterThan(5)
    for (const name of names) expect(name).toBe(name.toLowerCase())
    expect(detail.headers["subject"]).toBe("Verify your Acme account")
    expect(detail.headers["message-id"]).toContain("rich-1@acme.example")
    expect([detail.headers["x-campaign"]].flat()).toEqual(["one", "two"])
    expect(detail.headers["X-Campaign" as keyof typeof detail.headers]).toBeUndefined()
  })

  it("has a text snippet, the text body, an HTML view with remote images blocked, and a raw URL", async () => {
    expect(detail.snippet).toContain("verification code is 482913")
    expect(detail.snippet).not.toMatch(/[<>]/)
    expect(detail.textBody).toContain("Your verification code is 482913.")
    expect(typeof detail.htmlUrl).toBe("string")
    expect(detail.remoteImages).toEqual({ blockedUrl: expect.any(String), loadUrl: expect.any(String), alwaysLoadFromSender: false })
    expect(detail.rawUrl).toMatch(new RegExp(`/messages/${id}/raw$`))
    expect(detail.hasAttachments).toBe(true)
    expect(detail.auth).toEqual({ spf: expect.toSatisfy((v: unknown) => v === null || typeof v === "string"), dkim: expect.toSatisfy((v: unknown) => v === null || typeof v === "string"), dmarc: expect.toSatisfy((v: unknown) => v === null || typeof v === "string") })
    expect(detail.spamScore === null || typeof detail.spamScore === "number").toBe(true)
  })

  it("lists attachments in order with decoded sizes; executables and SVG are dangerous; only the PNG has a previewUrl", () => {
    expect(detail.attachments.map((a) => a.filename)).toEqual(["logo.png", "setup.exe", "chart.svg", "invoice.pdf"])
    const [logo, setup, chart, invoice] = detail.attachments
    expect(logo).toMatchObject({ mimeType: "image/png", sizeBytes: png.byteLength, dangerous: false, previewUrl: expect.any(String) })
    expect(setup).toMatchObject({ sizeBytes: exe.byteLength, dangerous: true, previewUrl: null })
    expect(chart).toMatchObject({ mimeType: "image/svg+xml", sizeBytes: svg.byteLength, dangerous: true, previewUrl: null })
    expect(invoice).toMatchObject({ mimeType: "application/pdf", sizeBytes: pdf.byteLength, dangerous: false, previewUrl: null })
    for (const a of detail.attachments) {
      expect(a.id).toBeGreaterThanOrEqual(1)
      expect(a.downloadUrl).toMatch(new RegExp(`/messages/${id}/attachments/${a.id}$`))
    }
    expect(new Set(detail.attachments.map((a) => a.id)).size).toBe(4)
  })

  it("serves the raw bytes exactly as received, as message/rfc822", async () => {
    const answer = await rawOf(id)
    expect(answer.status).toBe(200)
    expect(answer.type).toMatch(/^message\/rfc822\b/)
    expect(answer.bytes.equals(raw)).toBe(true)
  })

  it("carries a weak ETag, and If-None-Match with it answers 304 (spec 4 conventions, 7)", async () => {
    const first = await h.request(`/messages/${id}`, { token: readToken })
    const etag = first.headers.get("etag")
    expect(etag ?? "(no ETag header)").toMatch(/^W\/".+"$/)
    const again = await h.request(`/messages/${id}`, { token: readToken, headers: { "if-none-match": etag ?? "" } })
    expect(again.status).toBe(304)
  })
})

describe("a message without HTML, attachments or codes", () => {
  it("has htmlUrl and remoteImages null, no attachments, empty otpCodes and verificationLinks", async () => {
    const alias = await claim()
    const id = await receive(alias, plainMessage(alias.address, "Weekly news", "Nothing to verify here, just words."))
    const detail = await settled(id)
    expectShape(MessageDetail, detail)
    expect(detail).toMatchObject({
      processingStatus: "processed",
      htmlUrl: null,
      remoteImages: null,
      attachments: [],
      hasAttachments: false,
      otpCodes: [],
      verificationLinks: [],
      sender: { name: null, address: "news@shop.example" },
      alias: { label: null }
    })
    expect(detail.textBody).toContain("Nothing to verify here")
  })

  it("keeps only the first three codes, in order of appearance", async () => {
    const alias = await claim()
    const id = await receive(alias, plainMessage(alias.address, "Codes", "Codes: 1111 then 22222 then 333333 then 4444444."))
    expect((await settled(id)).otpCodes).toEqual(["1111", "22222", "333333"])
  })

  it("takes codes from the HTML when there is no text part", async () => {
    const alias = await claim()
    const raw = crlf(`From: Bank <no-reply@bank.example>
To: ${alias.address}
Subject: Sign-in
MIME-Version: 1.0
Content-Type: text/html; charset=utf-8

<html><body><p>Your sign-in code: <strong>605118</strong></p></body></html>
`)
    const detail = await settled(await receive(alias, raw))
    expect(detail.otpCodes).toEqual(["605118"])
    expect(typeof detail.htmlUrl).toBe("string")
  })
})

describe("events (spec 6.1, 6.3)", () => {
  it("writes message.received and message.otp_extracted exactly once each, with the data of 6.3", async () => {
    const alias = await claim({ label: "Signups" })
    h.clock.advance("1 minute")
    const id = await receive(alias, richMessage(alias.address))
    const detail = await settled(id)
    // A later message goes through the pipeline too, so any repeat of the first would have happened.
    await settled(await receive(alias, plainMessage(alias.address, "later", "later")))
    const events = await eventsOf(id)
    expect(events.map((e) => e.type)).toEqual(["message.otp_extracted", "message.received"])
    for (const event of events) {
      expect(event.id).toMatch(EventId)
      expect(event.account_id).toBe(owner.accountId)
      expect(event.alias_id).toBe(alias.id)
    }
    const received = expectShape(MessageReceivedData, events.find((e) => e.type === "message.received")!.data)
    expect(received).toMatchObject({
      alias: { id: alias.id, address: alias.address, label: "Signups" },
      message_id: id,
      from: { address: "support@acme.example", name: "Acme Support" },
      subject: "Verify your Acme account",
      snippet: detail.snippet,
      otp: { code: "482913", links: detail.verificationLinks },
      auth: detail.auth,
      spam_score: detail.spamScore,
      size: detail.sizeBytes,
      has_attachments: true,
      source: "smtp",
      received_at: detail.receivedAt
    })
    expect(received.from.address).toMatch(Email)
    expect(received.received_at).toMatch(Iso)
    expect(received.url).toMatch(new RegExp(`/messages/${id}$`))
    expect(received).not.toHaveProperty("text_body")
    const extracted = expectShape(OtpExtractedData, events.find((e) => e.type === "message.otp_extracted")!.data)
    expect(extracted).toEqual({
      alias: { id: alias.id, address: alias.address, label: "Signups" },
      message_id: id,
      otp: { code: detail.otpCodes[0], links: detail.verificationLinks },
      source: "smtp",
      received_at: detail.receivedAt,
      url: received.url
    })
  })

  it("writes only message.received, with otp.code null, when no code was found", async () => {
    const alias = await claim()
    const id = await receive(alias, plainMessage(alias.address, "No code", "Thanks for signing up, no numbers here."))
    await settled(id)
    await settled(await receive(alias, plainMessage(alias.address, "after", "after")))
    const events = await eventsOf(id)
    expect(events.map((e) => e.type)).toEqual(["message.received"])
    const data = expectShape(MessageReceivedData, events[0]!.data)
    expect(data.otp).toEqual({ code: null, links: [] })
    expect(data.has_attachments).toBe(false)
  })
})

describe("mail that cannot be parsed (architecture.md pipeline step 2)", () => {
  const nested = (to: string, depth: number) => {
    let body = "Content-Type: text/plain\r\n\r\ninnermost 123456\r\n"
    for (let i = depth; i > 0; i--) body = `Content-Type: multipart/mixed; boundary="b${i}"\r\n\r\n--b${i}\r\n${body}--b${i}--\r\n`
    return Buffer.from(`From: deep@example.org\r\nTo: ${to}\r\nSubject: deep\r\nMIME-Version: 1.0\r\n${body}`)
  }

  it("deep MIME nesting becomes failed, keeps its raw bytes downloadable, and the pipeline goes on", async () => {
    const alias = await claim()
    const raw = nested(alias.address, 120)
    const id = await receive(alias, raw)
    const detail = await settled(id)
    expectShape(MessageDetail, detail)
    expect(detail.processingStatus).toBe("failed")
    expect(detail.sizeBytes).toBe(raw.byteLength)
    expect(detail.sender.address).toMatch(Email)
    const answer = await rawOf(id)
    expect(answer.status).toBe(200)
    expect(answer.bytes.equals(raw)).toBe(true)
    const next = await settled(await receive(alias, plainMessage(alias.address, "after the bad one", "fine 2468")))
    expect(next.processingStatus).toBe("processed")
  })

  it("NUL bytes, broken encodings, a broken multipart and binary garbage each end processed or failed, never stuck, raw kept", async () => {
    const alias = await claim()
    const garbage = Buffer.from(Array.from({ length: 4000 }, (_, i) => (i % 100 === 98 ? 0x0d : i % 100 === 99 ? 0x0a : (i * 7919) % 256)).map((b, i, all) =>
      (b === 0x0a && all[i - 1] !== 0x0d) || (b === 0x0d && all[i + 1] !== 0x0a) ? 0x20 : b))
    const samples: Array<[string, Buffer]> = [
      ["nul bytes", Buffer.concat([
        Buffer.from(`From: nul@example.org\r\nTo: ${alias.address}\r\nSubject: nul\x00here\r\nX-Nul: a\x00b\r\n\r\n`, "latin1"),
        Buffer.from("body\x00with\x00nuls 135790\r\n", "latin1")
      ])],
      ["broken base64", crlf(`From: b64@example.org\nTo: ${alias.address}\nSubject: b64\nMIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n@@@!!!not*base64===abc=\n`)],
      ["broken quoted-printable and charset", crlf(`From: qp@example.org\nTo: ${alias.address}\nSubject: =?x-unknown?Q?=ZZbroken?= =?UTF-8?B?@@@?=\nMIME-Version: 1.0\nContent-Type: text/plain; charset=x-no-such-charset\nContent-Transfer-Encoding: quoted-printable\n\nbad =ZZ escape =\n=E2=82 half a euro\n`)],
      ["unterminated multipart", crlf(`From: mp@example.org\nTo: ${alias.address}\nSubject: mp\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="never-closed"\n\n--never-closed\nContent-Type: text/plain\n\npart one\n--never-closed\nContent-Type: application/pdf\nContent-Transfer-Encoding: base64\n\nJVBERi0\n`)],
      ["no header block", crlf("just a line of text without any headers\nand another 97531\n")],
      ["binary garbage", Buffer.concat([garbage, Buffer.from("\r\n")])]
    ]
    for (const [name, raw] of samples) {
      expect(raw.includes(Buffer.from("\n")) && /[^\r]\n/.test(raw.toString("latin1")), `${name} has a bare LF`).toBe(false)
      const id = await receive(alias, raw)
      const detail = await settled(id)
      expectShape(MessageDetail, detail)
      expect(["processed", "failed"], name).toContain(detail.processingStatus)
      // NULs are dropped from what is stored, not a reason to fail the message.
      if (name === "nul bytes") expect(detail, name).toMatchObject({ processingStatus: "processed", subject: "nulhere", otpCodes: ["135790"] })
      expect(detail.sizeBytes, name).toBe(raw.byteLength)
      const answer = await rawOf(id)
      expect(answer.status, name).toBe(200)
      expect(answer.bytes.equals(raw), name).toBe(true)
    }
  })
})

describe("who may read a message (spec 5, 7)", () => {
  it("another account's message is 404 (Problem) for GET /messages/{id} and /raw; an unknown id likewise", async () => {
    const alias = await claim()
    const id = await receive(alias, plainMessage(alias.address, "private", "for the owner only"))
    await settled(id)
    expectProblem(await h.request(`/messages/${id}`, { session: stranger }), 404, "not_found")
    expectProblem(await h.request(`/messages/${id}/raw`, { session: stranger }), 404, "not_found")
    expectProblem(await h.request("/messages/99999999", { session: owner }), 404, "not_found")
    expect((await h.request(`/messages/${id}`, { token: readToken })).status).toBe(200)
  })

  it("a token without the read scope is refused with 403", async () => {
    const token = await h.createToken(owner, ["manage-aliases"], "no read")
    const alias = await claim()
    const id = await receive(alias, plainMessage(alias.address, "scoped", "scoped"))
    const answer = await h.request(`/messages/${id}`, { token })
    expect(answer.status, answer.text).toBe(403)
    expect(answer.headers.get("www-authenticate")).toBeTruthy()
  })
})

describe("subaddressing (decisions.md Receiving)", () => {
  it("keeps the original recipient in the headers and finds the message with to:", async () => {
    const alias = await claim()
    const sub = `${alias.localPart}+signup-7@${alias.domain.name}`
    const id = await receive({ id: alias.id, address: sub }, plainMessage(sub, "tagged", "hello subaddress"))
    const detail = await settled(id)
    expect(detail.alias.address).toBe(alias.address)
    expect(String(detail.headers["to"])).toContain(sub)
    const found = await h.request(`/messages?q=${encodeURIComponent(`to:${sub}`)}`, { token: readToken })
    expect(found.status, found.text).toBe(200)
    const page = expectShape(MessagePage, found.body)
    expect(page.items.map((m) => m.id)).toEqual([id])
  })
})
