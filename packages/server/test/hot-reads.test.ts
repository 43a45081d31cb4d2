/**
 * GET /me and GET /storage served from the in-process caches (HotReads, AccountSnapshots):
 * the same answer as the full stack, the same rules, and never a stale account after a change.
 */
import { Account, StorageUsage } from "@burnbox/domain"
import { claimAlias, expectProblem, expectShape, type Harness, injectMail, SmtpClient, startHarness } from "@burnbox/testkit"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
beforeAll(async () => {
  h = await startHarness()
})
afterAll(() => h.close())

const headersOf = (headers: Headers) =>
  Object.fromEntries([...headers].filter(([name]) => !["date", "connection", "keep-alive"].includes(name)))

/** Requests until one is answered by the hot path (the first ones fill the caches). */
const hotAnswer = async (path: string, token: string) => {
  for (let i = 0; i < 5; i++) {
    const before = h.hotReadsServed()
    const answer = await h.request(path, { token })
    if (h.hotReadsServed() === before + 1) return answer
  }
  throw new Error(`${path} was never answered by the hot path`)
}

/** Polls until `check` holds: for changes that arrive by notification from another connection. */
const eventually = async (check: () => Promise<boolean>, what: string) => {
  const deadline = Date.now() + 10_000
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within 10 s`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

describe("the hot read path", () => {
  it("answers GET /me and GET /storage exactly as the full stack does", async () => {
    for (const [path, schema] of [["/me", Account], ["/storage", StorageUsage]] as const) {
      const session = await h.signup({ plan: "pro" })
      const token = await h.createToken(session, ["read"])
      const before = h.hotReadsServed()
      const cold = await h.request(path, { token })
      expect(h.hotReadsServed(), `${path}: the first request fills the caches through the full stack`).toBe(before)
      const hot = await hotAnswer(path, token)
      expect(hot.status).toBe(200)
      expectShape(schema, hot.body)
      expect(hot.text).toBe(cold.text)
      const coldHeaders = headersOf(cold.headers)
      const hotHeaders = headersOf(hot.headers)
      expect(Object.keys(hotHeaders).sort()).toEqual(Object.keys(coldHeaders).sort())
      expect(hotHeaders["content-type"]).toBe(coldHeaders["content-type"])
      expect(hotHeaders["ratelimit-limit"]).toBe(coldHeaders["ratelimit-limit"])
      expect(Number(hotHeaders["ratelimit-remaining"])).toBeLessThan(Number(coldHeaders["ratelimit-remaining"]))
    }
  })

  it("counts every request it answers against the token's limits, and leaves refusals to the full stack", async () => {
    const session = await h.signup({ plan: "pro" })
    await h.query("UPDATE accounts SET overrides = $1 WHERE id = $2", [JSON.stringify({ requestsPerMinute: 300 }), session.accountId])
    const token = await h.createToken(session, ["read"])
    h.clock.set(Date.parse("2026-11-22T08:00:05.000Z"))
    const remaining: Array<number> = []
    let status = 200
    for (let i = 0; i < 310 && status === 200; i++) {
      const answer = await h.request("/me", { token })
      status = answer.status
      if (status === 200) remaining.push(Number(answer.headers.get("ratelimit-remaining")))
      else expectProblem(answer, 429, "rate_limited")
    }
    expect(status).toBe(429)
    expect(remaining).toHaveLength(300)
    expect(remaining).toEqual(Array.from({ length: 300 }, (_, i) => 299 - i))
    expect(h.hotReadsServed()).toBeGreaterThan(200)
  })

  it("counts a refused request once in each window, as the full stack does (not once more for the hot path's try)", async () => {
    const session = await h.signup({ plan: "pro" })
    await h.query("UPDATE accounts SET overrides = $1 WHERE id = $2", [JSON.stringify({ requestsPerMinute: 300, requestsPerDay: 320 }), session.accountId])
    const token = await h.createToken(session, ["read"])
    h.clock.set(Date.parse("2026-11-22T10:00:05.000Z"))
    for (let i = 0; i < 300; i++) expect((await h.request("/me", { token })).status).toBe(200)
    // Over the minute's limit: each refusal also counts once against the day (310 of 320 then).
    for (let i = 0; i < 10; i++) expectProblem(await h.request("/me", { token }), 429, "rate_limited")
    h.clock.advance("61 seconds")
    const next = await h.request("/me", { token })
    expect(next.status, next.text).toBe(200)
    expect(Number(next.headers.get("ratelimit-remaining"))).toBe(320 - 311)
  })

  it("leaves an account its schema cannot encode to the full stack, and keeps serving", async () => {
    const session = await h.signup({ plan: "pro" })
    const token = await h.createToken(session, ["read"])
    // A hand-edited row the Account schema refuses: not an email address.
    const [{ email }] = await h.query<{ email: string }>("SELECT email FROM accounts WHERE id = $1", [session.accountId]) as [{ email: string }]
    await h.query("UPDATE accounts SET email = 'not an address' WHERE id = $1", [session.accountId])
    const served = h.hotReadsServed()
    const answers = [await h.request("/me", { token }), await h.request("/me", { token })]
    for (const answer of answers) expectProblem(answer, 500, "internal_error")
    expect(h.hotReadsServed()).toBe(served)
    await h.query("UPDATE accounts SET email = $1 WHERE id = $2", [email, session.accountId])
    expect((await h.request("/me", { token })).status).toBe(200)
  })

  it("renews a busy token's request-limit block ahead of need, keeping the count exact", async () => {
    const session = await h.signup({ plan: "pro" })
    await h.query("UPDATE accounts SET overrides = $1 WHERE id = $2", [JSON.stringify({ requestsPerMinute: 10_000 }), session.accountId])
    const token = await h.createToken(session, ["read"])
    h.clock.set(Date.parse("2026-11-22T09:00:05.000Z"))
    const remaining: Array<number> = []
    for (let i = 0; i < 80; i++) remaining.push(Number((await h.request("/me", { token })).headers.get("ratelimit-remaining")))
    expect(remaining).toEqual(Array.from({ length: 80 }, (_, i) => 9_999 - i))
    // Blocks of 100: with 20 of the first left, the second is taken without a request waiting.
    const [{ id }] = (await h.request<{ items: Array<{ id: number }> }>("/tokens", { session })).body.items as [{ id: number }]
    await eventually(async () => {
      const rows = await h.query<{ count: number }>("SELECT count FROM rate_windows WHERE key = $1", [`token:${id}:60`])
      return rows[0]?.count === 200
    }, "the block taken ahead")
    const next = await h.request("/me", { token })
    expect(Number(next.headers.get("ratelimit-remaining"))).toBe(9_999 - 80)
  })

  it("refuses a revoked, an expired or an under-scoped token exactly as the full stack does", async () => {
    const session = await h.signup({ plan: "pro" })
    const token = await h.createToken(session, ["read"])
    await hotAnswer("/me", token)
    const tokens = await h.request<{ items: Array<{ id: number; name: string }> }>("/tokens", { session })
    const id = tokens.body.items[0]!.id
    expect((await h.request(`/tokens/${id}`, { method: "DELETE", session })).status).toBe(204)
    expectProblem(await h.request("/me", { token }), 401, "invalid_token")

    const expiresAt = new Date(h.clock.now().getTime() + 60_000).toISOString()
    const expiring = await h.request<{ secret: string }>("/tokens", { method: "POST", session, body: { name: "short", scopes: ["read"], expiresAt } })
    await hotAnswer("/me", expiring.body.secret)
    h.clock.advance(61_000)
    expectProblem(await h.request("/me", { token: expiring.body.secret }), 401, "invalid_token")

    const testOnly = await h.createToken(session, ["test"])
    const refused = await h.request("/me", { token: testOnly })
    expectProblem(refused, 403, "insufficient_scope")
    expect(refused.headers.get("www-authenticate")).toContain(`scope="read"`)
    expectProblem(await h.request("/me", { token: testOnly }), 403, "insufficient_scope")
  })

  it("shows the caller's own change at once: a claimed alias, a new density", async () => {
    const session = await h.signup({ plan: "pro" })
    const token = await h.createToken(session, ["read", "manage-aliases"])
    expect((await hotAnswer("/me", token)).body.activeAliasCount).toBe(0)
    await claimAlias(h, { token })
    expect((await h.request("/me", { token })).body).toMatchObject({ activeAliasCount: 1, aliasesLifetimeClaimed: 1 })
    await hotAnswer("/me", token)
    const density = await h.request("/mailbox/density", { method: "PUT", session, body: { density: "compact" } })
    expect(density.status, density.text).toBe(200)
    expect((await h.request("/me", { token })).body.mailboxDensity).toBe("compact")
  })

  it("learns of changes made by another connection from their notification, with the clock standing still", async () => {
    const session = await h.signup({ plan: "pro" })
    const token = await h.createToken(session, ["read"])
    await hotAnswer("/storage", token)
    const other = new pg.Client({ connectionString: h.databaseUrl })
    await other.connect()
    try {
      await other.query("UPDATE accounts SET storage_used_bytes = 4096 WHERE id = $1", [session.accountId])
      await eventually(async () => (await h.request("/storage", { token })).body.usedBytes === 4096, "the storage change")
      await other.query("UPDATE aliases SET status = status WHERE account_id = $1", [session.accountId])
      await other.query("UPDATE plans SET entitlements = entitlements || '{\"maxPinned\": 123}' WHERE code = 'pro'")
      await eventually(async () => (await h.request("/me", { token })).body.plan.maxPinned === 123, "the plan change")
    } finally {
      await other.query("UPDATE plans SET entitlements = entitlements || '{\"maxPinned\": 100}' WHERE code = 'pro'")
      await other.end()
    }
  })

  it("counts mail accepted over SMTP in the storage it reports", async () => {
    const session = await h.signup({ plan: "pro" })
    const token = await h.createToken(session, ["read", "manage-aliases", "test"])
    const alias = await claimAlias(h, { token })
    expect((await hotAnswer("/storage", token)).body.usedBytes).toBe(0)
    const accepted = await SmtpClient.sendOne(h.smtpPort, alias.address, Buffer.from("From: sender@example.com\r\nSubject: hi\r\n\r\nhello\r\n"))
    expect(accepted.code, accepted.text).toBe(250)
    await eventually(async () => (await h.request("/storage", { token })).body.usedBytes > 0, "the accepted message")
    const id = await injectMail(h, { token }, alias.id)
    expect(id).toBeGreaterThan(0)
    await h.worker.foldCounts()
    const [row] = await h.query<{ used: number }>("SELECT storage_used_bytes::float8 AS used FROM accounts WHERE id = $1", [session.accountId])
    expect((await h.request("/storage", { token })).body.usedBytes).toBe(row!.used)
  })
})
