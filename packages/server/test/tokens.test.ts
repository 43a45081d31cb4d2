import { ApiToken, CreatedToken } from "@burnbox/domain"
import { expectProblem, expectShape, type Harness, startHarness } from "@burnbox/testkit"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
beforeAll(async () => {
  h = await startHarness()
})
afterAll(() => h.close())

const TokenList = Schema.Struct({ items: Schema.Array(ApiToken) })

describe("POST /tokens", () => {
  it("creates a token shown once: bbx_pat_ secret, prefix of 12 characters, stored only as a digest", async () => {
    const session = await h.signup({ plan: "pro" })
    const answer = await h.request("/tokens", { method: "POST", session, body: { name: "ci", scopes: ["read", "test"] } })
    expect(answer.status).toBe(201)
    const created = expectShape(CreatedToken, answer.body)
    expect(created.secret).toMatch(/^bbx_pat_[A-Za-z0-9_-]{40,}$/)
    expect(created.token.prefix).toBe(created.secret.slice(0, 12))
    expect(created.token).toMatchObject({ name: "ci", scopes: ["read", "test"], status: "active", lastUsedAt: null, expiresAt: null })
    const stored = await h.query("SELECT digest, prefix FROM api_tokens WHERE id = $1", [created.token.id])
    expect(stored[0].digest).toHaveLength(32)
    expect(JSON.stringify(await h.query("SELECT * FROM api_tokens"))).not.toContain(created.secret.slice(12))
    const listed = expectShape(TokenList, (await h.request("/tokens", { session })).body)
    expect(JSON.stringify(listed)).not.toContain(created.secret)
  })

  it("is refused with 403 plan_required without developer access (free and premium)", async () => {
    for (const plan of ["free", "premium"] as const) {
      const session = await h.signup({ plan })
      expectProblem(await h.request("/tokens", { method: "POST", session, body: { name: "x", scopes: ["read"] } }), 403, "plan_required")
    }
  })

  it("holds at most ten active tokens (409), and revoking one frees a place", async () => {
    const session = await h.signup({ plan: "pro" })
    for (let i = 0; i < 10; i++) await h.createToken(session, ["read"], `t${i}`)
    expectProblem(await h.request("/tokens", { method: "POST", session, body: { name: "eleventh", scopes: ["read"] } }), 409, "token_limit_reached")
    const list = expectShape(TokenList, (await h.request("/tokens", { session })).body)
    expect((await h.request(`/tokens/${list.items[0]!.id}`, { method: "DELETE", session })).status).toBe(204)
    expect((await h.request("/tokens", { method: "POST", session, body: { name: "eleventh", scopes: ["read"] } })).status).toBe(201)
  })

  it("ten concurrent creations on nine active tokens leave exactly ten active", async () => {
    const session = await h.signup({ plan: "pro" })
    for (let i = 0; i < 9; i++) await h.createToken(session, ["read"], `t${i}`)
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) =>
      h.request("/tokens", { method: "POST", session, body: { name: `race${i}`, scopes: ["read"] } })))
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1)
    expect(answers.filter((a) => a.status === 409)).toHaveLength(9)
  })

  it("validates every field: name 1..80, scopes 1..5 known and unique, expiresAt a future date-time, no extra", async () => {
    const session = await h.signup({ plan: "pro" })
    const cases: Array<[unknown, Record<string, string>]> = [
      [{ name: "", scopes: ["read"] }, { name: "too_short" }],
      [{ name: "x".repeat(81), scopes: ["read"] }, { name: "too_long" }],
      [{ name: "x", scopes: [] }, { scopes: "too_short" }],
      [{ name: "x", scopes: ["read", "read"] }, { scopes: "not_unique" }],
      [{ name: "x", scopes: ["admin"] }, { "scopes.0": "invalid_value" }],
      [{ name: "x", scopes: ["read"], expiresAt: "tomorrow" }, { expiresAt: "invalid_date_time" }],
      [{ name: "x", scopes: ["read"], expiresAt: "2027-02-30T00:00:00Z" }, { expiresAt: "invalid_date_time" }],
      // Text the database cannot hold: refused when the statement is, so no token is made.
      [{ name: "a\u0000b", scopes: ["read"] }, { body: "invalid_text" }],
      [{ name: "x", scopes: ["read"], expiresAt: "2027-01-01T24:00:00Z" }, { expiresAt: "invalid_date_time" }],
      [{ name: "x", scopes: ["read"], owner: 2 }, { owner: "unknown_field" }],
      [{ scopes: ["read"] }, { name: "required" }]
    ]
    for (const [body, fields] of cases) {
      const answer = await h.request("/tokens", { method: "POST", session, body })
      expectProblem(answer, 422, "validation_failed")
      expect(answer.body.error.fields, JSON.stringify(body)).toEqual(fields)
    }
    const past = await h.request("/tokens", { method: "POST", session, body: { name: "x", scopes: ["read"], expiresAt: "2020-01-01T00:00:00Z" } })
    expectProblem(past, 422, "validation_failed")
    expect(past.body.error.fields).toEqual({ expiresAt: "must_be_future" })
    expect((await h.request("/tokens", { session })).body.items).toEqual([])
  })

  it("an expiring token works until expiresAt and is invalid_token after it", async () => {
    const session = await h.signup({ plan: "pro" })
    const expiresAt = new Date(h.clock.now().getTime() + 3_600_000).toISOString()
    const created = await h.request<{ secret: string }>("/tokens", { method: "POST", session, body: { name: "short", scopes: ["read"], expiresAt } })
    expect(created.status).toBe(201)
    expect((await h.request("/me", { token: created.body.secret })).status).toBe(200)
    h.clock.advance("61 minutes")
    expectProblem(await h.request("/me", { token: created.body.secret }), 401, "invalid_token")
  })
})

describe("token use", () => {
  it("records lastUsedAt on use, and a revoked token stops at once", async () => {
    const session = await h.signup({ plan: "pro" })
    const secret = await h.createToken(session, ["read"], "used")
    expect((await h.request("/me", { token: secret })).status).toBe(200)
    const [token] = expectShape(TokenList, (await h.request("/tokens", { session })).body).items
    expect(token!.lastUsedAt).toBe(h.clock.now().toISOString())
    expect((await h.request(`/tokens/${token!.id}`, { method: "DELETE", session })).status).toBe(204)
    expectProblem(await h.request("/me", { token: secret }), 401, "invalid_token")
    const [after] = expectShape(TokenList, (await h.request("/tokens", { session })).body).items
    expect(after!.status).toBe("revoked")
  })

  it("DELETE of an unknown token id is 404, of a non-numeric id 422", async () => {
    const session = await h.signup({ plan: "pro" })
    expectProblem(await h.request("/tokens/999999", { method: "DELETE", session }), 404, "not_found")
    const bad = await h.request("/tokens/abc", { method: "DELETE", session })
    expectProblem(bad, 422, "validation_failed")
    expect(bad.body.error.fields).toEqual({ id: "invalid_type" })
  })
})
