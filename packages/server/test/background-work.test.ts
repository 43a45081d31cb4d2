/**
 * Background work of the request caches (a busy token's request-limit block taken ahead of
 * need) runs on fibers of its layer's scope: closing the scope, as a shutdown does, stops it.
 */
import { randomBytes } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { RateLimiter, withClient, withDatabase } from "@burnbox/store"
import { clusterUrl, makeManualClock } from "@burnbox/testkit"
import { Clock, Context, Effect, Exit, Layer, Redacted, Scope } from "effect"
import { SqlClient } from "effect/sql"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let url: Redacted.Redacted<string>
let database: Scope.Closeable
let sql: Context.Context<PgClient.PgClient | SqlClient.SqlClient>
const clock = makeManualClock(Date.parse("2026-11-22T09:00:05.000Z"))

beforeAll(async () => {
  const cluster = Redacted.make(clusterUrl())
  const name = `t_${randomBytes(6).toString("hex")}`
  await Effect.runPromise(withClient(cluster, (client) => client.query(`CREATE DATABASE ${name} TEMPLATE burnbox_template`)))
  url = withDatabase(cluster, name)
  database = Scope.makeUnsafe()
  sql = await Effect.runPromise(Layer.buildWithScope(PgClient.layer({ url, maxConnections: 2 }), database))
})
afterAll(() => Effect.runPromise(Scope.close(database, Exit.void)))

/** A RateLimiter in a scope of its own, on a database connection that outlives it. */
const startLimiter = async () => {
  const scope = Scope.makeUnsafe()
  const context = await Effect.runPromise(Layer.buildWithScope(RateLimiter.layer, scope).pipe(
    Effect.provideContext(sql),
    Effect.provideService(Clock.Clock, clock)
  ))
  return { limiter: Context.get(context, RateLimiter), close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

const shared = async (key: string) => {
  const client = new pg.Client({ connectionString: Redacted.value(url) })
  await client.connect()
  try {
    const { rows } = await client.query<{ count: number }>("SELECT count FROM rate_windows WHERE key = $1", [`${key}:60`])
    return rows[0]?.count
  } finally {
    await client.end()
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const windows = [{ limit: 10_000, seconds: 60 }]

/** Counts `requests` requests of a fresh key: the first takes a block of 100 (1% of 10,000 a minute), the rest use it. */
const use = async (limiter: RateLimiter["Service"], key: string, requests: number) => {
  await Effect.runPromise(limiter.hit(key, windows).pipe(Effect.provideService(Clock.Clock, clock)))
  expect(await shared(key)).toBe(100)
  for (let i = 1; i < requests; i++) expect(limiter.tryHit(key, windows, clock.now().getTime())?.allowed).toBe(true)
}

describe("the request limiter's background work", () => {
  it("takes a busy token's next block ahead of need while its layer is open", async () => {
    const { limiter, close } = await startLimiter()
    try {
      // With a quarter of the block left, the next is taken without a request waiting.
      await use(limiter, "open", 80)
      const deadline = Date.now() + 10_000
      while ((await shared("open")) !== 200 && Date.now() < deadline) await sleep(20)
      expect(await shared("open")).toBe(200)
    } finally {
      await close()
    }
  })

  it("starts nothing once its layer's scope is closed (shutdown)", async () => {
    const { limiter, close } = await startLimiter()
    try {
      await use(limiter, "closed", 70)
    } finally {
      await close()
    }
    // Requests still in flight at shutdown use what is left of the block, and take nothing ahead.
    for (let i = 0; i < 10; i++) expect(limiter.tryHit("closed", windows, clock.now().getTime())?.allowed).toBe(true)
    await sleep(300)
    expect(await shared("closed")).toBe(100)
  })
})
