import { Clock, Effect } from "effect"

/** The current time from Effect's Clock, so tests drive it with TestClock. */
export const now: Effect.Effect<Date> = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))
