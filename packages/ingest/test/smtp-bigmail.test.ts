/**
 * Big mail over a real SMTP socket (issue #36, item 6): a message just under the 15 MB limit is
 * accepted, stored byte for byte, worked by the pipeline (its code found, its attachment stored
 * exactly) and served back whole; a big plain-text message, whose renderings and search words
 * are tens of megabytes, is stored and processed too. The bytes take the paths built for big
 * mail: the raw bytes read back in pieces, the attachment and the store statement's recordset
 * staged in large objects, none of which may be left behind.
 */
import { randomBytes } from "node:crypto"
import { Alias, CandidateReservation } from "@burnbox/domain"
import { expectShape, type Harness, type Session, SmtpClient, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let owner: Session
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 3601 })
  owner = await h.signup({ plan: "pro" })
})
afterAll(() => h.close())

const claim = async () => {
  const reservation = await h.request<typeof CandidateReservation.Type>("/aliases/candidates", { method: "POST", session: owner, body: { domainId: 1, style: "numeric" } })
  expect(reservation.status, reservation.text).toBe(200)
  const answer = await h.request("/aliases", {
    method: "POST",
    session: owner,
    body: { aliasId: reservation.body.candidates[0]!.id, reservationToken: reservation.body.reservationToken }
  })
  expect(answer.status, answer.text).toBe(201)
  return expectShape(Alias, answer.body)
}

/** Sends `raw` over SMTP; answers the stored message's id from the 250. */
const send = async (to: string, raw: Uint8Array) => {
  const client = await SmtpClient.connect(h.smtpPort, { ehlo: "client.example.org", idleMs: 60_000 })
  try {
    const { envelope, reply } = await client.transaction("big@example.org", to, raw, { stuffed: true, mailParameters: `SIZE=${raw.byteLength}`, timeoutMs: 60_000 })
    expect(reply, envelope.map((r) => `${r.code} ${r.text}`).join(" / ")).toBeDefined()
    expect(`${reply!.code} ${reply!.text}`).toMatch(/^250 2\.0\.0 Ok: stored as \d+$/)
    return Number(/stored as (\d+)/.exec(reply!.text)![1])
  } finally {
    await client.quit()
  }
}

/** Polls GET /messages/{id} until the pipeline is done with it. */
const processed = async (id: number) => {
  const deadline = Date.now() + 30_000
  for (;;) {
    const answer = await h.request(`/messages/${id}`, { session: owner })
    expect(answer.status, answer.text).toBe(200)
    if (answer.body.processingStatus === "processed" || answer.body.processingStatus === "failed") return answer.body
    if (Date.now() > deadline) throw new Error(`message ${id} still ${answer.body.processingStatus}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

const download = async (url: string) => {
  const response = await fetch(url, { headers: { cookie: `service_session=${owner.cookie}` } })
  expect(response.status).toBe(200)
  return Buffer.from(await response.arrayBuffer())
}

const failureOf = async (id: number) => String((await h.query<{ r: string | null }>("SELECT failure_reason AS r FROM messages WHERE id = $1", [id]))[0]?.r)

const stagedObjects = async () => Number((await h.query<{ n: string }>("SELECT count(*) AS n FROM pg_largeobject_metadata"))[0]!.n)

/** CRLF lines; the body's lines never start with a dot. */
const message = (to: string, headers: ReadonlyArray<string>, body: ReadonlyArray<Buffer>) =>
  Buffer.concat([
    Buffer.from([`From: Big Sender <big@example.org>`, `To: <${to}>`, `Date: Sat, 21 Nov 2026 12:00:00 +0000`, `Message-ID: <${Math.random().toString(36).slice(2)}@example.org>`, "MIME-Version: 1.0", ...headers, "", ""].join("\r\n")),
    ...body
  ])

describe("a 15 MB message over SMTP", () => {
  it("is accepted with 250, stored byte for byte, processed (code, attachment exact) and served back whole; no staging left", async () => {
    const alias = await claim()
    const boundary = "big-boundary-36"
    // Random bytes, base64 in 76-character lines, up to just under the 15,728,640-byte limit.
    const attachment = randomBytes(Math.floor((15_600_000 / 78) * 57 / 57) * 57)
    const encoded = attachment.toString("base64").replace(/.{76}/g, "$&\r\n")
    const raw = message(alias.address, [`Subject: Your big-mail code is 736251`, `Content-Type: multipart/mixed; boundary="${boundary}"`], [
      Buffer.from([
        `--${boundary}`,
        "Content-Type: text/plain; charset=utf-8",
        "",
        "Hello, your verification code is 736251. The report is attached.",
        `--${boundary}`,
        `Content-Type: application/octet-stream; name="report.bin"`,
        `Content-Disposition: attachment; filename="report.bin"`,
        "Content-Transfer-Encoding: base64",
        "",
        ""
      ].join("\r\n")),
      Buffer.from(encoded.endsWith("\r\n") ? encoded : `${encoded}\r\n`),
      Buffer.from(`--${boundary}--\r\n`)
    ])
    expect(raw.byteLength).toBeGreaterThan(15_000_000)
    expect(raw.byteLength).toBeLessThan(15_728_640)

    const id = await send(alias.address, raw)
    const [row] = await h.query<{ size_bytes: number }>("SELECT size_bytes FROM messages WHERE id = $1", [id])
    expect(row!.size_bytes).toBe(raw.byteLength)
    const detail = await processed(id)
    expect(detail.processingStatus, await failureOf(id)).toBe("processed")
    expect(detail.otpCodes).toEqual(["736251"])
    expect(detail.attachments).toHaveLength(1)
    expect(detail.attachments[0].sizeBytes).toBe(attachment.byteLength)
    expect((await download(detail.attachments[0].downloadUrl)).equals(attachment)).toBe(true)
    expect((await download(`${h.baseUrl}/messages/${id}/raw`)).equals(raw)).toBe(true)
    expect(await stagedObjects()).toBe(0)
  }, 60_000)

  it("a big plain-text message (renderings and search words of megabytes) is stored and processed", async () => {
    const alias = await claim()
    const lines = Array.from({ length: 4_000 }, (_, i) => Buffer.from(`line ${String(i).padStart(6, "0")} ${"lorem ipsum dolor sit amet ".repeat(30)}\r\n`))
    const raw = message(alias.address, ["Subject: A long report, code 482913", "Content-Type: text/plain; charset=utf-8"], [
      Buffer.from("Your code is 482913.\r\n"),
      ...lines
    ])
    expect(raw.byteLength).toBeGreaterThan(3_000_000)
    const id = await send(alias.address, raw)
    const detail = await processed(id)
    expect(detail.processingStatus, await failureOf(id)).toBe("processed")
    expect(detail.otpCodes[0]).toBe("482913")
    const [stored] = await h.query<{ n: number; last: boolean }>(
      "SELECT length(text_body) AS n, text_body LIKE $2 AS last FROM messages WHERE id = $1",
      [id, `%line 003999 lorem%`]
    )
    expect(stored!.n).toBeGreaterThan(3_000_000)
    expect(stored!.last).toBe(true)
    expect(await stagedObjects()).toBe(0)
  }, 60_000)
})
