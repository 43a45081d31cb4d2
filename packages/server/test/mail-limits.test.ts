/**
 * HTML past the limits (issue #15, items 3 and 4), through the real SMTP ingest, pipeline and
 * API: such mail is processed, not failed, rendered as text, its codes and links read from the
 * text part; the HTML view answers that rendering at once, remote images allowed or not. What a
 * request serves is what the mail thread made: the rendering with remote images loaded, the
 * webhook text_body; rows processed before the pipeline stored them (migration 0018) still
 * work, reading only small HTML on the main thread.
 */
import { sanitizeEmailHtml, textAsHtml } from "@burnbox/domain/mail/index"
import { checked } from "@burnbox/domain/test/checked-html"
import {
  claimAlias,
  type DeliveryWorker,
  type Harness,
  nestedBold,
  nestedBoldWithText,
  processed,
  sendMail,
  type Session,
  startDeliveryWorker,
  startHarness
} from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let worker: DeliveryWorker
let owner: Session
let address: string
let aliasId: number
beforeAll(async () => {
  h = await startHarness({ webhookAllowPrivate: true }, undefined, { seed: 1519 })
  worker = await startDeliveryWorker(h)
  owner = await h.signup({ plan: "pro" })
  ;({ address, id: aliasId } = await claimAlias(h, { session: owner }))
})
afterAll(async () => {
  await worker.close()
  await h.close()
})

interface Row {
  readonly processing_status: string
  readonly failure_reason: string | null
  readonly html_original: string | null
  readonly html_sanitized: string | null
  readonly html_sanitized_remote: string | null
  readonly remote_image_count: number
  readonly webhook_text_body: string | null
}
const rowOf = async (id: number) =>
  (await h.query<Row>(
    `SELECT processing_status, failure_reason, html_original, html_sanitized, html_sanitized_remote, remote_image_count, webhook_text_body
     FROM messages WHERE id = $1`,
    [id]
  ))[0]!

/** Sends over SMTP and waits until the pipeline is done with it. */
const receive = (raw: Uint8Array) => sendMail(h, address, raw, { from: "mallory@attacker.example" })

/** Test mail (POST /test/messages) of these bodies, once the pipeline processed it. */
const inject = async (html: string, text: string | null = null) => {
  const answer = await h.request("/test/messages", {
    method: "POST",
    session: owner,
    body: { aliasId, from: "Shop <shop@example.com>", subject: "limits", html, text }
  })
  expect(answer.status, answer.text).toBe(202)
  const id = answer.body.id as number
  await processed(h, { session: owner }, id)
  return id
}

/** GET /messages/{id}/html; `remote` is the view's `?remote=1`. */
const view = async (id: number, remote: boolean) => {
  const answer = await h.request(`/messages/${id}/html${remote ? "?remote=1" : ""}`, { session: owner })
  expect(answer.status, answer.text).toBe(200)
  const imgSrc = /img-src ([^;]*)/.exec(answer.headers.get("content-security-policy") ?? "")?.[1]
  return { body: answer.text, remoteImagesAllowed: imgSrc?.split(" ").includes("https:") }
}

/**
 * The view answers at once: from the rendering the pipeline stored, never by walking the HTML at
 * request time. Shown by what it serves, not by a stopwatch: the stored rendering replaced, both
 * views serve the replacement.
 */
const expectServedAsStored = async (id: number) => {
  await h.query("UPDATE messages SET html_sanitized = '<pre>as stored</pre>' WHERE id = $1", [id])
  for (const remote of [false, true]) expect((await view(id, remote)).body, `remote=${remote}`).toBe("<pre>as stored</pre>")
}

describe("mail past the HTML limits", () => {
  it("300,000 nested <b> without a text part: processed, its text in a <pre>; the view answers it at once, ?remote=1 too", async () => {
    const id = await receive(nestedBold(address).raw)
    const row = await rowOf(id)
    expect(row).toMatchObject({
      processing_status: "processed",
      failure_reason: null,
      html_sanitized: textAsHtml("deep 123456"),
      html_sanitized_remote: null,
      remote_image_count: 0,
      webhook_text_body: "deep 123456"
    })
    const detail = await processed(h, { session: owner }, id)
    expect(detail).toMatchObject({ snippet: "deep 123456", otpCodes: ["123456"], verificationLinks: [] })
    expect(detail.htmlUrl).not.toBeNull()
    for (const remote of [false, true]) {
      const answer = await view(id, remote)
      expect(answer.body).toBe(textAsHtml("deep 123456"))
      // No remote image to load: allowing them changes nothing.
      expect(answer.remoteImagesAllowed).toBe(remote)
    }
    await expectServedAsStored(id)
  })

  it("beside a text part: the text part, escaped, is the rendering; codes and links come from it alone", async () => {
    const text = "Hi <b>not bold</b> & welcome.\r\nYour code is 654321.\r\nVerify your address: https://example.com/verify?token=abcdef123456"
    const id = await receive(nestedBoldWithText(address, text).raw)
    const detail = await processed(h, { session: owner }, id)
    expect(detail.otpCodes).toEqual(["654321"])
    expect(detail.verificationLinks).toEqual(["https://example.com/verify?token=abcdef123456"])
    expect(detail.snippet).toBe("Hi <b>not bold</b> & welcome. Your code is 654321. Verify your address: https://example.com/verify?token=abcdef123456")
    for (const remote of [false, true]) {
      const answer = await view(id, remote)
      expect(answer.body).toBe(textAsHtml(detail.textBody!))
      expect(answer.body).toContain("Hi &lt;b&gt;not bold&lt;/b&gt; &amp; welcome.")
    }
    await expectServedAsStored(id)
  })
})

describe("the rendering with remote images loaded", () => {
  const html = `<p>Hello <img src="https://images.example/logo.png" alt="logo"> your code is 246810</p>`

  it("is made by the pipeline and served from the message, equal to a fresh sanitizing", async () => {
    const id = await inject(html)
    const row = await rowOf(id)
    expect(row.remote_image_count).toBe(1)
    expect(row.html_sanitized_remote).toBe(sanitizeEmailHtml(checked(html), { allowRemoteImages: true }).html)
    // The HTML as received is not kept beside its renderings (#36): the raw bytes have it.
    expect(row.html_original).toBeNull()
    expect(row.html_sanitized_remote).toContain(`src="https://images.example/logo.png"`)
    expect(row.html_sanitized).not.toContain("images.example")
    expect(await view(id, true)).toMatchObject({ body: row.html_sanitized_remote, remoteImagesAllowed: true })
    expect(await view(id, false)).toMatchObject({ body: row.html_sanitized, remoteImagesAllowed: false })
    // Served as stored, not made again.
    await h.query("UPDATE messages SET html_sanitized_remote = '<p>as stored</p>' WHERE id = $1", [id])
    expect((await view(id, true)).body).toBe("<p>as stored</p>")
  })

  it("of a row processed before it was stored: made again only from a small HTML; a larger one is served blocked", async () => {
    const id = await inject(html)
    const { html_sanitized, html_sanitized_remote } = await rowOf(id)
    // As stored then: the HTML as received, and no rendering with remote images.
    await h.query("UPDATE messages SET html_sanitized_remote = NULL, html_original = $2 WHERE id = $1", [id, html])
    expect(await view(id, true)).toMatchObject({ body: html_sanitized_remote, remoteImagesAllowed: true })
    // Past 64 KiB the original is not read at request time.
    await h.query("UPDATE messages SET html_original = html_original || repeat(' ', 65536) WHERE id = $1", [id])
    expect(await view(id, true)).toMatchObject({ body: html_sanitized, remoteImagesAllowed: false })
  })
})

describe("webhook text_body", () => {
  it("is the text the pipeline stored; a row without it falls back to its text part or a small HTML, never a large one", async () => {
    const endpoint = await h.request("/webhooks", {
      method: "POST",
      session: owner,
      body: { name: "texts", url: "https://127.0.0.1:9/hook", subscription: { mode: "all" }, include_text_body: true }
    })
    expect(endpoint.status, endpoint.text).toBe(201)
    const html = "<p>Hello <b>there</b>, your code is 482913</p>"
    const [stored, small, large, textPart] = [await inject(html), await inject(html), await inject(html), await inject(html, "The text part, code 135790")]
    const nested = await receive(nestedBold(address).raw)
    expect((await rowOf(stored)).webhook_text_body).toBe("Hello there, your code is 482913")
    // What dispatch reads: the stored text, whatever the bodies say.
    await h.query("UPDATE messages SET webhook_text_body = 'as the pipeline stored it' WHERE id = $1", [stored])
    // Rows as processed before migration 0018: no webhook text, the HTML as received kept.
    await h.query("UPDATE messages SET webhook_text_body = NULL, html_original = $2 WHERE id = ANY($1::int[])", [[small, large, textPart], html])
    await h.query("UPDATE messages SET html_original = html_original || repeat(' ', 65536) WHERE id = $1", [large])

    await worker.dispatch()
    const payloads = await h.query<{ payload: Buffer }>(
      "SELECT payload FROM webhook_deliveries WHERE webhook_id = $1 AND event_type = 'message.received'",
      [endpoint.body.webhook.id]
    )
    const textOf = new Map(payloads.map(({ payload }) => {
      const { data } = JSON.parse(payload.toString("utf8")) as { data: { message_id: number; text_body: string } }
      return [data.message_id, data.text_body]
    }))
    expect([stored, small, large, textPart, nested].map((id) => textOf.get(id))).toEqual([
      "as the pipeline stored it",
      "Hello there, your code is 482913",
      "",
      "The text part, code 135790",
      "deep 123456"
    ])
  })
})
