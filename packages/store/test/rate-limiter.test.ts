/**
 * The rate limiter's shared counters against the embedded PostgreSQL, called directly: fixed
 * minute and day windows on the test clock, which window the client is shown, the leases a busy
 * process takes in blocks, and two processes counting against one counter.
 */
import { leaseSize, RateLimiter } from "@burnbox/store"
import { freshDatabase, processOn, TestDatabase } from "@burnbox/testkit"
import { assert, layer } from "@effect/vitest"
import { Clock, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"

const Minute = 60_000
const Day = 24 * 60 * Minute

/** Moves the test clock to the start of the next UTC day, where every window starts afresh. */
const startOfNextDay = Effect.gen(function*() {
  const at = yield* Clock.currentTimeMillis
  yield* TestClock.adjust(Math.floor(at / Day) * Day + Day - at)
})

let keys = 0
const newKey = () => `token:${++keys}`

const minute = (limit: number) => ({ limit, seconds: 60 })
const day = (limit: number) => ({ limit, seconds: 86_400 })

layer(RateLimiter.layer.pipe(Layer.provideMerge(TestDatabase)))("RateLimiter", (it) => {
  it.effect("a minute window allows its limit, then refuses until the next minute, showing the seconds left", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter
      const key = newKey()
      yield* startOfNextDay
      yield* TestClock.adjust(15_000)
      const first = yield* limiter.hit(key, [minute(3)])
      assert.deepStrictEqual(first, { allowed: true, binding: { limit: 3, seconds: 60, count: 1, resetIn: 45 }, remaining: 2, retryAfter: 0 })
      assert.strictEqual((yield* limiter.hit(key, [minute(3)])).remaining, 1)
      assert.strictEqual((yield* limiter.hit(key, [minute(3)])).remaining, 0)
      yield* TestClock.adjust(20_000)
      assert.deepStrictEqual(yield* limiter.hit(key, [minute(3)]), {
        allowed: false,
        binding: { limit: 3, seconds: 60, count: 4, resetIn: 25 },
        remaining: 0,
        retryAfter: 25
      })
      yield* TestClock.adjust(25_000)
      assert.deepStrictEqual(yield* limiter.hit(key, [minute(3)]), {
        allowed: true,
        binding: { limit: 3, seconds: 60, count: 1, resetIn: 60 },
        remaining: 2,
        retryAfter: 0
      })
    }))

  it.effect("with a minute and a day window, the exhausted one decides; the day's count goes on across minutes", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter
      const key = newKey()
      const windows = [minute(2), day(3)]
      yield* startOfNextDay
      assert.isTrue((yield* limiter.hit(key, windows)).allowed)
      const second = yield* limiter.hit(key, windows)
      assert.deepStrictEqual(second.binding, { limit: 2, seconds: 60, count: 2, resetIn: 60 })
      const third = yield* limiter.hit(key, windows)
      assert.deepInclude(third, { allowed: false, retryAfter: 60 })
      assert.deepStrictEqual(third.binding, { limit: 2, seconds: 60, count: 3, resetIn: 60 })
      yield* TestClock.adjust(Minute)
      // The refused request counted toward the day: this one is the fourth of three.
      const fourth = yield* limiter.hit(key, windows)
      assert.deepInclude(fourth, { allowed: false, retryAfter: 86_340 })
      assert.deepStrictEqual(fourth.binding, { limit: 3, seconds: 86_400, count: 4, resetIn: 86_340 })
      yield* TestClock.adjust(Day - Minute)
      assert.deepInclude(yield* limiter.hit(key, windows), { allowed: true, remaining: 1 })
    }))

  it.effect("peek reports what the next request would be told, and counts nothing", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter
      const key = newKey()
      const windows = [minute(5), day(100)]
      yield* startOfNextDay
      assert.deepInclude(yield* limiter.peek(key, windows), { allowed: true, remaining: 4 })
      yield* limiter.hit(key, windows)
      yield* limiter.hit(key, windows)
      assert.deepStrictEqual(yield* limiter.peek(key, windows), {
        allowed: true,
        binding: { limit: 5, seconds: 60, count: 3, resetIn: 60 },
        remaining: 2,
        retryAfter: 0
      })
      assert.deepInclude(yield* limiter.peek(key, windows), { remaining: 2 })
      yield* limiter.hit(key, windows)
      yield* limiter.hit(key, windows)
      yield* limiter.hit(key, windows)
      assert.deepInclude(yield* limiter.peek(key, windows), { allowed: false, retryAfter: 60 })
    }))

  it.effect("a large limit is taken from the shared counter in blocks; tryHit counts from the block without the database", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter
      const sql = yield* SqlClient.SqlClient
      const key = newKey()
      const windows = [minute(10_000)]
      yield* startOfNextDay
      const at = yield* Clock.currentTimeMillis
      // Nothing leased yet: the full way counts.
      assert.isUndefined(limiter.tryHit(key, windows, at))
      assert.deepInclude(yield* limiter.hit(key, windows), { allowed: true, remaining: 10_000 - 1 })
      for (let n = 2; n <= 50; n++) assert.deepInclude(limiter.tryHit(key, windows, at), { allowed: true, remaining: 10_000 - n })
      const [shared] = yield* sql<{ count: number }>`SELECT count FROM rate_windows WHERE key = ${`${key}:60`}`
      assert.strictEqual(shared!.count, leaseSize(10_000))
    }))

  it.effect("the sweep removes windows that started more than two days ago", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter
      const sql = yield* SqlClient.SqlClient
      const key = newKey()
      const windowsLeft = sql<{ n: number }>`SELECT count(*)::int AS n FROM rate_windows WHERE key LIKE ${`${key}:%`}`
      yield* startOfNextDay
      yield* limiter.hit(key, [minute(5), day(5)])
      yield* TestClock.adjust(2 * Day)
      yield* limiter.sweep
      assert.strictEqual((yield* windowsLeft)[0]!.n, 2)
      yield* TestClock.adjust(1)
      assert.isAtLeast(yield* limiter.sweep, 2)
      assert.strictEqual((yield* windowsLeft)[0]!.n, 0)
    }))
})

layer(Layer.empty)("RateLimiter across processes", (it) => {
  it.effect("two processes count against one shared counter: together they get the limit, no more", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const first = yield* Layer.build(RateLimiter.layer.pipe(Layer.provide(processOn(url))))
      const second = yield* Layer.build(RateLimiter.layer.pipe(Layer.provide(processOn(url))))
      const hit = (process: typeof first) =>
        Effect.gen(function*() {
          const limiter = yield* RateLimiter
          return yield* limiter.hit("shared", [minute(3)])
        }).pipe(Effect.provide(process))
      yield* startOfNextDay
      assert.deepInclude(yield* hit(first), { allowed: true, remaining: 2 })
      assert.deepInclude(yield* hit(second), { allowed: true, remaining: 1 })
      assert.deepInclude(yield* hit(first), { allowed: true, remaining: 0 })
      assert.deepInclude(yield* hit(second), { allowed: false, retryAfter: 60 })
      assert.deepInclude(yield* hit(first), { allowed: false, retryAfter: 60 })
      yield* TestClock.adjust(Minute)
      assert.deepInclude(yield* hit(second), { allowed: true, remaining: 2 })
    }).pipe(Effect.scoped))
})
