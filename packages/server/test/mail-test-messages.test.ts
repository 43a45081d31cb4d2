/**
 * Test-mail injection, POST /test/messages (spec 2.19, 3.4, 4.8, 7, 8; decisions.md "Validation
 * and headers", Plans table): the JSON and message/rfc822 forms, the 202 InjectedTestMessage with
 * its Location, the same pipeline as SMTP, storage accounting, seven-day expiry, and every refusal
 * (403 plan or scope, 404 stranger's alias, 409 paused alias, 415 media type, 422 fields, 429
 * daily limit).
 */
import { Alias, CandidateReservation, InjectedTestMessage, MessageDetail } from "@burnbox/domain"
import { expectProblem, expectShape, type Harness, type Session, startHarness } from "@burnbox/testkit"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let owner: Session
let token: string
let stranger: Session
let strangerToken: string
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 6601 })
  ;[owner, stranger] = await Promise.all([h.signup({ plan: "pro" }), h.signup({ plan: "pro" })])
  token = await h.createToken(owner, ["read", "manage-aliases", "test"])
  strangerToken = await h.createToken(stranger, ["read", "manage-aliases", "test"])
})
afterAll(() => h.close())

type Reservation = typeof CandidateReservation.Type
type Detail = typeof MessageDetail.Type
const AliasList = Schema.Struct({ items: Schema.Array(Alias) })
const dayMs = 86_400_000

const claim = async (who: string = token) => {
  const reservation = await h.request<Reservation>("/aliases/candidates", { method: "POST", token: who, body: { domainId: 1, style: "numeric" } })
  expect(reservation.status, reservation.text).toBe(200)
  const answer = await h.request("/aliases", {
    method: "POST",
    token: who,
    body: { aliasId: reservation.body.candidates[0]!.id, reservationToken: reservation.body.reservationToken }
  })
  expect(answer.status, answer.text).toBe(201)
  return expectShape(Alias, answer.body)
}

const aliasNow = async (id: number, who: string = token) => {
  const found = expectShape(AliasList, (await h.request("/aliases", { token: who })).body).items.find((a) => a.id === id)
  expect(found).toBeDefined()
  return found!
}

const accountUsed = async (who: string = token) => {
  const me = await h.request<{ storageUsedBytes: number }>("/me", { token: who })
  expect(me.status, me.text).toBe(200)
  return me.body.storageUsedBytes
}

const messageCount = async (accountId: number = owner.accountId) =>
  Number((await h.query<{ n: string }>("SELECT count(*) AS n FROM messages WHERE account_id = $1", [accountId]))[0]!.n)

const inject = (body: unknown, who: { token: string } | { session: Session } = { token }) =>
  h.request("/test/messages", { method: "POST", ...who, body })

const injectRaw = (raw: Uint8Array | string, query: string, contentType = "message/rfc822", who: string = token) =>
  h.request(`/test/messages${query}`, { method: "POST", token: who, rawBody: raw, headers: { "content-type": contentType } })

const settled = async (id: number, who: string = token): Promise<Detail> => {
  const deadline = Date.now() + 15_000
  for (;;) {
    const answer = await h.request(`/messages/${id}`, { token: who })
    expect(answer.status, answer.text).toBe(200)
    if (answer.body.processingStatus === "processed" || answer.body.processingStatus === "failed") return answer.body
    if (Date.now() > deadline) throw new Error(`message ${id} still ${answer.body.processingStatus} after 15 s`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

const expectFields = (answer: { status: number; body: any; text: string }, fields: ReadonlyArray<string>, what: string) => {
  expectProblem(answer, 422, "validation_failed")
  expect(Object.keys(answer.body.error.fields ?? {}).sort(), `${what}: ${answer.text.slice(0, 500)}`).toEqual([...fields].sort())
  for (const reason of Object.values(answer.body.error.fields)) expect(reason).toMatch(/^[a-z][a-z0-9_]*$/)
}

const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
const exe = Buffer.concat([Buffer.from("MZ"), Buffer.alloc(62, 0x90)]).toString("base64")

let alias: typeof Alias.Type
beforeAll(async () => {
  alias = await claim()
})

const valid = () => ({ aliasId: alias.id, from: "QA Robot <qa@acme.example>", subject: "Your code", text: "Hello tester" })

describe("JSON form", () => {
  it("answers 202 InjectedTestMessage (stub) with a Location of the message resource; expiresAt is seven days after receipt", async () => {
    h.clock.advance("1 minute")
    const at = h.clock.now()
    const answer = await inject(valid())
    expect(answer.status, answer.text).toBe(202)
    const injected = expectShape(InjectedTestMessage, answer.body)
    expect(injected).toMatchObject({
      aliasId: alias.id,
      alias: alias.address,
      source: "test",
      processingStatus: "stub",
      receivedAt: at.toISOString(),
      expiresAt: new Date(at.getTime() + 7 * dayMs).toISOString()
    })
    const location = answer.headers.get("location")
    expect(location).toMatch(new RegExp(`/api/v1/messages/${injected.id}$`))
    // The harness's site URL carries no port, so follow the path on the harness's own origin.
    const resource = await h.request(new URL(location!, h.baseUrl).pathname, { token })
    expect(resource.status, resource.text).toBe(200)
    expect(resource.body.id).toBe(injected.id)
    expect(resource.body.source).toBe("test")
  })

  it("goes through the same pipeline: the requested otp is the first otpCode, sender, subject and text as given, events written", async () => {
    const answer = await inject({ ...valid(), subject: "Confirm your sign-up", otp: "739104", text: "Welcome aboard." })
    expect(answer.status, answer.text).toBe(202)
    const detail = await settled(answer.body.id)
    expectShape(MessageDetail, detail)
    expect(detail).toMatchObject({
      processingStatus: "processed",
      source: "test",
      subject: "Confirm your sign-up",
      sender: { name: "QA Robot", address: "qa@acme.example" },
      alias: { id: alias.id, address: alias.address },
      expiresAt: answer.body.expiresAt,
      receivedAt: answer.body.receivedAt
    })
    expect(detail.otpCodes[0]).toBe("739104")
    expect(detail.textBody).toContain("Welcome aboard.")
    const events = await h.query<{ type: string; data: any }>("SELECT type, data FROM events WHERE data->>'message_id' = $1 ORDER BY type", [String(detail.id)])
    expect(events.map((e) => e.type)).toEqual(["message.otp_extracted", "message.received"])
    for (const event of events) {
      expect(event.data.source).toBe("test")
      expect(event.data.otp.code).toBe("739104")
    }
  })

  it("counts toward storage: the alias and the account grow by the stored size", async () => {
    const target = await claim()
    const usedBefore = await accountUsed()
    const answer = await inject({ ...valid(), aliasId: target.id, text: "x".repeat(5000) })
    expect(answer.status, answer.text).toBe(202)
    const [row] = await h.query<{ size_bytes: number }>("SELECT size_bytes FROM messages WHERE id = $1", [answer.body.id])
    expect(row!.size_bytes).toBeGreaterThan(5000)
    expect(await aliasNow(target.id)).toMatchObject({ receivedCount: 1, unreadCount: 1, storageUsedBytes: row!.size_bytes, lastReceivedAt: answer.body.receivedAt })
    expect(await accountUsed()).toBe(usedBefore + row!.size_bytes)
    const detail = await settled(answer.body.id)
    expect(detail.sizeBytes).toBe(row!.size_bytes)
  })

  it("takes an HTML-only body and attachments: a PNG gets a preview, an .exe is dangerous, contentType defaults to application/octet-stream", async () => {
    const answer = await inject({
      aliasId: alias.id,
      from: "files@acme.example",
      subject: "Files",
      html: "<p>See the attached files. Code <b>551234</b>.</p>",
      attachments: [
        { filename: "pixel.png", contentType: "image/png", contentBase64: png },
        { filename: "tool.exe", contentBase64: exe },
        { filename: "notes.dat", contentBase64: Buffer.from("plain data").toString("base64") }
      ]
    })
    expect(answer.status, answer.text).toBe(202)
    const detail = await settled(answer.body.id)
    expect(detail.processingStatus).toBe("processed")
    expect(typeof detail.htmlUrl).toBe("string")
    expect(detail.otpCodes).toEqual(["551234"])
    expect(detail.hasAttachments).toBe(true)
    expect(detail.sender).toEqual({ name: null, address: "files@acme.example" })
    const [pixel, tool, notes] = detail.attachments
    expect(pixel).toMatchObject({ filename: "pixel.png", mimeType: "image/png", sizeBytes: Buffer.from(png, "base64").byteLength, dangerous: false, previewUrl: expect.any(String) })
    expect(tool).toMatchObject({ filename: "tool.exe", dangerous: true, previewUrl: null })
    expect(notes).toMatchObject({ filename: "notes.dat", mimeType: "application/octet-stream", sizeBytes: 10, dangerous: false, previewUrl: null })
  })

  it("keeps a non-ASCII subject, display name and text intact", async () => {
    const answer = await inject({ aliasId: alias.id, from: "Jürgen Müller <jm@buecher.example>", subject: "Grüße 🎉 日本語", text: "Straße — 東京 ✓" })
    expect(answer.status, answer.text).toBe(202)
    const detail = await settled(answer.body.id)
    expect(detail.subject).toBe("Grüße 🎉 日本語")
    expect(detail.sender.name).toBe("Jürgen Müller")
    expect(detail.textBody).toContain("Straße — 東京 ✓")
  })

  it("puts an otp given with html only into the message so it is extracted", async () => {
    const answer = await inject({ aliasId: alias.id, from: "a@acme.example", subject: "html otp", html: "<p>Hi</p>", otp: "864209" })
    expect(answer.status, answer.text).toBe(202)
    expect((await settled(answer.body.id)).otpCodes[0]).toBe("864209")
  })
})

describe("raw message/rfc822 form", () => {
  it("stores the posted bytes exactly for ?aliasId=, as source test expiring in seven days, and processes them", async () => {
    const raw = Buffer.from(
      `From: Raw Sender <raw@acme.example>\r\nTo: ${alias.address}\r\nSubject: raw injection\r\nMIME-Version: 1.0\r\n` +
        `Content-Type: text/plain; charset=utf-8\r\n\r\nCode 304958, grüße.\r\n`,
      "utf8"
    )
    h.clock.advance("1 minute")
    const at = h.clock.now()
    const answer = await injectRaw(raw, `?aliasId=${alias.id}`)
    expect(answer.status, answer.text).toBe(202)
    const injected = expectShape(InjectedTestMessage, answer.body)
    expect(injected).toMatchObject({ aliasId: alias.id, alias: alias.address, source: "test", processingStatus: "stub" })
    expect(injected.expiresAt).toBe(new Date(at.getTime() + 7 * dayMs).toISOString())
    expect(answer.headers.get("location")).toMatch(new RegExp(`/messages/${injected.id}$`))
    const bytes = await fetch(`${h.baseUrl}/messages/${injected.id}/raw`, { headers: { authorization: `Bearer ${token}` } })
    expect(bytes.status).toBe(200)
    expect(Buffer.from(await bytes.arrayBuffer()).equals(raw)).toBe(true)
    const detail = await settled(injected.id)
    expect(detail).toMatchObject({ processingStatus: "processed", source: "test", subject: "raw injection", sizeBytes: raw.byteLength })
    expect(detail.otpCodes).toEqual(["304958"])
  })

  it("requires aliasId with a raw body (422 naming aliasId)", async () => {
    const before = await messageCount()
    expectFields(await injectRaw("From: a@b.example\r\nSubject: x\r\n\r\nx\r\n", ""), ["aliasId"], "no aliasId")
    expect(await messageCount()).toBe(before)
  })

  it("refuses a raw body over 15728640 bytes with 422 and stores nothing", async () => {
    const before = await messageCount()
    const head = Buffer.from(`From: big@acme.example\r\nTo: ${alias.address}\r\nSubject: too big\r\n\r\n`)
    const raw = Buffer.concat([head, Buffer.alloc(15_728_641 - head.length, 0x61)])
    expect(raw.byteLength).toBe(15_728_641)
    const answer = await injectRaw(raw, `?aliasId=${alias.id}`)
    expectProblem(answer, 422, "validation_failed")
    expect(Object.keys(answer.body.error.fields ?? {}).length).toBeGreaterThan(0)
    expect(await messageCount()).toBe(before)
  }, 60_000)
})

describe("415 for any other content type", () => {
  it("refuses text/plain, form, multipart, XML and octet-stream bodies with the Problem shape and stores nothing", async () => {
    const before = await messageCount()
    const json = JSON.stringify(valid())
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=zz", "application/xml", "application/octet-stream"]) {
      const answer = await injectRaw(json, `?aliasId=${alias.id}`, type)
      expect(answer.status, `${type}: ${answer.text}`).toBe(415)
      expect(typeof answer.body?.error?.code, type).toBe("string")
      expect(typeof answer.body.error.message).toBe("string")
      expect(Object.keys(answer.body)).toEqual(["error"])
      expect(answer.headers.get("content-type")).toMatch(/json/)
    }
    expect(await messageCount()).toBe(before)
  })
})

describe("422 names each broken field", () => {
  const b64 = (n: number) => Buffer.alloc(n, 7).toString("base64")
  const cases: Array<[string, () => Record<string, unknown>, ReadonlyArray<string>]> = [
    ["from not a mailbox", () => ({ ...valid(), from: "not a mailbox" }), ["from"]],
    ["from with a broken address", () => ({ ...valid(), from: "Name <no-at-sign>" }), ["from"]],
    ["subject empty", () => ({ ...valid(), subject: "" }), ["subject"]],
    ["subject over 998", () => ({ ...valid(), subject: "s".repeat(999) }), ["subject"]],
    ["text over 2097152", () => ({ ...valid(), text: "t".repeat(2_097_153) }), ["text"]],
    ["html over 2097152", () => ({ ...valid(), text: null, html: "h".repeat(2_097_153) }), ["html"]],
    ["otp over 128", () => ({ ...valid(), otp: "1".repeat(129) }), ["otp"]],
    ["more than 10 attachments", () => ({ ...valid(), attachments: Array.from({ length: 11 }, (_, i) => ({ filename: `f${i}.txt`, contentBase64: b64(3) })) }), ["attachments"]],
    ["filename empty", () => ({ ...valid(), attachments: [{ filename: "", contentBase64: b64(3) }] }), ["attachments.0.filename"]],
    ["filename over 255", () => ({ ...valid(), attachments: [{ filename: `${"n".repeat(252)}.txt`, contentBase64: b64(3) }] }), ["attachments.0.filename"]],
    ["invalid base64", () => ({ ...valid(), attachments: [{ filename: "a.txt", contentBase64: b64(3) }, { filename: "b.txt", contentBase64: "not base64!!" }] }), ["attachments.1.contentBase64"]],
    ["combined decoded attachments over 1 MiB", () => ({ ...valid(), attachments: [{ filename: "a.bin", contentBase64: b64(524_288) }, { filename: "b.bin", contentBase64: b64(524_289) }] }), ["attachments"]],
    ["unknown property", () => ({ ...valid(), priority: "high" }), ["priority"]],
    ["aliasId missing", () => ({ from: "a@acme.example", subject: "x", text: "x" }), ["aliasId"]],
    ["aliasId not an id", () => ({ ...valid(), aliasId: 0 }), ["aliasId"]],
    ["filename missing", () => ({ ...valid(), attachments: [{ contentBase64: b64(3) }] }), ["attachments.0.filename"]],
    ["contentBase64 missing", () => ({ ...valid(), attachments: [{ filename: "a.txt" }] }), ["attachments.0.contentBase64"]]
  ]
  for (const [what, body, fields] of cases) {
    it(`${what}: 422 naming ${fields.join(", ")}, nothing stored`, async () => {
      const before = await messageCount()
      expectFields(await inject(body()), fields, what)
      expect(await messageCount()).toBe(before)
    })
  }

  it("exactly 1 MiB of decoded attachments, a 998-character subject and a 128-character otp are accepted", async () => {
    const answer = await inject({
      ...valid(),
      subject: "s".repeat(998),
      otp: "9".repeat(128),
      attachments: [{ filename: "a.bin", contentBase64: b64(524_288) }, { filename: "b.bin", contentBase64: b64(524_288) }]
    })
    expect(answer.status, answer.text.slice(0, 500)).toBe(202)
  })

  it("text and html both missing or null: 422 naming the body fields", async () => {
    for (const body of [{ aliasId: alias.id, from: "a@acme.example", subject: "x" }, { aliasId: alias.id, from: "a@acme.example", subject: "x", text: null, html: null }]) {
      const answer = await inject(body)
      expectProblem(answer, 422, "validation_failed")
      const names = Object.keys(answer.body.error.fields ?? {})
      expect(names.length, answer.text).toBeGreaterThan(0)
      expect(names.every((n) => n === "text" || n === "html"), answer.text).toBe(true)
    }
  })

  it("several broken fields in one request are all named", async () => {
    const answer = await inject({ aliasId: alias.id, from: "nobody", subject: "", otp: "1".repeat(129), text: "x", extra: true })
    expectFields(answer, ["extra", "from", "otp", "subject"], "four broken fields")
  })
})

describe("who may inject", () => {
  it("a free or premium account is refused with 403", async () => {
    for (const plan of ["free", "premium"] as const) {
      const session = await h.signup({ plan })
      const reservation = await h.request<Reservation>("/aliases/candidates", { method: "POST", session, body: { domainId: 1, style: "numeric" } })
      const claimed = await h.request("/aliases", {
        method: "POST",
        session,
        body: { aliasId: reservation.body.candidates[0]!.id, reservationToken: reservation.body.reservationToken }
      })
      expect(claimed.status, claimed.text).toBe(201)
      const answer = await inject({ ...valid(), aliasId: claimed.body.id }, { session })
      expectProblem(answer, 403, "plan_required")
      expect(await messageCount(session.accountId)).toBe(0)
    }
  })

  it("a token of an account no longer on Pro is refused with 403", async () => {
    const pro = await h.signup({ plan: "pro" })
    const proToken = await h.createToken(pro, ["manage-aliases", "test"])
    const target = await claim(proToken)
    await h.setPlan(pro.accountId, "premium")
    const answer = await inject({ ...valid(), aliasId: target.id }, { token: proToken })
    expect(answer.status, answer.text).toBe(403)
    expect(await messageCount(pro.accountId)).toBe(0)
  })

  it("a token without the test scope is refused with 403 and WWW-Authenticate", async () => {
    const readOnly = await h.createToken(owner, ["read"], "no test scope")
    const answer = await inject(valid(), { token: readOnly })
    expect(answer.status, answer.text).toBe(403)
    expect(answer.headers.get("www-authenticate")).toBeTruthy()
  })

  it("another account's alias, or an unknown one, is 404 and nothing is stored", async () => {
    const theirs = await claim(strangerToken)
    const [mine, their] = [await messageCount(), await messageCount(stranger.accountId)]
    expectProblem(await inject({ ...valid(), aliasId: theirs.id }), 404, "not_found")
    expectProblem(await inject({ ...valid(), aliasId: 987_654 }), 404, "not_found")
    expect((await injectRaw("From: a@b.example\r\nSubject: x\r\n\r\nx\r\n", `?aliasId=${theirs.id}`)).status).toBe(404)
    expect([await messageCount(), await messageCount(stranger.accountId)]).toEqual([mine, their])
  })

  it("a paused alias is 409 in both forms and nothing is stored, counters unchanged", async () => {
    const target = await claim()
    expect((await h.request(`/aliases/${target.id}/pause`, { method: "POST", token })).status).toBe(200)
    const before = await messageCount()
    const usedBefore = await accountUsed()
    const json = await inject({ ...valid(), aliasId: target.id })
    expect(json.status, json.text).toBe(409)
    expect(typeof json.body.error.code).toBe("string")
    const raw = await injectRaw("From: a@b.example\r\nSubject: x\r\n\r\nx\r\n", `?aliasId=${target.id}`)
    expect(raw.status, raw.text).toBe(409)
    expect(await messageCount()).toBe(before)
    expect(await accountUsed()).toBe(usedBefore)
    expect(await aliasNow(target.id)).toMatchObject({ receivedCount: 0, storageUsedBytes: 0 })
  })
})

describe("testMessagesPerDay", () => {
  it("refuses the injection past the daily limit with 429, Retry-After and rate-limit headers, storing nothing; it resets when Retry-After has passed", async () => {
    const limited = await h.signup({ plan: "pro" })
    await h.query(`UPDATE accounts SET overrides = overrides || '{"testMessagesPerDay": 2}'::jsonb WHERE id = $1`, [limited.accountId])
    const limitedToken = await h.createToken(limited, ["manage-aliases", "test"])
    const target = await claim(limitedToken)
    const body = { ...valid(), aliasId: target.id }
    expect((await inject(body, { token: limitedToken })).status).toBe(202)
    expect((await inject(body, { token: limitedToken })).status).toBe(202)
    const refused = await inject(body, { token: limitedToken })
    expect(refused.status, refused.text).toBe(429)
    expect(typeof refused.body.error.code).toBe("string")
    expect(Object.keys(refused.body)).toEqual(["error"])
    const retryAfter = refused.headers.get("retry-after")
    expect(retryAfter).toMatch(/^\d+$/)
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1)
    expect(Number(retryAfter)).toBeLessThanOrEqual(86_400)
    for (const name of ["ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"]) expect(refused.headers.get(name), name).toMatch(/^\d+$/)
    expect(refused.headers.get("ratelimit-policy")).toBeTruthy()
    expect(await messageCount(limited.accountId)).toBe(2)
    h.clock.advance(`${Number(retryAfter) - 1} seconds`)
    expect((await inject(body, { token: limitedToken })).status).toBe(429)
    h.clock.advance("1 second")
    const again = await inject(body, { token: limitedToken })
    expect(again.status, again.text).toBe(202)
    expect(await messageCount(limited.accountId)).toBe(3)
  })
})
