import { Account, BearerBootstrap, MailDomain, PushSettings, StorageUsage } from "@burnbox/domain"
import { expectProblem, expectShape, type Harness, startHarness } from "@burnbox/testkit"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
beforeAll(async () => {
  h = await startHarness()
})
afterAll(() => h.close())

describe("GET /me", () => {
  it("answers the Account with the resolved plan, over a bearer token", async () => {
    const session = await h.signup({ plan: "pro" })
    const token = await h.createToken(session, ["read"])
    const answer = await h.request("/me", { token })
    const account = expectShape(Account, answer.body)
    expect(account).toMatchObject({ id: session.accountId, email: session.email, storageUsedBytes: 0, storageQuotaBytes: 10 * 1024 ** 3, mailboxDensity: "default" })
    expect(account.plan).toMatchObject({ code: "pro", activeAliasCap: 200, developerAccess: true, candidateShufflesUnlimited: true })
  })
})

describe("GET /bootstrap", () => {
  it("in bearer form holds exactly user, aliases, domains and tags", async () => {
    const session = await h.signup({ plan: "pro" })
    const token = await h.createToken(session, ["read"])
    const answer = await h.request("/bootstrap", { token })
    expect(Object.keys(answer.body).sort()).toEqual(["aliases", "domains", "tags", "user"])
    const bootstrap = expectShape(BearerBootstrap, answer.body)
    expect(Object.keys(bootstrap.user)).not.toContain("isAdmin")
    expect(Object.keys(bootstrap.user)).not.toContain("handle")
  })
})

describe("GET /storage", () => {
  it("reports used, quota, remaining and a ratio", async () => {
    const session = await h.signup()
    await h.query("UPDATE accounts SET storage_used_bytes = $1 WHERE id = $2", [13_107_200, session.accountId])
    const usage = expectShape(StorageUsage, (await h.request("/storage", { session })).body)
    expect(usage).toEqual({ usedBytes: 13_107_200, quotaBytes: 52_428_800, remainingBytes: 39_321_600, usageRatio: 0.25 })
  })

  it("caps the ratio at 1 when over quota, and a zero quota reports 1", async () => {
    const session = await h.signup()
    await h.query("UPDATE accounts SET storage_used_bytes = $1 WHERE id = $2", [60 * 1024 * 1024, session.accountId])
    expect((await h.request("/storage", { session })).body).toMatchObject({ usageRatio: 1, remainingBytes: 0 })
    await h.query(`UPDATE accounts SET storage_used_bytes = 0, overrides = '{"storageQuotaBytes": 0}' WHERE id = $1`, [session.accountId])
    expect((await h.request("/storage", { session })).body).toEqual({ usedBytes: 0, quotaBytes: 0, remainingBytes: 0, usageRatio: 1 })
  })
})

describe("GET /domains", () => {
  it("marks premium_only domains claimable only with earlyAccessDomains, else upgradeRequired", async () => {
    const Domains = Schema.Struct({ items: Schema.Array(MailDomain) })
    const free = expectShape(Domains, (await h.request("/domains", { session: await h.signup() })).body)
    const premium = expectShape(Domains, (await h.request("/domains", { session: await h.signup({ plan: "premium" }) })).body)
    const vip = (items: typeof free.items) => items.find((d) => d.name === "vip.test")
    expect(vip(free.items)).toMatchObject({ tier: "premium_only", state: "active", claimable: false, upgradeRequired: true })
    expect(vip(premium.items)).toMatchObject({ claimable: true, upgradeRequired: false })
  })

  it("a retired domain is neither claimable nor upgradeable", async () => {
    await h.query("INSERT INTO domains (name, state) VALUES ('old.test', 'retired')")
    const items = (await h.request("/domains", { session: await h.signup({ plan: "pro" }) })).body.items
    expect(items.find((d: { name: string }) => d.name === "old.test")).toMatchObject({ state: "retired", claimable: false, upgradeRequired: false })
  })
})

describe("PUT /mailbox/density", () => {
  it("stores the density and /me reflects it", async () => {
    const session = await h.signup()
    const answer = await h.request("/mailbox/density", { method: "PUT", session, body: { density: "comfortable" } })
    expect(answer.status).toBe(200)
    expect(answer.body).toEqual({ density: "comfortable" })
    expect((await h.request("/me", { session })).body.mailboxDensity).toBe("comfortable")
  })

  it("refuses an unknown density and a missing one with 422 naming density", async () => {
    const session = await h.signup()
    for (const body of [{ density: "huge" }, {}]) {
      const answer = await h.request("/mailbox/density", { method: "PUT", session, body })
      expectProblem(answer, 422, "validation_failed")
      expect(Object.keys(answer.body.error.fields)).toEqual(["density"])
    }
  })
})

describe("GET /push/settings", () => {
  it("answers a new account's push: disabled, the service's VAPID key, no subscriptions", async () => {
    const settings = expectShape(PushSettings, (await h.request("/push/settings", { session: await h.signup() })).body)
    expect(settings).toEqual({ enabled: false, nudgeDismissed: false, publicKey: expect.stringMatching(/^[A-Za-z0-9_-]{87}$/), subscriptions: [] })
  })
})

describe("unknown routes and methods", () => {
  it("an unknown path under /api/v1 is 404 in the Problem shape", async () => {
    expectProblem(await h.request("/no-such-thing"), 404, "not_found")
    expectProblem(await h.request("/tags/1/children", { method: "POST" }), 404, "not_found")
  })

  it("a known path with the wrong method is 405 with Allow", async () => {
    const answer = await h.request("/me", { method: "DELETE" })
    expectProblem(answer, 405, "method_not_allowed")
    expect(answer.headers.get("allow")).toBe("GET")
    expect((await h.request("/tags/3", { method: "GET" })).headers.get("allow")).toBe("PATCH, DELETE")
  })
})

describe("OpenAPI and docs", () => {
  it("serves an OpenAPI 3.1 document of the contract and the interactive docs", async () => {
    const spec = await h.request("/api/v1/openapi.json")
    expect(spec.status).toBe(200)
    expect(spec.body.openapi).toBe("3.1.0")
    expect(Object.keys(spec.body.paths)).toEqual(expect.arrayContaining(["/api/v1/me", "/api/v1/tokens", "/api/v1/tags/{id}", "/api/v1/auth/signup"]))
    expect(JSON.stringify(spec.body.components.schemas)).toContain("Problem")
    // Patterns are published: the contract's event ids, and path ids (digits, as the router reads them).
    expect(JSON.stringify(spec.body.components.schemas)).toContain(JSON.stringify("^evt_[0-9A-HJKMNP-TV-Z]{26}$"))
    const tagId = (spec.body.paths["/api/v1/tags/{id}"].patch.parameters as Array<any>).find((p) => p.name === "id")
    expect(tagId).toMatchObject({ in: "path", required: true, schema: { type: "string", pattern: "^-?\\d+$" } })
    const docs = await h.request("/docs")
    expect(docs.status).toBe(200)
    expect(docs.text).toContain("openapi")
  })

  it("declares its security: bearer, session cookie and CSRF header schemes, each operation's requirement, and its server", async () => {
    const spec = (await h.request("/api/v1/openapi.json")).body
    expect(spec.components.securitySchemes).toEqual({
      bearer: expect.objectContaining({ type: "http", scheme: "bearer" }),
      session: expect.objectContaining({ type: "apiKey", in: "cookie", name: "service_session" }),
      csrf: expect.objectContaining({ type: "apiKey", in: "header", name: "X-CSRF-Token" })
    })
    expect(spec.servers).toEqual([{ url: h.baseUrl.replace(/\/api\/v1$/, ""), description: "this burnbox" }])
    const operation = (method: string, path: string) => spec.paths[`/api/v1${path}`][method]
    // A bearer token with the scope, or a session; a session changing state sends its CSRF header.
    expect(operation("get", "/me")).toMatchObject({ security: [{ bearer: [] }, { session: [] }], "x-burnbox-scope": "read" })
    expect(operation("post", "/aliases/candidates")).toMatchObject({ security: [{ bearer: [] }, { session: [], csrf: [] }], "x-burnbox-scope": "manage-aliases" })
    // Session-only operations, and the public ones.
    expect(operation("post", "/tokens").security).toEqual([{ session: [], csrf: [] }])
    expect(operation("get", "/tokens").security).toEqual([{ session: [] }])
    expect(operation("post", "/auth/signup").security).toEqual([])
    expect(operation("post", "/auth/login").security).toEqual([])
    // Every operation says what it needs.
    for (const [path, methods] of Object.entries<Record<string, { security?: unknown }>>(spec.paths)) {
      for (const [method, op] of Object.entries(methods)) expect(op.security, `${method} ${path}`).toBeInstanceOf(Array)
    }
  })

  it("a request made from the document alone, through its schemes, succeeds", async () => {
    const spec = (await h.request("/api/v1/openapi.json")).body
    const session = await h.signup({ plan: "pro" })
    const token = await h.createToken(session, ["read"])
    const server: string = spec.servers[0].url
    /** The headers a generated client sends for one of the operation's requirements. */
    const credentials = (requirement: Record<string, unknown>, values: Record<string, string>) => {
      const headers: Record<string, string> = {}
      for (const name of Object.keys(requirement)) {
        const scheme = spec.components.securitySchemes[name]
        if (scheme.type === "http" && scheme.scheme === "bearer") headers["authorization"] = `Bearer ${values[name]}`
        else if (scheme.in === "cookie") headers["cookie"] = `${scheme.name}=${values[name]}`
        else if (scheme.in === "header") headers[scheme.name] = values[name]!
      }
      return headers
    }
    const me = spec.paths["/api/v1/me"].get
    const byBearer = await fetch(`${server}/api/v1/me`, { headers: credentials(me.security[0], { bearer: token }) })
    expect(byBearer.status).toBe(200)
    expect(((await byBearer.json()) as { email: string }).email).toBe(session.email)
    const createTag = spec.paths["/api/v1/tags"].post
    const bySession = await fetch(`${server}/api/v1/tags`, {
      method: "POST",
      headers: { "content-type": "application/json", ...credentials(createTag.security.at(-1), { session: session.cookie, csrf: session.csrf }) },
      body: JSON.stringify({ name: "from the docs" })
    })
    expect(bySession.status, await bySession.clone().text()).toBe(201)
  })
})
