import { expectProblem, type Harness, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
beforeAll(async () => {
  h = await startHarness()
})
afterAll(() => h.close())

const limited = async (overrides: Record<string, number>) => {
  const session = await h.signup({ plan: "pro" })
  await h.query("UPDATE accounts SET overrides = $1 WHERE id = $2", [JSON.stringify(overrides), session.accountId])
  return { session, token: await h.createToken(session, ["read"]) }
}

const rateHeaders = (headers: Headers) => ({
  limit: headers.get("ratelimit-limit"),
  remaining: headers.get("ratelimit-remaining"),
  reset: headers.get("ratelimit-reset"),
  policy: headers.get("ratelimit-policy"),
  xLimit: headers.get("x-ratelimit-limit"),
  xRemaining: headers.get("x-ratelimit-remaining"),
  xReset: headers.get("x-ratelimit-reset")
})

describe("per-token request limits", () => {
  it("counts down the minute window on every answer and refuses the next with 429 and Retry-After", async () => {
    h.clock.set(Date.parse("2026-11-21T12:00:10.000Z"))
    const { token } = await limited({ requestsPerMinute: 3 })
    const seen = []
    for (let i = 0; i < 3; i++) {
      const answer = await h.request("/me", { token })
      expect(answer.status).toBe(200)
      seen.push(rateHeaders(answer.headers))
    }
    expect(seen.map((s) => s.remaining)).toEqual(["2", "1", "0"])
    expect(seen[0]).toMatchObject({ limit: "3", reset: "50", policy: "3;w=60", xLimit: "3", xRemaining: "2" })
    expect(Number(seen[0]!.xReset)).toBe(Date.parse("2026-11-21T12:01:00.000Z") / 1000)

    const refused = await h.request("/me", { token })
    expectProblem(refused, 429, "rate_limited")
    expect(refused.headers.get("retry-after")).toBe("50")
    expect(rateHeaders(refused.headers)).toMatchObject({ limit: "3", remaining: "0", policy: "3;w=60" })

    h.clock.advance("50 seconds")
    const again = await h.request("/me", { token })
    expect(again.status).toBe(200)
    expect(again.headers.get("ratelimit-remaining")).toBe("2")
  })

  it("holds the day window across minutes and reports the day policy when it binds", async () => {
    h.clock.set(Date.parse("2026-11-22T23:58:00.000Z"))
    const { token } = await limited({ requestsPerMinute: 100, requestsPerDay: 4 })
    for (let i = 0; i < 2; i++) expect((await h.request("/me", { token })).status).toBe(200)
    h.clock.advance("1 minute")
    for (let i = 0; i < 2; i++) expect((await h.request("/me", { token })).status).toBe(200)
    const refused = await h.request("/me", { token })
    expectProblem(refused, 429, "rate_limited")
    expect(refused.headers.get("ratelimit-policy")).toBe("4;w=86400")
    expect(refused.headers.get("retry-after")).toBe("60")
    h.clock.advance("1 minute")
    expect((await h.request("/me", { token })).status).toBe(200)
  })

  it("puts the headers on every bearer answer, refusals included (missing scope, Session-only)", async () => {
    const { session, token } = await limited({})
    const all = await h.createToken(session, ["read", "webhooks"])
    const answers = [
      await h.request("/me", { token }),
      await h.request("/tokens", { token }),
      await h.request("/tags/99999", { method: "DELETE", token: all }),
      await h.request("/tags/abc", { method: "PATCH", token: all, body: {} })
    ]
    expect(answers.map((a) => a.status)).toEqual([200, 403, 403, 403])
    for (const answer of answers) {
      const headers = rateHeaders(answer.headers)
      expect(Object.values(headers).every((v) => v !== null && /^\d+(;w=\d+)?$/.test(v))).toBe(true)
    }
  })

  it("takes large limits from the shared counter in blocks, and reports exact remaining counts", async () => {
    h.clock.set(Date.parse("2026-11-24T09:00:00.000Z"))
    const { token } = await limited({ requestsPerMinute: 500 })
    let last: Headers | undefined
    for (let i = 0; i < 12; i++) last = (await h.request("/me", { token })).headers
    expect(last!.get("ratelimit-remaining")).toBe("488")
    const rows = await h.query("SELECT key, count FROM rate_windows WHERE key LIKE 'token:%:60' AND window_start = $1", [new Date("2026-11-24T09:00:00.000Z")])
    // Blocks of 1% of the limit: three blocks of 5 cover twelve requests.
    expect(rows.map((r) => r.count)).toEqual([15])
  })

  it("keeps each token's windows apart", async () => {
    const { session, token } = await limited({ requestsPerMinute: 1 })
    const second = await h.createToken(session, ["read"])
    expect((await h.request("/me", { token })).status).toBe(200)
    expect((await h.request("/me", { token })).status).toBe(429)
    expect((await h.request("/me", { token: second })).status).toBe(200)
  })

  it("holds across two API processes on one database", async () => {
    h.clock.set(Date.parse("2026-11-23T08:00:00.000Z"))
    const { token } = await limited({ requestsPerMinute: 4 })
    const other = await startHarness({}, h)
    try {
      const statuses = []
      for (let i = 0; i < 3; i++) {
        statuses.push((await h.request("/me", { token })).status, (await other.request("/me", { token })).status)
      }
      expect(statuses).toEqual([200, 200, 200, 200, 429, 429])
    } finally {
      await other.close()
    }
  })

  it("an operator override raises the limit within the token cache time", async () => {
    const { session, token } = await limited({ requestsPerMinute: 1 })
    expect((await h.request("/me", { token })).status).toBe(200)
    expect((await h.request("/me", { token })).status).toBe(429)
    const result = await h.cli(["admin", "account", "override", "--email", session.email, "--set", "requestsPerMinute=1000"])
    expect(result.code).toBe(0)
    // Another process changed the limits: they apply once the server's token cache lapses.
    h.clock.advance("3 seconds")
    expect((await h.request("/me", { token })).status).toBe(200)
  })
})

describe("unauthenticated bearer requests", () => {
  it("are limited per client address", async () => {
    // Concurrent requests share one block renewal at a time, so none is counted twice.
    const answers = await Promise.all(Array.from({ length: 20 }, () => h.request("/me", { token: "bbx_pat_unknown" })))
    const remaining = answers.map((a) => Number(a.headers.get("ratelimit-remaining"))).sort((a, b) => b - a)
    expect(remaining).toEqual(Array.from({ length: 20 }, (_, i) => remaining[0]! - i))
  })
})

