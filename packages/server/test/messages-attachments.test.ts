/**
 * Attachments and the raw message (spec 2.11, 4.5, 7): a download answers the stored bytes
 * with the stored MIME type, always as a download; a dangerous file needs confirm=1 (409
 * otherwise) and is then served as application/octet-stream; a preview exists only for safe
 * image types, under a sandbox CSP, and dangerous or unsupported types answer 404.
 */
import { claimAlias, type Detail, expectProblem, type Harness, injectMail, processed, type Session, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let owner: Session
let stranger: Session
let readToken: string
let message: Detail
const png = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "base64")
const exe = Buffer.concat([Buffer.from("MZ"), Buffer.alloc(62, 0x90)])
const page = Buffer.from("<script>alert(document.cookie)</script>")
const pdf = Buffer.from("%PDF-1.4\n%âãÏÓ\n")
const svg = Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`)

beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 7501 })
  ;[owner, stranger] = await Promise.all([h.signup({ plan: "pro" }), h.signup({ plan: "pro" })])
  readToken = await h.createToken(owner, ["read"])
  const alias = await claimAlias(h, { session: owner })
  const id = await injectMail(h, { session: owner }, alias.id, {
    subject: "files",
    attachments: [
      { filename: "pixel.png", contentType: "image/png", contentBase64: png.toString("base64") },
      { filename: "setup.exe", contentType: "application/octet-stream", contentBase64: exe.toString("base64") },
      { filename: "invoice.pdf", contentType: "application/pdf", contentBase64: pdf.toString("base64") },
      { filename: "page.html", contentType: "text/html", contentBase64: page.toString("base64") },
      { filename: "logo.svg", contentType: "image/svg+xml", contentBase64: svg.toString("base64") },
      { filename: "Grüße 2026.txt", contentType: "text/plain", contentBase64: Buffer.from("hello").toString("base64") }
    ]
  })
  message = await processed(h, { session: owner }, id)
})
afterAll(() => h.close())

const byName = (name: string) => {
  const found = message.attachments.find((a) => a.filename === name)
  expect(found, name).toBeDefined()
  return found!
}
const get = (url: string, who: { token: string } | { session: Session } = { token: readToken }) => h.request(url, { ...who })
const bytes = async (url: string, who: { token: string } | { session: Session } = { token: readToken }) => {
  const headers: Record<string, string> = "token" in who
    ? { authorization: `Bearer ${who.token}` }
    : { cookie: `service_session=${who.session.cookie}` }
  const response = await fetch(url, { headers })
  return { status: response.status, headers: response.headers, body: Buffer.from(await response.arrayBuffer()) }
}

describe("downloads", () => {
  it("answer a safe file's exact bytes with its stored MIME type, as an attachment, nosniff", async () => {
    const pixel = byName("pixel.png")
    expect(pixel).toMatchObject({ dangerous: false, mimeType: "image/png", downloadUrl: `${h.baseUrl}/messages/${message.id}/attachments/${pixel.id}` })
    const answer = await bytes(pixel.downloadUrl)
    expect(answer.status).toBe(200)
    expect(answer.body.equals(png)).toBe(true)
    expect(answer.headers.get("content-type")).toBe("image/png")
    expect(answer.headers.get("content-disposition")).toMatch(/^attachment; filename="pixel.png"/)
    expect(answer.headers.get("x-content-type-options")).toBe("nosniff")
    const pdfAnswer = await bytes(byName("invoice.pdf").downloadUrl)
    expect([pdfAnswer.status, pdfAnswer.headers.get("content-type")]).toEqual([200, "application/pdf"])
    expect(pdfAnswer.body.equals(pdf)).toBe(true)
  })

  it("keeps a non-ASCII file name safe in Content-Disposition (RFC 6266)", async () => {
    const text = byName("Grüße 2026.txt")
    const answer = await bytes(text.downloadUrl)
    expect(answer.status).toBe(200)
    const disposition = answer.headers.get("content-disposition")!
    expect(disposition).toBe(`attachment; filename="Gr__e 2026.txt"; filename*=UTF-8''${encodeURIComponent("Grüße 2026.txt")}`)
  })

  for (const name of ["setup.exe", "page.html", "logo.svg"]) {
    it(`${name} is dangerous: 409 without confirm=1, then application/octet-stream as an attachment`, async () => {
      const file = byName(name)
      expect(file.dangerous).toBe(true)
      expect(file.previewUrl).toBeNull()
      const refused = await get(file.downloadUrl)
      expectProblem(refused, 409, "dangerous_attachment")
      const confirmed = await bytes(`${file.downloadUrl}?confirm=1`)
      expect(confirmed.status).toBe(200)
      expect(confirmed.headers.get("content-type")).toBe("application/octet-stream")
      expect(confirmed.headers.get("content-disposition")).toMatch(/^attachment; /)
      expect(confirmed.headers.get("x-content-type-options")).toBe("nosniff")
      expect(directives(confirmed.headers.get("content-security-policy"))).toMatchObject({ "default-src": ["'none'"], sandbox: [] })
    })
  }

  it("refuses confirm values other than 1 with 422", async () => {
    const answer = await get(`${byName("setup.exe").downloadUrl}?confirm=yes`)
    expectProblem(answer, 422, "validation_failed")
    expect(Object.keys(answer.body.error.fields)).toEqual(["confirm"])
  })

  it("answers 404 for a stranger, another message's attachment id and an unknown id; needs read", async () => {
    const pixel = byName("pixel.png")
    expectProblem(await get(pixel.downloadUrl, { session: stranger }), 404, "not_found")
    expectProblem(await get(`/messages/${message.id + 1000}/attachments/${pixel.id}`), 404, "not_found")
    expectProblem(await get(`/messages/${message.id}/attachments/999999`), 404, "not_found")
    const deleteOnly = await h.createToken(owner, ["delete"], "no read")
    expectProblem(await get(pixel.downloadUrl, { token: deleteOnly }), 403, "insufficient_scope")
  })
})

const directives = (csp: string | null) =>
  Object.fromEntries((csp ?? "").split(";").map((d) => d.trim().split(/\s+/)).filter((d) => d[0] !== "").map(([name, ...values]) => [name, values]))

describe("previews", () => {
  it("show a safe image inline under a sandbox CSP", async () => {
    const pixel = byName("pixel.png")
    expect(pixel.previewUrl).toBe(`${pixel.downloadUrl}/preview`)
    const answer = await bytes(pixel.previewUrl!)
    expect(answer.status).toBe(200)
    expect(answer.body.equals(png)).toBe(true)
    expect(answer.headers.get("content-type")).toBe("image/png")
    expect(answer.headers.get("content-disposition")).toMatch(/^inline; /)
    expect(answer.headers.get("x-content-type-options")).toBe("nosniff")
    const csp = directives(answer.headers.get("content-security-policy"))
    expect(csp["default-src"]).toEqual(["'none'"])
    expect(csp["sandbox"]).toEqual([])
  })

  for (const name of ["setup.exe", "page.html", "logo.svg", "invoice.pdf", "Grüße 2026.txt"]) {
    it(`answer 404 for ${name} (dangerous or unsupported)`, async () => {
      const file = byName(name)
      expect(file.previewUrl).toBeNull()
      expectProblem(await get(`${file.downloadUrl}/preview`), 404, "not_found")
    })
  }

  it("answer 404 for a stranger", async () => {
    expectProblem(await get(byName("pixel.png").previewUrl!, { session: stranger }), 404, "not_found")
  })
})

describe("raw", () => {
  it("answers the original bytes as message/rfc822, also in the trash, and 404 once destroyed", async () => {
    const raw = await bytes(message.rawUrl)
    expect(raw.status).toBe(200)
    expect(raw.headers.get("content-type")).toMatch(/^message\/rfc822/)
    const stored = await h.storedRaw(message.id)
    expect(raw.body.equals(stored!.raw)).toBe(true)
    expect((await h.request(`/messages/${message.id}`, { method: "DELETE", session: owner })).status).toBe(204)
    expect((await bytes(message.rawUrl)).status).toBe(200)
    expect((await h.request(`/messages/${message.id}?permanent=1`, { method: "DELETE", session: owner })).status).toBe(204)
    expectProblem(await get(message.rawUrl), 404, "not_found")
    expectProblem(await get(byName("pixel.png").downloadUrl), 404, "not_found")
  })
})
