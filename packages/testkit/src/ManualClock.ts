import { Clock, Duration, Effect } from "effect"

/**
 * An injected clock: `now` is whatever the test says, and moves only when the test moves
 * it. Sleeping still uses real time, so servers and pools keep working; nothing in the
 * code under test sleeps to measure time, it reads the clock.
 */
export interface ManualClock extends Clock.Clock {
  readonly set: (at: Date | number) => void
  readonly advance: (duration: Duration.Input) => void
  readonly now: () => Date
}

export const makeManualClock = (start: Date | number = Date.parse("2026-11-21T12:00:00.000Z")): ManualClock => {
  let millis = typeof start === "number" ? start : start.getTime()
  return {
    currentTimeMillisUnsafe: () => millis,
    currentTimeMillis: Effect.sync(() => millis),
    currentTimeNanosUnsafe: () => BigInt(millis) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(millis) * 1_000_000n),
    monotonicTimeNanosUnsafe: () => process.hrtime.bigint(),
    monotonicTimeNanos: Effect.sync(() => process.hrtime.bigint()),
    sleep: (duration) =>
      Effect.callback<void>((resume) => {
        const timer = setTimeout(() => resume(Effect.void), Duration.toMillis(duration))
        return Effect.sync(() => clearTimeout(timer))
      }),
    set: (at) => {
      millis = typeof at === "number" ? at : at.getTime()
    },
    advance: (duration) => {
      millis += Duration.toMillis(duration)
    },
    now: () => new Date(millis)
  }
}
