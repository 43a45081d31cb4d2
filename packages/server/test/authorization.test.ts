/**
 * The authorization matrix of every authenticated endpoint, generated from the contract's
 * own endpoint table so a new endpoint cannot be forgotten: no credentials, a garbage
 * token, a revoked token, a missing scope, a bearer on a Session-only operation, a cookie
 * without CSRF, and another account's resource. A token holding the scope gets past
 * authentication to the operation's own success or a refusal the served OpenAPI document
 * declares for it, in the Problem shape; never a 5xx. Every path parameter names the owner's tag.
 */
import { Access, BurnboxApi } from "@burnbox/domain"
import { expectProblem, type Harness, type Session, startHarness } from "@burnbox/testkit"
import { Context } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

interface Operation {
  readonly name: string
  readonly method: string
  readonly path: string
  readonly scope: string
  /** The path as the served OpenAPI document names it, `/api/v1/tags/{id}`. */
  readonly template: string
}

const operations: ReadonlyArray<Operation> = Object.values(BurnboxApi.groups).flatMap((group) =>
  Object.values(group.endpoints).flatMap((endpoint) => {
    const access = Context.getOrUndefined(endpoint.annotations, Access) ?? Context.getOrUndefined(group.annotations, Access)
    return access === undefined ? [] : [{
      name: `${group.identifier}.${endpoint.identifier}`,
      method: endpoint.method,
      path: endpoint.path.replace("/api/v1", ""),
      scope: access.scope,
      template: endpoint.path.replace(/:([A-Za-z]+)/g, "{$1}")
    }]
  })
)

/** A body each state-changing operation accepts, so refusals are about credentials only. */
const sampleBodies: Readonly<Record<string, unknown>> = {
  "tokens.create": { name: "matrix", scopes: ["read"] },
  "account.density": { density: "compact" },
  "tags.create": { name: "matrix" },
  "tags.update": { name: "matrix-renamed" },
  "aliases.reserve": { domainId: 1, style: "words" },
  "aliases.claim": { aliasId: 999999, reservationToken: "matrix" },
  "aliases.update": { label: "matrix" },
  "aliases.setTimer": { selfDestructAt: "2030-01-01T00:00:00Z" }
}

const safe = (method: string) => method === "GET" || method === "HEAD"

let h: Harness
let owner: Session
let stranger: Session
let tokens: Record<string, string>
let revoked: string
let tagId: number
let doc: { readonly paths: Readonly<Record<string, Readonly<Record<string, { readonly responses: Readonly<Record<string, unknown>> }>>>> }

/** The statuses the served OpenAPI document declares for an operation: its success and its refusals. */
const declaredStatuses = (op: Operation): ReadonlyArray<number> => {
  const responses = doc.paths[op.template]?.[op.method.toLowerCase()]?.responses
  if (responses === undefined) throw new Error(`${op.method} ${op.template} is not in the served document`)
  return Object.keys(responses).map(Number)
}

beforeAll(async () => {
  h = await startHarness()
  owner = await h.signup({ plan: "pro" })
  stranger = await h.signup({ plan: "pro" })
  tokens = {}
  for (const scope of ["read", "manage-aliases", "delete", "webhooks", "test"]) tokens[scope] = await h.createToken(owner, [scope], scope)
  revoked = await h.createToken(owner, ["read", "manage-aliases", "delete", "webhooks", "test"], "revoked")
  const listed = await h.request<{ items: Array<{ id: number; name: string }> }>("/tokens", { session: owner })
  const revokedId = listed.body.items.find((t) => t.name === "revoked")!.id
  expect((await h.request(`/tokens/${revokedId}`, { method: "DELETE", session: owner })).status).toBe(204)
  const tag = await h.request<{ id: number }>("/tags", { method: "POST", session: owner, body: { name: "owner-tag" } })
  tagId = tag.body.id
  doc = (await h.request("/api/v1/openapi.json")).body
})
afterAll(() => h.close())

const call = (op: Operation, options: Parameters<Harness["request"]>[1] = {}) =>
  h.request(op.path.replace(/:[A-Za-z]+/g, String(tagId)), {
    method: op.method,
    ...(sampleBodies[op.name] === undefined ? {} : { body: sampleBodies[op.name] }),
    ...options
  })

describe("every authenticated endpoint", () => {
  it("is in the matrix", () => {
    expect(operations.map((o) => o.name)).toEqual(expect.arrayContaining([
      "auth.logout", "tokens.list", "tokens.create", "tokens.revoke", "account.bootstrap", "account.me", "account.storage",
      "account.domains", "account.density", "account.pushSettings", "tags.list", "tags.create", "tags.update", "tags.remove",
      "aliases.list", "aliases.claim", "aliases.reserve", "aliases.releaseCandidates", "aliases.releaseCandidatesPost",
      "aliases.update", "aliases.remove", "aliases.pause", "aliases.resume", "aliases.burn", "aliases.setTimer", "aliases.clearTimer"
    ]))
  })

  for (const op of operations) {
    describe(`${op.method} ${op.path} (${op.scope})`, () => {
      it("without credentials: 401 authentication_required with WWW-Authenticate", async () => {
        const answer = await call(op)
        expectProblem(answer, 401, "authentication_required")
        expect(answer.headers.get("www-authenticate")).toMatch(/^Bearer realm="burnbox"/)
      })

      it("with a garbage token: 401 invalid_token with WWW-Authenticate and rate-limit headers", async () => {
        const answer = await call(op, { token: "bbx_pat_not-a-real-token" })
        expectProblem(answer, 401, "invalid_token")
        expect(answer.headers.get("www-authenticate")).toContain('error="invalid_token"')
        expect(answer.headers.get("ratelimit-limit")).toMatch(/^\d+$/)
      })

      it("with a malformed Authorization header: 401 invalid_token", async () => {
        expectProblem(await call(op, { headers: { authorization: "Basic Zm9vOmJhcg==" } }), 401, "invalid_token")
      })

      it("with a revoked token: 401 invalid_token", async () => {
        expectProblem(await call(op, { token: revoked }), 401, "invalid_token")
      })

      if (op.scope === "session") {
        it("with a bearer token holding every scope: 403 session_required", async () => {
          const all = await h.createToken(owner, ["read", "manage-aliases", "delete", "webhooks", "test"], `all-${op.name}`)
          expectProblem(await call(op, { token: all }), 403, "session_required")
          const list = await h.request<{ items: Array<{ id: number; name: string }> }>("/tokens", { session: owner })
          await h.request(`/tokens/${list.body.items.find((t) => t.name === `all-${op.name}`)!.id}`, { method: "DELETE", session: owner })
        })
      } else {
        it("with a token lacking the scope: 403 insufficient_scope naming the scope", async () => {
          const other = op.scope === "read" ? tokens["webhooks"]! : tokens["read"]!
          const answer = await call(op, { token: other })
          expectProblem(answer, 403, "insufficient_scope")
          expect(answer.headers.get("www-authenticate")).toContain(`scope="${op.scope}"`)
        })

        it("with a token holding the scope: past authentication, its own success or a refusal it declares (never 401, 403 or 5xx)", async () => {
          const answer = await call(op, { token: tokens[op.scope]! })
          expect([401, 403], answer.text).not.toContain(answer.status)
          expect(answer.status, answer.text).toBeLessThan(500)
          expect(declaredStatuses(op), `${answer.status} ${answer.text}`).toContain(answer.status)
          // A refusal is a Problem the operation declares, not an error page.
          if (answer.status >= 400) expectProblem(answer, answer.status, answer.body?.error?.code)
        })
      }

      if (!safe(op.method)) {
        it("with a session cookie but no X-CSRF-Token: 403 invalid_csrf_token", async () => {
          expectProblem(await call(op, { session: owner, withoutCsrf: true }), 403, "invalid_csrf_token")
        })

        it("with a session cookie and a wrong X-CSRF-Token: 403 invalid_csrf_token", async () => {
          expectProblem(await call(op, { session: { ...owner, csrf: stranger.csrf } }), 403, "invalid_csrf_token")
        })
      }
    })
  }
})

describe("another account's resources", () => {
  it("a stranger's tag is 404 to PATCH and DELETE, and stays untouched", async () => {
    expectProblem(await h.request(`/tags/${tagId}`, { method: "PATCH", session: stranger, body: { name: "stolen" } }), 404, "not_found")
    expectProblem(await h.request(`/tags/${tagId}`, { method: "DELETE", session: stranger }), 404, "not_found")
    const mine = await h.request<{ items: Array<{ id: number; name: string }> }>("/tags", { session: owner })
    expect(mine.body.items.find((t) => t.id === tagId)?.name).toBe("owner-tag")
  })

  it("a stranger cannot revoke another account's token (404), and it keeps working", async () => {
    const list = await h.request<{ items: Array<{ id: number; name: string }> }>("/tokens", { session: owner })
    const id = list.body.items.find((t) => t.name === "read")!.id
    expectProblem(await h.request(`/tokens/${id}`, { method: "DELETE", session: stranger }), 404, "not_found")
    expect((await h.request("/me", { token: tokens["read"]! })).status).toBe(200)
  })

  it("lists show only the caller's own tags and tokens", async () => {
    const tags = await h.request<{ items: Array<unknown> }>("/tags", { session: stranger })
    const list = await h.request<{ items: Array<unknown> }>("/tokens", { session: stranger })
    expect(tags.body.items).toEqual([])
    expect(list.body.items).toEqual([])
  })
})

describe("a session of a deleted or unknown cookie", () => {
  it("is 401 authentication_required", async () => {
    const answer = await h.request("/me", { headers: { cookie: "service_session=forged-cookie-value" } })
    expectProblem(answer, 401, "authentication_required")
  })
})
