/**
 * PipelineWakeups (issue #36 item 4): an accept's commit wakes this process's claimers in memory
 * and every other process's through one NOTIFY sent after the commit, outside the accepting
 * transaction; a process is not woken twice by its own NOTIFY.
 */
import { assert, describe, it } from "@effect/vitest"
import { buildTestMessage } from "@burnbox/domain/mail/index"
import { Mailstore, PipelineWakeups } from "@burnbox/store"
import { freshDatabase, processOn, seedAlias } from "@burnbox/testkit"
import { Effect, Layer, Queue, type Redacted } from "effect"
import { SqlClient } from "effect/sql"

/** One process on `url`: its pool, its Mailstore and its PipelineWakeups (one instance, shared). */
const aProcess = (url: Redacted.Redacted<string>) =>
  Layer.build(Layer.mergeAll(Mailstore.layer, PipelineWakeups.layer).pipe(Layer.provideMerge(processOn(url))))

describe("PipelineWakeups", () => {
  it.live("an accept wakes its own process's claimers once and another process's through LISTEN", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const ingest = yield* aProcess(url)
      const worker = yield* aProcess(url)
      const wakeupsIn = (process: typeof ingest) => Effect.gen(function*() {
        return yield* (yield* PipelineWakeups).wakeups
      }).pipe(Effect.provide(process))
      const own = yield* wakeupsIn(ingest)
      const other = yield* wakeupsIn(worker)

      const id = yield* Effect.gen(function*() {
        const { accountId, address, aliasId } = yield* seedAlias("wake.otter.1")
        const raw = buildTestMessage({ from: "shop@example.com", subject: "wake", text: "code 123456" }, { to: address, date: new Date() })
        const mailstore = yield* Mailstore
        const [accepted] = yield* mailstore.accept({ deliveries: [{ aliasId, accountId, recipient: address }], raw, source: "test", envelopeFrom: null, clientAddress: null, clientHelo: null })
        return accepted!.id
      }).pipe(Effect.provide(ingest))
      // The other process hears it through PostgreSQL, and by then the message is committed.
      yield* Queue.take(other).pipe(Effect.timeout("10 seconds"))
      const [row] = yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return yield* sql<{ status: string }>`SELECT processing_status AS status FROM messages WHERE id = ${id}`
      }).pipe(Effect.provide(worker))
      assert.strictEqual(row?.status, "stub")
      // The accepting process was woken once, in memory: its own NOTIFY, heard by the other
      // process already, did not wake it a second time.
      yield* Effect.sleep("300 millis")
      assert.strictEqual(yield* Queue.size(own), 1)
      assert.strictEqual(yield* Queue.size(other), 0)
    }).pipe(Effect.scoped))
})
