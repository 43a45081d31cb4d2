/**
 * Background work of the worker role. So far: sweeping expired rate-limit windows every
 * hour. The mail pipeline, timers and webhook delivery join here as they are built.
 */
import { RateLimiter } from "@burnbox/store"
import { Effect, Layer, Schedule } from "effect"

export const sweepRateWindows = Effect.gen(function*() {
  const limiter = yield* RateLimiter
  const removed = yield* limiter.sweep
  if (removed > 0) yield* Effect.logDebug(`swept ${removed} expired rate-limit windows`)
})

export const WorkerLive = Layer.effectDiscard(
  sweepRateWindows.pipe(Effect.repeat(Schedule.spaced("1 hour")), Effect.forkScoped)
).pipe(Layer.provide(RateLimiter.layer))
