/**
 * What a lost wake-up costs (issue #36 item 4): the pipeline hears of new mail through
 * PipelineWakeups, after the accepting commit; a wake-up that never comes (the process died
 * between the commit and its NOTIFY, or the LISTEN connection was down) costs at most the
 * claimers' poll, PollEvery, on the clock.
 */
import { buildTestMessage } from "@burnbox/domain/mail/index"
import { BlobStore, Entitlements, MailQueue, Mailstore, PipelineHandoff, PipelineWakeups, PollEvery, SearchIndex } from "@burnbox/store"
import { freshDatabase, processOn, seedAlias } from "@burnbox/testkit"
import { DnsResolver, MailWorkers, PipelineLive } from "@burnbox/worker"
import { Effect, Layer, Queue } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { describe, expect, it } from "vitest"

/** Wake-ups that are all lost: accepts tell no one, and no claimer is ever woken. */
const Deaf = Layer.succeed(PipelineWakeups, PipelineWakeups.of({ queued: Effect.void, wakeups: Queue.unbounded<void>() }))

/** One process on a fresh database: its pipeline and store, with every wake-up lost, and `handoff`. */
const deafPipeline = (handoff: Layer.Layer<PipelineHandoff, never, SqlClient.SqlClient>) =>
  Layer.unwrap(Effect.map(freshDatabase, (url) => {
    const store = Layer.mergeAll(MailQueue.layerNoDeps, Mailstore.layerNoDeps).pipe(
      Layer.provide([BlobStore.layer, SearchIndex.layer, Entitlements.layer, Deaf])
    )
    return Layer.mergeAll(
      PipelineLive.pipe(Layer.provide(MailWorkers.layerWith({})), Layer.provide(DnsResolver.fixed({}))),
      store
    ).pipe(Layer.provideMerge(store), Layer.provideMerge(handoff), Layer.provideMerge(processOn(url)))
  }))

/** Real time, while the test clock stands still. */
const realSleep = (ms: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, ms)))

describe("the pipeline's poll", () => {
  it("processes mail whose wake-up was lost once PollEvery passes on the clock, and not before", async () => {
    const program = Effect.gen(function*() {
      // Nothing is handed from the accepting commit (PipelineHandoff): the mail waits for a claim.
      const context = yield* Layer.build(deafPipeline(PipelineHandoff.none))
      return yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const mailstore = yield* Mailstore
        const { accountId, address, aliasId } = yield* seedAlias("poll.otter.1")
        // The claimers found nothing at their start and wait for a wake-up or the poll.
        yield* realSleep(1_000)
        const raw = buildTestMessage({ from: "shop@example.com", subject: "lost wake-up", text: "Your code is 482913" }, { to: address, date: new Date(0) })
        const [accepted] = yield* mailstore.accept({ deliveries: [{ aliasId, accountId, recipient: address }], raw, source: "test", envelopeFrom: null, clientAddress: null, clientHelo: null })
        const statusOf = sql<{ status: string }>`SELECT processing_status AS status FROM messages WHERE id = ${accepted!.id}`.pipe(
          Effect.map((rows) => rows[0]?.status)
        )
        // No wake-up: the mail waits, however long real time runs, while the clock stands.
        yield* realSleep(1_500)
        const before = yield* statusOf
        yield* TestClock.adjust(PollEvery)
        let after = yield* statusOf
        for (let i = 0; i < 100 && after !== "processed"; i++) {
          yield* realSleep(100)
          after = yield* statusOf
        }
        return { before, after }
      }).pipe(Effect.provide(context))
    })
    const { after, before } = await Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(TestClock.layer())))
    expect(before).toBe("stub")
    expect(after).toBe("processed")
  }, 60_000)

  it("needs neither for mail its own process accepts while caught up: the accepting commit hands it over (PipelineHandoff)", async () => {
    const program = Effect.gen(function*() {
      const context = yield* Layer.build(deafPipeline(PipelineHandoff.layer))
      return yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const mailstore = yield* Mailstore
        const { accountId, address, aliasId } = yield* seedAlias("poll.otter.2")
        yield* realSleep(1_000)
        const accept = (subject: string) =>
          mailstore.accept({
            deliveries: [{ aliasId, accountId, recipient: address }],
            raw: buildTestMessage({ from: "shop@example.com", subject, text: "Your code is 482913" }, { to: address, date: new Date(0) }),
            source: "test",
            envelopeFrom: null,
            clientAddress: null,
            clientHelo: null
          })
        // The account's first accept reads its plan message by message and leaves its row for a claim.
        const [first] = yield* accept("first")
        const [second] = yield* accept("handed")
        const statusOf = (id: number) => sql<{ status: string }>`SELECT processing_status AS status FROM messages WHERE id = ${id}`.pipe(
          Effect.map((rows) => rows[0]?.status)
        )
        let handed = yield* statusOf(second!.id)
        for (let i = 0; i < 100 && handed !== "processed"; i++) {
          yield* realSleep(100)
          handed = yield* statusOf(second!.id)
        }
        return { first: yield* statusOf(first!.id), handed }
      }).pipe(Effect.provide(context))
    })
    // No wake-up and the clock standing: the claimers never run after their first, empty claim.
    const { first, handed } = await Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(TestClock.layer())))
    expect(first).toBe("stub")
    expect(handed).toBe("processed")
  }, 60_000)
})
