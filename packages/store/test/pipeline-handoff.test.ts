/**
 * PipelineHandoff (issue #36 item 4): the accepting commit writes the rows its process's
 * pipeline has places for already claimed (`processing`, the process's claim name, one attempt)
 * and hands them over in memory with what a claim would answer; rows without a place are left
 * `stub` for a claim, and a process that dies with handed mail has it taken over like a claim.
 */
import { assert, describe, it } from "@effect/vitest"
import { buildTestMessage } from "@burnbox/domain/mail/index"
import { type ClaimedMessage, MailQueue, Mailstore, PipelineHandoff } from "@burnbox/store"
import { freshDatabase, processOn, seedAlias } from "@burnbox/testkit"
import { Effect, Exit, Layer, type Redacted, Scope } from "effect"
import { SqlClient } from "effect/sql"

/** One process on `url`: its pool, Mailstore, MailQueue and PipelineHandoff (one instance, shared). */
const aProcess = (url: Redacted.Redacted<string>) =>
  Layer.build(Layer.mergeAll(Mailstore.layer, MailQueue.layer, PipelineHandoff.layer).pipe(Layer.provideMerge(processOn(url))))

/** A pipeline that has `places` places in all and keeps what it is handed. */
const fakePipeline = (places: number) => {
  const taken: Array<ClaimedMessage> = []
  const asked: Array<number> = []
  let free = places
  return {
    taken,
    asked,
    taker: {
      reserve: (n: number) => {
        asked.push(n)
        const k = Math.min(n, free)
        free -= k
        return k
      },
      release: (n: number) => {
        free += n
      },
      take: (messages: ReadonlyArray<ClaimedMessage>) => {
        taken.push(...messages)
      }
    }
  }
}

const rowsOf = (ids: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ id: number; status: string; attempts: number; worker: string | null; name: string }>`
      SELECT id, processing_status AS status, processing_attempts AS attempts, processing_worker AS worker,
             current_setting('application_name') AS name
      FROM messages WHERE id IN ${sql.in(ids)} ORDER BY id`
  })

describe("PipelineHandoff", () => {
  it.live("an accept hands its rows, written claimed, to its process's pipeline while it has places; the rest wait for a claim", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const ingest = yield* aProcess(url)
      const pipeline = fakePipeline(1)
      const result = yield* Effect.gen(function*() {
        const handoff = yield* PipelineHandoff
        yield* handoff.attach(pipeline.taker)
        const mailstore = yield* Mailstore
        const one = yield* seedAlias("handoff.otter.1")
        const two = yield* seedAlias("handoff.otter.2")
        const deliveries = [
          { aliasId: one.aliasId, accountId: one.accountId, recipient: `${one.address}` },
          { aliasId: two.aliasId, accountId: two.accountId, recipient: `${two.address}` }
        ]
        const raw = buildTestMessage({ from: "shop@example.com", subject: "handed", text: "code 482913" }, { to: one.address, date: new Date() })
        const envelope = { source: "smtp" as const, envelopeFrom: "shop@example.com", clientAddress: "192.0.2.7", clientHelo: "mx.example.com" }
        // The first accept of an account reads its plan message by message: nothing is handed.
        const first = yield* mailstore.accept({ deliveries, raw, ...envelope })
        // Then one message to two aliases: two rows, one place.
        const second = yield* mailstore.accept({ deliveries, raw, ...envelope })
        // The 250 goes out first; the hand-over follows in the same turn of the batch's fiber.
        for (let i = 0; i < 50 && pipeline.taken.length === 0; i++) yield* Effect.sleep("10 millis")
        return { first, second, raw, one, rows: yield* rowsOf([...first, ...second].map((m) => m.id)) }
      }).pipe(Effect.provide(ingest))

      const { first, one, raw, rows, second } = result
      assert.deepStrictEqual(rows.filter((r) => first.some((m) => m.id === r.id)).map((r) => r.status), ["stub", "stub"])
      const handed = pipeline.taken
      assert.strictEqual(handed.length, 1)
      const claimed = handed[0]!
      assert.strictEqual(claimed.id, second[0]!.id)
      // Written as a claim by this process would write it.
      const row = rows.find((r) => r.id === claimed.id)!
      assert.deepStrictEqual({ status: row.status, attempts: row.attempts, worker: row.worker }, { status: "processing", attempts: 1, worker: row.name })
      assert.strictEqual(rows.find((r) => r.id === second[1]!.id)!.status, "stub")
      // With what the claim answers: the alias, the envelope and the bytes as received.
      assert.deepStrictEqual(
        { alias: claimed.alias, attempts: claimed.attempts, source: claimed.source, from: claimed.envelopeFrom, ip: claimed.clientAddress, helo: claimed.clientHelo },
        { alias: { id: one.aliasId, address: one.address, label: null }, attempts: 1, source: "smtp", from: "shop@example.com", ip: "192.0.2.7", helo: "mx.example.com" }
      )
      assert.strictEqual(claimed.sizeBytes, raw.byteLength)
      assert.deepStrictEqual(Buffer.from(claimed.raw!), Buffer.from(raw))
      // It asked for both rows of the second accept, and got the one place it had.
      assert.deepStrictEqual(pipeline.asked.at(-1), 2)
    }).pipe(Effect.scoped))

  it.live("mail handed to a process that dies is taken over by a living process, like its claims", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const dying = yield* Scope.make()
      const ingest = yield* aProcess(url).pipe(Scope.provide(dying))
      const worker = yield* aProcess(url)
      const pipeline = fakePipeline(64)
      const id = yield* Effect.gen(function*() {
        yield* (yield* PipelineHandoff).attach(pipeline.taker).pipe(Scope.provide(dying))
        const mailstore = yield* Mailstore
        const { accountId, address, aliasId } = yield* seedAlias("handoff.otter.3")
        const raw = buildTestMessage({ from: "shop@example.com", subject: "dies", text: "code 123456" }, { to: address, date: new Date() })
        const input = { deliveries: [{ aliasId, accountId, recipient: address }], raw, source: "test" as const, envelopeFrom: null, clientAddress: null, clientHelo: null }
        yield* mailstore.accept(input)
        const [accepted] = yield* mailstore.accept(input)
        // The 250 goes out first; the hand-over follows in the same turn of the batch's fiber.
        for (let i = 0; i < 50 && pipeline.taken.length === 0; i++) yield* Effect.sleep("10 millis")
        return accepted!.id
      }).pipe(Effect.provide(ingest))
      assert.deepStrictEqual({ asked: pipeline.asked, taken: pipeline.taken.map((m) => m.id) }, { asked: [1], taken: [id] })
      // The process ends (its connections close) before its pipeline stored the message.
      yield* Scope.close(dying, Exit.void)
      const taken = yield* Effect.gen(function*() {
        const queue = yield* MailQueue
        let n = 0
        for (let i = 0; i < 50 && n === 0; i++) {
          n = yield* queue.takeOver
          if (n === 0) yield* Effect.sleep("100 millis")
        }
        const [row] = yield* rowsOf([id])
        return { n, status: row?.status }
      }).pipe(Effect.provide(worker))
      assert.deepStrictEqual(taken, { n: 1, status: "stub" })
    }).pipe(Effect.scoped))
})
