/**
 * The HTML view and the remote-image preference (spec 2.11, 2.16, 4.5, 7): GET
 * /messages/{id}/html answers the sanitized HTML as text/html under a restrictive sandbox CSP
 * and nosniff; remote images are blocked unless ?remote=1 or the reader chose always-load for
 * the sender (PUT .../remote-images/preference, Session only); 404 without HTML. Every payload
 * of the sanitizer's XSS list is sent as test mail and read back through the endpoint.
 */
import { RemoteImagePreference } from "@burnbox/domain"
import { walkHtml } from "@burnbox/domain/mail/sanitize"
import { claimAlias, deliver, detail, expectProblem, expectShape, type Harness, injectMail, processed, type Session, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { XssPayloads } from "@burnbox/domain/test/xss-payloads"
import { checked } from "@burnbox/domain/test/checked-html"

let h: Harness
let owner: Session
let stranger: Session
let readToken: string
let aliasId: number
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 7401 })
  ;[owner, stranger] = await Promise.all([h.signup({ plan: "pro" }), h.signup({ plan: "pro" })])
  readToken = await h.createToken(owner, ["read"])
  aliasId = (await claimAlias(h, { session: owner })).id
})
afterAll(() => h.close())

const html = (id: number, query = "", who: { token: string } | { session: Session } = { token: readToken }) =>
  h.request(`/messages/${id}/html${query}`, { ...who })

const directives = (csp: string | null) =>
  Object.fromEntries((csp ?? "").split(";").map((d) => d.trim().split(/\s+/)).filter((d) => d[0] !== "").map(([name, ...values]) => [name, values]))

/** The CSP of the HTML view: nothing runs, nothing is fetched but inline images (and https: images when allowed). */
const expectViewHeaders = (answer: { status: number; headers: Headers; text: string }, remote: boolean) => {
  expect(answer.status, answer.text).toBe(200)
  expect(answer.headers.get("content-type")).toMatch(/^text\/html\b/)
  expect(answer.headers.get("x-content-type-options")).toBe("nosniff")
  const csp = directives(answer.headers.get("content-security-policy"))
  expect(csp["default-src"]).toEqual(["'none'"])
  expect(csp["img-src"]).toEqual(remote ? ["data:", "cid:", "https:"] : ["data:", "cid:"])
  expect(csp["style-src"]).toEqual(["'unsafe-inline'"])
  expect(csp["sandbox"]).toEqual([])
  expect(csp["script-src"]).toBeUndefined()
}

const EXECUTABLE_OR_FOREIGN_ELEMENT =
  /<\s*\/?\s*(?:script|iframe|frame|frameset|object|embed|applet|form|input|button|select|option|textarea|isindex|meta|base|link|svg|math|template|noscript|noembed|xmp|video|audio|source|animate|set|param|portal)(?![\w-])/i
const SCRIPT_SCHEME = /(?:java|vb|live)script:|data:(?!image\/(?:png|gif|jpeg|webp)[;,])/i
const compact = (value: string) => value.replace(/[\u0000-\u0020\u007f]+/g, "").toLowerCase()

/** No element, attribute, URL or style in the body could run script. */
const expectInert = (body: string, what: string) => {
  expect(body, what).not.toMatch(EXECUTABLE_OR_FOREIGN_ELEMENT)
  walkHtml(checked(body), {
    open: (tag, attributes) => {
      for (const [name, value] of Object.entries(attributes)) {
        expect(name, `${what}: <${tag} ${name}>`).not.toMatch(/^on/i)
        expect(["srcdoc", "action", "formaction", "xlink:href", "poster", "ping", "srcset", "data", "http-equiv"], what).not.toContain(name)
        expect(compact(value), `${what}: <${tag} ${name}="${value}">`).not.toMatch(SCRIPT_SCHEME)
        if (name === "style") expect(value, what).not.toMatch(/expression|behavior|binding|\\|url\((?!"https?:|"cid:|"data:image\/)/i)
      }
    }
  })
  for (const [, css] of body.matchAll(/<style\b[^>]*>([\s\S]*?)<\/style>/gi)) {
    expect(css, what).not.toMatch(/@import|expression|javascript|vbscript|binding|behavior|[<\\]|url\((?!"https?:)/i)
  }
}

describe("XSS payloads through GET /messages/{id}/html", () => {
  it(`serves each of ${XssPayloads.length} payloads inert, under the sandbox CSP, remote images blocked or not`, async () => {
    expect(XssPayloads.length).toBeGreaterThanOrEqual(30)
    const ids: Array<readonly [string, number]> = []
    for (const [name, payload] of XssPayloads) {
      ids.push([name, await injectMail(h, { session: owner }, aliasId, { subject: `xss: ${name}`, html: payload, text: "plain" })])
    }
    for (const [name, id] of ids) {
      const seen = await processed(h, { session: owner }, id)
      expect(seen.htmlUrl, name).toBe(`${h.baseUrl}/messages/${id}/html`)
      const blocked = await html(id, "", { session: owner })
      expectViewHeaders(blocked, false)
      expectInert(blocked.text, name)
      const remote = await html(id, "?remote=1", { session: owner })
      expectViewHeaders(remote, true)
      expectInert(remote.text, `${name} (remote=1)`)
    }
  })
})

describe("remote images", () => {
  const mail = `<p>Hello</p><img src="https://tracker.example/open.gif?u=42" alt="pixel"><img src="data:image/png;base64,iVBORw0KGgo=" alt="inline">`

  it("are blocked by default and loaded with ?remote=1; remote=0 is the default and other values are 422", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId, 1, { from: "News <News@Example.COM>", html: mail })
    const seen = await detail(h, { token: readToken }, id!)
    expect(seen.remoteImages).toEqual({
      blockedUrl: `${h.baseUrl}/messages/${id}/html`,
      loadUrl: `${h.baseUrl}/messages/${id}/html?remote=1`,
      alwaysLoadFromSender: false
    })
    const blocked = await html(id!)
    expectViewHeaders(blocked, false)
    expect(blocked.text).toContain("Hello")
    expect(blocked.text).not.toContain("tracker.example")
    expect(blocked.text).toContain("data:image/png")
    const zero = await html(id!, "?remote=0")
    expect(zero.text).toBe(blocked.text)
    const loaded = await html(id!, "?remote=1")
    expectViewHeaders(loaded, true)
    expect(loaded.text).toContain(`src="https://tracker.example/open.gif?u=42"`)
    for (const bad of ["2", "yes", "true"]) {
      const answer = await html(id!, `?remote=${bad}`)
      expectProblem(answer, 422, "validation_failed")
      expect(Object.keys(answer.body.error.fields)).toEqual(["remote"])
    }
  })

  it("load for a sender the reader set to always-load, and the detail says so; the preference is the reader's own", async () => {
    const [id, later] = await deliver(h, { session: owner }, aliasId, 2, { from: "Shop <Deals@Shop.Example>", html: mail })
    const put = await h.request(`/messages/${id}/remote-images/preference`, { method: "PUT", session: owner, body: { alwaysLoad: true } })
    expect(put.status, put.text).toBe(200)
    expect(expectShape(RemoteImagePreference, put.body)).toEqual({ sender: "deals@shop.example", alwaysLoad: true })
    // Any message from the sender, including one that arrived before the choice.
    for (const message of [id!, later!]) {
      expect((await detail(h, { token: readToken }, message)).remoteImages?.alwaysLoadFromSender).toBe(true)
      const view = await html(message)
      expectViewHeaders(view, true)
      expect(view.text).toContain("https://tracker.example/open.gif")
    }
    // Mail from another sender stays blocked.
    const [other] = await deliver(h, { session: owner }, aliasId, 1, { from: "x@other.example", html: mail })
    expect((await html(other!)).text).not.toContain("tracker.example")
    expect((await detail(h, { token: readToken }, other!)).remoteImages?.alwaysLoadFromSender).toBe(false)
    // Turning it off blocks them again.
    const off = await h.request(`/messages/${later}/remote-images/preference`, { method: "PUT", session: owner, body: { alwaysLoad: false } })
    expect(off.body).toEqual({ sender: "deals@shop.example", alwaysLoad: false })
    expectViewHeaders(await html(id!), false)
    expect((await detail(h, { token: readToken }, id!)).remoteImages?.alwaysLoadFromSender).toBe(false)
  })

  it("the preference is Session only, owner only, and takes exactly {alwaysLoad: boolean}", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId, 1, { html: mail })
    const path = `/messages/${id}/remote-images/preference`
    expectProblem(await h.request(path, { method: "PUT", token: readToken, body: { alwaysLoad: true } }), 403, "session_required")
    expectProblem(await h.request(path, { method: "PUT", session: stranger, body: { alwaysLoad: true } }), 404, "not_found")
    expectProblem(await h.request(path, { method: "PUT", session: owner, withoutCsrf: true, body: { alwaysLoad: true } }), 403, "invalid_csrf_token")
    for (const body of [{}, { alwaysLoad: "yes" }, { alwaysLoad: true, sender: "x@y.example" }]) {
      expectProblem(await h.request(path, { method: "PUT", session: owner, body }), 422, "validation_failed")
    }
    expect(await h.query("SELECT * FROM remote_image_preferences WHERE sender = 'sender@example.com'")).toEqual([])
  })
})

describe("who may read the HTML", () => {
  it("answers 404 for a message without HTML, a stranger's message and an unknown id; needs the read scope", async () => {
    const [plain] = await deliver(h, { session: owner }, aliasId, 1, { text: "just text" })
    expect((await detail(h, { session: owner }, plain!)).htmlUrl).toBeNull()
    expect((await detail(h, { session: owner }, plain!)).remoteImages).toBeNull()
    expectProblem(await html(plain!), 404, "not_found")
    const [rich] = await deliver(h, { session: owner }, aliasId, 1, { html: "<p>rich</p>" })
    expectProblem(await html(rich!, "", { session: stranger }), 404, "not_found")
    expectProblem(await html(999_999), 404, "not_found")
    const deleteOnly = await h.createToken(owner, ["delete"], "no read")
    expectProblem(await html(rich!, "", { token: deleteOnly }), 403, "insufficient_scope")
  })

  it("still serves the HTML of a message in the trash", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId, 1, { html: "<p>in the bin</p>" })
    expect((await h.request(`/messages/${id}`, { method: "DELETE", session: owner })).status).toBe(204)
    const view = await html(id!)
    expectViewHeaders(view, false)
    expect(view.text).toContain("in the bin")
  })
})
