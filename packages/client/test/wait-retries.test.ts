/**
 * How a wait outlasts transient problems, on TestClock with a client whose every request meets no
 * answer: tries at 0, 250, 750, 1,750, 3,750 and 7,750 ms (the pause doubling from 250 ms, at most
 * 4 s), and no try whose pause would end past the deadline. (Against the real service, with 429,
 * 503 and a dropped request, in promise-client.test.ts.)
 */
import { BurnboxClient } from "@burnbox/client"
import { Clock, Effect, Exit, Fiber, Layer } from "effect"
import { HttpClient, HttpClientError } from "effect/http"
import { TestClock } from "effect/testing"
import { describe, expect, it } from "vitest"

describe("a wait's retries", () => {
  it("back off from 250 ms, doubling up to 4 s, until the deadline, and end with the problem itself", async () => {
    const tries: Array<number> = []
    const unreachable = HttpClient.make((request) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        tries.push(now)
        return Effect.fail(new HttpClientError.HttpClientError({ reason: new HttpClientError.TransportError({ request, description: "connection refused" }) }))
      })
    )
    const client = BurnboxClient.layerNoDeps({ baseUrl: "http://burnbox.test", token: "bbx_test" }).pipe(
      Layer.provide(Layer.succeed(HttpClient.HttpClient, unreachable))
    )
    const exit = await Effect.runPromise(Effect.gen(function*() {
      const fiber = yield* Effect.forkChild(Effect.gen(function*() {
        const burnbox = yield* BurnboxClient
        return yield* burnbox.messages.wait({ alias: 5, timeout: 10 })
      }))
      // 20 s of the test clock, 50 ms at a time: the wait (10 s) has ended by then.
      for (let step = 0; step < 400 && fiber.pollUnsafe() === undefined; step++) yield* TestClock.adjust(50)
      const ended = fiber.pollUnsafe()
      if (ended === undefined) yield* Fiber.interrupt(fiber)
      expect(ended).toBeDefined()
      return ended!
    }).pipe(Effect.provide(Layer.merge(client, TestClock.layer()))))
    expect(Exit.isFailure(exit)).toBe(true)
    expect(JSON.stringify(exit)).toContain("network_error")
    expect(tries.map((t) => t - tries[0]!)).toEqual([0, 250, 750, 1_750, 3_750, 7_750])
  })
})
