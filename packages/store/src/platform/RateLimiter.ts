import { Context, Effect, FiberMap, Layer, Schema, Semaphore } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { now } from "./Time.ts"
import { pgJson } from "./PgText.ts"

export interface Window {
  readonly limit: number
  readonly seconds: number
}

export interface WindowState {
  readonly limit: number
  readonly seconds: number
  readonly count: number
  /** Seconds until this window resets. */
  readonly resetIn: number
}

export interface Decision {
  readonly allowed: boolean
  /** The window that decides what the client sees: the first exhausted one, else the tightest. */
  readonly binding: WindowState
  readonly remaining: number
  /** Seconds to wait before a retry can succeed (0 when allowed). */
  readonly retryAfter: number
}

/**
 * The shared counter of one key in one window length, as PostgreSQL stores it: a key can hold
 * request text (a login's email), and a lone surrogate in it is U+FFFD there (the driver's UTF-8),
 * so it is here too. Otherwise the JSON a peek sends carries it as a `\ud800` escape, which
 * PostgreSQL refuses (a 500), and the counts it reads back are not found under the key it asked for.
 */
const windowId = (key: string, window: Window) => `${key}:${window.seconds}`.toWellFormed()

const windowStart = (at: number, seconds: number) => Math.floor(at / (seconds * 1000)) * seconds * 1000

/** Picks the window the client should see from the counted states. */
export const decide = (states: ReadonlyArray<WindowState>): Decision => {
  const exhausted = states.filter((s) => s.count > s.limit)
  if (exhausted.length > 0) {
    const binding = exhausted.reduce((a, b) => (b.resetIn > a.resetIn ? b : a))
    return { allowed: false, binding, remaining: 0, retryAfter: Math.max(1, binding.resetIn) }
  }
  const binding = states.reduce((a, b) => (b.limit - b.count < a.limit - a.count ? b : a))
  return { allowed: true, binding, remaining: Math.max(0, binding.limit - binding.count), retryAfter: 0 }
}

/**
 * How many requests one process takes from the shared counter at a time. Small limits are
 * counted one by one (exact across processes); large ones in blocks of up to 1% of the limit,
 * so a busy token costs one database write per block instead of one per request. A block a
 * process does not use before the window ends is lost, which can refuse at most that many
 * requests early elsewhere.
 */
export const leaseSize = (limit: number): number => Math.max(1, Math.min(256, Math.floor(limit / 100)))

interface Lease {
  start: number
  /** The limit this lease was counted against: a changed limit is re-checked with the database. */
  limit: number
  /** The shared count right after this process's last lease, capped at the limit. */
  shared: number
  /** Requests this process leased and has not used yet. */
  unused: number
  /** The shared count reached the limit: refuse locally until the window ends. */
  exhausted: boolean
  /** One renewal at a time: concurrent requests wait for it instead of each taking a block. */
  readonly renewal: Semaphore.Semaphore
}

/**
 * Leases of at least this many requests are renewed in the background once a quarter of the
 * block is left, so a busy token rarely waits for the database (and the hot read path, which
 * never waits, rarely has to hand a request to the full stack).
 */
const PrefetchFrom = 16

/**
 * Fixed-window counters in PostgreSQL, shared by every process of a deployment.
 * `hit` counts a request in each window and says whether all windows still allow it;
 * `peek` reads without counting (login throttling counts only failures).
 */
export class RateLimiter extends Context.Service<RateLimiter, {
  readonly hit: (key: string, windows: ReadonlyArray<Window>) => Effect.Effect<Decision>
  readonly peek: (key: string, windows: ReadonlyArray<Window>) => Effect.Effect<Decision>
  /**
   * `hit` at `at` (epoch ms) when every window still has requests left in this process's leases;
   * undefined, counting nothing, when one has none (a block to take from the database, or the
   * window used up): then `hit` counts the request, and refuses it.
   */
  readonly tryHit: (key: string, windows: ReadonlyArray<Window>, at: number) => Decision | undefined
  readonly sweep: Effect.Effect<number>
}>()("burnbox/RateLimiter") {
  static readonly layer = Layer.effect(RateLimiter, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const leases = new Map<string, Lease>()

    // Both statements are made once, with their decoders: a small limit takes from the shared
    // counter on every request.
    const counted = SqlSchema.findOne({
      Request: Schema.Struct({ key: Schema.String, start: Schema.Date, amount: Schema.Int }),
      Result: Schema.Struct({ count: Schema.Int }),
      execute: ({ amount, key, start }) =>
        sql`
        INSERT INTO rate_windows (key, window_start, count) VALUES (${key}, ${start}, ${amount})
        ON CONFLICT (key, window_start) DO UPDATE SET count = rate_windows.count + ${amount}
        RETURNING count`
    })
    const countsOf = SqlSchema.findAll({
      Request: Schema.Array(Schema.Struct({ k: Schema.String, s: Schema.String })),
      Result: Schema.Struct({ key: Schema.String, count: Schema.Int }),
      execute: (windows) =>
        sql`
          SELECT key, count FROM rate_windows
          WHERE (key, window_start) IN (SELECT k, s FROM jsonb_to_recordset(${pgJson(windows)}::jsonb) AS x(k text, s timestamptz))`
    })

    const take = (key: string, start: number, amount: number) =>
      counted({ key, start: new Date(start), amount }).pipe(Effect.orDie, Effect.map((row) => row.count))

    /** This process's lease on one window, reset when the window or its limit changes. */
    const leaseFor = (id: string, window: Window, start: number): Lease => {
      let lease = leases.get(id)
      if (lease === undefined || lease.start !== start) {
        lease = { start, limit: window.limit, shared: 0, unused: 0, exhausted: false, renewal: Semaphore.makeUnsafe(1) }
        leases.set(id, lease)
      }
      if (lease.limit !== window.limit) {
        lease.limit = window.limit
        lease.exhausted = false
      }
      return lease
    }

    const needsLease = (lease: Lease) => lease.unused === 0 && !lease.exhausted

    /** Counts one request against a lease that needs no database write. */
    const countLocal = (lease: Lease, window: Window, start: number, at: number): WindowState => {
      const resetIn = Math.ceil((start + window.seconds * 1000 - at) / 1000)
      if (lease.unused > 0) {
        lease.unused--
        return { limit: window.limit, seconds: window.seconds, count: lease.shared - lease.unused, resetIn }
      }
      return { limit: window.limit, seconds: window.seconds, count: window.limit + 1, resetIn }
    }

    /** Takes the next block of the shared count for this process, once `due` still holds when it is this caller's turn. */
    const renew = (id: string, lease: Lease, window: Window, due: (lease: Lease) => boolean) => {
      const amount = leaseSize(window.limit)
      return lease.renewal.withPermits(1)(Effect.suspend(() =>
        due(lease)
          ? Effect.map(take(id, lease.start, amount), (after) => {
            const granted = Math.max(0, Math.min(amount, window.limit - (after - amount)))
            lease.shared = Math.min(after, window.limit)
            lease.unused += granted
            lease.exhausted = granted === 0
          })
          : Effect.void
      ))
    }
    const runningLow = (lease: Lease) => !lease.exhausted && lease.unused <= leaseSize(lease.limit) / 4

    // Blocks taken ahead run on fibers of this layer's scope, at most one per window counter:
    // closing the layer (shutdown) interrupts them.
    const prefetches = yield* FiberMap.make<string>()
    const runPrefetch = yield* FiberMap.runtime(prefetches)()
    const prefetch = (id: string, lease: Lease, window: Window) => {
      if (leaseSize(window.limit) < PrefetchFrom || FiberMap.hasUnsafe(prefetches, id) || !runningLow(lease)) return
      runPrefetch(id, renew(id, lease, window, runningLow).pipe(
        Effect.catchCause((cause) => Effect.logWarning("request-limit lease not renewed ahead; the next request will", cause))
      ), { onlyIfMissing: true })
    }

    const countOne = Effect.fnUntraced(function*(key: string, window: Window, at: number) {
      const id = windowId(key, window)
      const start = windowStart(at, window.seconds)
      const lease = leaseFor(id, window, start)
      if (needsLease(lease)) yield* renew(id, lease, window, needsLease)
      return countLocal(lease, window, start, at)
    })

    const hit = (key: string, windows: ReadonlyArray<Window>) =>
      Effect.gen(function*() {
        const at = (yield* now).getTime()
        const states: Array<WindowState> = []
        for (const window of windows) states.push(yield* countOne(key, window, at))
        return decide(states)
      })

    const tryHit = (key: string, windows: ReadonlyArray<Window>, at: number): Decision | undefined => {
      const held = windows.map((window) => {
        const id = windowId(key, window)
        const start = windowStart(at, window.seconds)
        return { id, window, start, lease: leaseFor(id, window, start) }
      })
      // Nothing left in a block (to renew, or the window is used up): the caller goes the full
      // way, which counts this request itself, so nothing is counted here.
      if (held.some((h) => h.lease.unused === 0)) return undefined
      const decision = decide(held.map((h) => countLocal(h.lease, h.window, h.start, at)))
      for (const h of held) prefetch(h.id, h.lease, h.window)
      return decision
    }

    const peek = (key: string, windows: ReadonlyArray<Window>) =>
      Effect.gen(function*() {
        const at = (yield* now).getTime()
        const starts = windows.map((w) => windowStart(at, w.seconds))
        const rows = yield* countsOf(windows.map((w, i) => ({ k: windowId(key, w), s: new Date(starts[i]!).toISOString() })))
          .pipe(Effect.orDie)
        const counts = new Map(rows.map((r) => [r.key, r.count]))
        // A peek reports the count the next request would have.
        return decide(windows.map((w, i) => ({
          limit: w.limit,
          seconds: w.seconds,
          count: (counts.get(windowId(key, w)) ?? 0) + 1,
          resetIn: Math.ceil((starts[i]! + w.seconds * 1000 - at) / 1000)
        })))
      })

    return RateLimiter.of({
      hit,
      peek,
      tryHit,
      sweep: Effect.gen(function*() {
        const at = yield* now
        for (const [id, lease] of leases) if (lease.start < at.getTime() - 2 * 86_400_000) leases.delete(id)
        const rows = yield* sql`DELETE FROM rate_windows WHERE window_start < ${new Date(at.getTime() - 2 * 86_400_000)} RETURNING 1`
          .pipe(Effect.orDie)
        return rows.length
      })
    })
  }))
}
