/**
 * holdUntil, the loop of every wait for mail, on TestClock: it reads once, reads again only when
 * woken, answers as soon as a read is an answer, at the deadline reads once more (a lost wake-up
 * costs time, not mail), and on release answers the last read.
 */
import { holdUntil } from "@burnbox/store"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Queue } from "effect"
import { TestClock } from "effect/testing"

const setup = Effect.gen(function*() {
  const wakes = yield* Queue.unbounded<number>()
  const released = yield* Deferred.make<void>()
  let reads = 0
  let mail = 0
  const read = Effect.sync(() => {
    reads++
    return mail
  })
  return {
    wakes,
    released,
    reads: () => reads,
    arrive: () => Effect.andThen(Effect.sync(() => mail++), Queue.offer(wakes, 1)),
    arriveUnannounced: () => Effect.sync(() => mail++),
    hold: holdUntil({ read, answered: (n) => n > 0, wakes, within: "30 seconds", released: Deferred.await(released) })
  }
})

describe("holdUntil", () => {
  it.effect("answers the empty read when the time runs out, having read at the start and once more at the deadline", () =>
    Effect.gen(function*() {
      const s = yield* setup
      const fiber = yield* Effect.forkChild(s.hold)
      yield* TestClock.adjust("29 seconds")
      assert.isUndefined(fiber.pollUnsafe())
      assert.strictEqual(s.reads(), 1)
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* Fiber.join(fiber), 0)
      assert.strictEqual(s.reads(), 2)
    }))

  it.effect("finds at the deadline mail whose wake-up never came", () =>
    Effect.gen(function*() {
      const s = yield* setup
      const fiber = yield* Effect.forkChild(s.hold)
      yield* Effect.yieldNow
      // Mail arrives, but its event is lost: no wake-up.
      yield* s.arriveUnannounced()
      yield* TestClock.adjust("30 seconds")
      assert.strictEqual(yield* Fiber.join(fiber), 1)
    }))

  it.effect("reads again when woken and answers the read that found mail; wake-ups that came together are one read", () =>
    Effect.gen(function*() {
      const s = yield* setup
      const fiber = yield* Effect.forkChild(s.hold)
      yield* Effect.yieldNow
      yield* Queue.offerAll(s.wakes, [1, 2, 3])
      yield* s.arrive()
      assert.strictEqual(yield* Fiber.join(fiber), 1)
      assert.strictEqual(s.reads(), 2)
    }))

  it.effect("release answers at once with the last read", () =>
    Effect.gen(function*() {
      const s = yield* setup
      const fiber = yield* Effect.forkChild(s.hold)
      yield* Effect.yieldNow
      yield* Deferred.succeed(s.released, undefined)
      assert.strictEqual(yield* Fiber.join(fiber), 0)
    }))
})
