import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { now } from "./Time.ts"

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

const windowStart = (at: Date, seconds: number) => new Date(Math.floor(at.getTime() / (seconds * 1000)) * seconds * 1000)

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
 * Fixed-window counters in PostgreSQL, so every process of a deployment shares them.
 * `hit` counts a request in each window and says whether all windows still allow it;
 * `peek` reads without counting (login throttling counts only failures).
 */
export class RateLimiter extends Context.Service<RateLimiter, {
  readonly hit: (key: string, windows: ReadonlyArray<Window>) => Effect.Effect<Decision>
  readonly peek: (key: string, windows: ReadonlyArray<Window>) => Effect.Effect<Decision>
  readonly sweep: Effect.Effect<number>
}>()("burnbox/RateLimiter") {
  static readonly layer = Layer.effect(RateLimiter, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const run = (key: string, windows: ReadonlyArray<Window>, count: boolean) =>
      Effect.gen(function*() {
        const at = yield* now
        const keys = windows.map((w) => `${key}:${w.seconds}`)
        const starts = windows.map((w) => windowStart(at, w.seconds))
        const items = JSON.stringify(keys.map((k, i) => ({ k, s: starts[i]!.toISOString() })))
        const rows = count
          ? yield* sql<{ key: string; count: number }>`
              INSERT INTO rate_windows (key, window_start, count)
              SELECT k, s, 1 FROM jsonb_to_recordset(${items}::jsonb) AS x(k text, s timestamptz)
              ON CONFLICT (key, window_start) DO UPDATE SET count = rate_windows.count + 1
              RETURNING key, count`.pipe(Effect.orDie)
          : yield* sql<{ key: string; count: number }>`
              SELECT key, count FROM rate_windows
              WHERE (key, window_start) IN (SELECT k, s FROM jsonb_to_recordset(${items}::jsonb) AS x(k text, s timestamptz))`
              .pipe(Effect.orDie)
        const counts = new Map(rows.map((r) => [r.key, r.count]))
        return decide(windows.map((w, i) => ({
          limit: w.limit,
          seconds: w.seconds,
          // A peek reports the count the next request would have.
          count: (counts.get(keys[i]!) ?? 0) + (count ? 0 : 1),
          resetIn: Math.ceil((starts[i]!.getTime() + w.seconds * 1000 - at.getTime()) / 1000)
        })))
      })

    return RateLimiter.of({
      hit: (key, windows) => run(key, windows, true),
      peek: (key, windows) => run(key, windows, false),
      sweep: Effect.gen(function*() {
        const at = yield* now
        const rows = yield* sql`DELETE FROM rate_windows WHERE window_start < ${new Date(at.getTime() - 2 * 86_400_000)} RETURNING 1`
          .pipe(Effect.orDie)
        return rows.length
      })
    })
  }))
}
