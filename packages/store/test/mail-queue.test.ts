/**
 * MailQueue, Realtime and JobQueue against the embedded PostgreSQL, without the HTTP server: the
 * pipeline's claims, its batched store and what it publishes, across processes.
 */
import { randomBytes } from "node:crypto"
import { zstdDecompressSync } from "node:zlib"
import { assert, describe, it, layer } from "@effect/vitest"
import { analyzeMessage, buildTestMessage, parseMessage, workedMail } from "@burnbox/domain/mail/index"
import {
  ClaimTimeoutMs,
  EventsMissed,
  type Heard,
  type HeardUpdate,
  JobQueue,
  MailQueue,
  Mailstore,
  notifyChanges,
  PendingLimit,
  type ProcessedMessage,
  Realtime,
  withClient
} from "@burnbox/store"
import { freshDatabase, processOn, seedAlias, TestDatabase } from "@burnbox/testkit"
import { Clock, Deferred, Effect, Layer, Logger, Queue, type Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"

const accept = (aliasId: number, accountId: number, address: string, subject: string) =>
  Effect.gen(function*() {
    const mailstore = yield* Mailstore
    const raw = buildTestMessage(
      { from: "Shop <shop@example.com>", subject, text: `Your code is 482913. ${subject}` },
      { to: address, date: new Date(yield* Clock.currentTimeMillis) }
    )
    const [accepted] = yield* mailstore.accept({ deliveries: [{ aliasId, accountId, recipient: address }], raw, source: "test", envelopeFrom: null, clientAddress: null, clientHelo: null })
    return accepted!.id
  }).pipe(Effect.orDie)

const processed = (claimed: ProcessedMessage["message"]) =>
  Effect.gen(function*() {
    const queue = yield* MailQueue
    const raw = claimed.raw ?? (yield* queue.readRaw(claimed.id))
    const result = yield* Effect.promise(() => parseMessage(raw!))
    if (!result.ok) return yield* Effect.die(result.reason)
    return { message: claimed, mail: workedMail(result.message, analyzeMessage(result.message)), auth: { spf: null, dkim: null, dmarc: null }, events: [] }
  })

const Queues = Layer.mergeAll(MailQueue.layer, Mailstore.layer, Realtime.layer).pipe(Layer.provideMerge(TestDatabase))

layer(Queues)("MailQueue", (it) => {
  it.effect("claims an accepted message once, with its alias and raw bytes; a second claim finds nothing", () =>
    Effect.gen(function*() {
      const queue = yield* MailQueue
      const { accountId, address, aliasId } = yield* seedAlias("amber.otter.1")
      const id = yield* accept(aliasId, accountId, address, "first")
      const claimed = yield* queue.claim
      assert.deepStrictEqual(claimed.map((m) => m.id), [id])
      assert.strictEqual(claimed[0]!.attempts, 1)
      assert.deepStrictEqual(claimed[0]!.alias, { id: aliasId, address, label: null })
      assert.isTrue(claimed[0]!.hasRaw)
      assert.include(Buffer.from(claimed[0]!.raw!).toString("utf8"), "Subject: first")
      assert.deepStrictEqual(yield* queue.claim, [])
      yield* queue.fail(id, "test_cleanup")
    }))

  it.effect("a big message's bytes come as stored: compressed with the claim when small enough, else read as stored; inflated they are the bytes accepted", () =>
    Effect.gen(function*() {
      const queue = yield* MailQueue
      const mailstore = yield* Mailstore
      const { accountId, address, aliasId } = yield* seedAlias("amber.otter.big")
      const acceptRaw = (raw: Uint8Array) =>
        mailstore.accept({ deliveries: [{ aliasId, accountId, recipient: address }], raw, source: "test", envelopeFrom: null, clientAddress: null, clientHelo: null }).pipe(
          Effect.map(([accepted]) => accepted!.id),
          Effect.orDie
        )
      const head = `From: a@example.com\r\nTo: ${address}\r\nSubject: big\r\n\r\n`
      // 2 MB of text compresses to a few KB: it comes with the claim, compressed.
      const text = Buffer.from(head + "a line of plain text in a big message\r\n".repeat(50_000))
      // 2 MB of random bytes (as base64) does not: read as stored.
      const noise = Buffer.from(head + randomBytes(1_500_000).toString("base64").replace(/.{76}/g, "$&\r\n") + "\r\n")
      const textId = yield* acceptRaw(text)
      const noiseId = yield* acceptRaw(noise)
      const claimed = yield* queue.claim
      const byId = new Map(claimed.map((m) => [m.id, m]))
      const small = byId.get(textId)!
      assert.isNull(small.raw)
      assert.isTrue(Buffer.from(zstdDecompressSync(small.rawZstd!)).equals(text))
      const large = byId.get(noiseId)!
      assert.isNull(large.raw)
      assert.isNull(large.rawZstd)
      const stored = (yield* queue.readStoredRaw(noiseId))!
      assert.isTrue(stored.zstd)
      assert.strictEqual(stored.size, noise.byteLength)
      assert.isTrue(Buffer.from(zstdDecompressSync(stored.bytes)).equals(noise))
      yield* queue.fail(textId, "test_cleanup")
      yield* queue.fail(noiseId, "test_cleanup")
    }))

  it.effect("a claim older than the claim timeout is taken again, counting the attempt", () =>
    Effect.gen(function*() {
      const queue = yield* MailQueue
      const { accountId, address, aliasId } = yield* seedAlias("amber.otter.2")
      const id = yield* accept(aliasId, accountId, address, "stuck")
      assert.deepStrictEqual((yield* queue.claim).map((m) => m.id), [id])
      yield* TestClock.adjust(ClaimTimeoutMs - 1)
      assert.deepStrictEqual(yield* queue.claim, [])
      yield* TestClock.adjust(2)
      const again = yield* queue.claim
      assert.deepStrictEqual(again.map((m) => [m.id, m.attempts]), [[id, 2]])
      yield* queue.fail(id, "test_cleanup")
    }))

  it.effect("store writes the results and the search words, and publishes processed to the account's subscribers only", () =>
    Effect.gen(function*() {
      const queue = yield* MailQueue
      const realtime = yield* Realtime
      const sql = yield* SqlClient.SqlClient
      const mine = yield* seedAlias("amber.otter.3")
      const other = yield* seedAlias("amber.otter.4")
      const events = yield* realtime.subscribe(mine.accountId)
      const otherEvents = yield* realtime.subscribe(other.accountId)
      const id = yield* accept(mine.aliasId, mine.accountId, mine.address, "verify zebra")
      const [claimed] = yield* queue.claim
      yield* queue.store([yield* processed(claimed!)])
      const [row] = yield* sql<{ processing_status: string; subject: string; otp_codes: Array<string> }>`
        SELECT processing_status, subject, otp_codes FROM messages WHERE id = ${id}`
      assert.deepStrictEqual(row, { processing_status: "processed", subject: "verify zebra", otp_codes: ["482913"] })
      const [indexed] = yield* sql<{ n: number }>`
        SELECT count(*)::int AS n FROM message_search WHERE id = ${id} AND account_id = ${mine.accountId}`
      assert.strictEqual(indexed!.n, 1)
      assert.deepStrictEqual(yield* Queue.take(events), { accountId: mine.accountId, aliasId: mine.aliasId, messageId: id, status: "processed" })
      assert.strictEqual(yield* Queue.size(otherEvents), 0)
    }).pipe(Effect.scoped))

  it.effect("store leaves a message another process took over meanwhile; fail keeps the raw bytes and publishes failed", () =>
    Effect.gen(function*() {
      const queue = yield* MailQueue
      const realtime = yield* Realtime
      const sql = yield* SqlClient.SqlClient
      const { accountId, address, aliasId } = yield* seedAlias("amber.otter.5")
      const events = yield* realtime.subscribe(accountId)
      const id = yield* accept(aliasId, accountId, address, "taken over")
      const [claimed] = yield* queue.claim
      const result = yield* processed(claimed!)
      // Meanwhile the message went back to the queue (a takeover).
      yield* sql`UPDATE messages SET processing_status = 'stub' WHERE id = ${id}`
      yield* queue.store([result])
      const [before] = yield* sql<{ processing_status: string }>`SELECT processing_status FROM messages WHERE id = ${id}`
      assert.strictEqual(before!.processing_status, "stub")
      yield* queue.fail(id, "unparsable: test")
      const [after] = yield* sql<{ processing_status: string; failure_reason: string; raw: number }>`
        SELECT m.processing_status, m.failure_reason, (SELECT count(*)::int FROM message_raw r WHERE r.message_id = m.id) AS raw
        FROM messages m WHERE m.id = ${id}`
      assert.deepStrictEqual(after, { processing_status: "failed", failure_reason: "unparsable: test", raw: 1 })
      assert.deepStrictEqual(yield* Queue.take(events), { accountId, aliasId, messageId: id, status: "failed" })
    }).pipe(Effect.scoped))

  it.effect("takeOver gives back the claims of a process that has no connection left", () =>
    Effect.gen(function*() {
      const queue = yield* MailQueue
      const sql = yield* SqlClient.SqlClient
      const { accountId, address, aliasId } = yield* seedAlias("amber.otter.6")
      const id = yield* accept(aliasId, accountId, address, "orphan")
      yield* queue.claim
      assert.strictEqual(yield* queue.takeOver, 0)
      yield* sql`UPDATE messages SET processing_worker = 'burnbox/0/gone' WHERE id = ${id}`
      assert.strictEqual(yield* queue.takeOver, 1)
      assert.deepStrictEqual((yield* queue.claim).map((m) => [m.id, m.attempts]), [[id, 2]])
      yield* queue.fail(id, "test_cleanup")
    }))
})

layer(Queues)("Realtime's hub subscriptions", (it) => {
  it.effect("one that is not taken holds at most PendingLimit updates: past that they give way to one EventsMissed, then the newer ones", () =>
    Effect.gen(function*() {
      const realtime = yield* Realtime
      const sql = yield* SqlClient.SqlClient
      const accountId = 990_001
      const slow = yield* realtime.updates([accountId], () => true)
      const watcher = yield* realtime.updates([accountId], () => true)
      const extra = 3
      const count = PendingLimit + 1 + extra
      // One commit: every update arrives in one delivery step, before any subscriber could take one.
      yield* notifyChanges(sql, Array.from({ length: count }, (_, i) => ({ accountId, type: "message.changed" as const, messageIds: [i + 1] })))
      const lastOf = (heard: ReadonlyArray<HeardUpdate>) =>
        heard.some((update) => "messageIds" in update && update.messageIds?.[0] === count)
      while (!lastOf(yield* Queue.takeAll(watcher))) {}
      // The update past the limit was dropped with all those held before it, for one EventsMissed.
      assert.strictEqual(yield* Queue.size(slow), 1 + extra)
      const held = yield* Queue.takeAll(slow)
      assert.deepStrictEqual(held[0], EventsMissed)
      assert.deepStrictEqual(held.slice(1).map((update) => "messageIds" in update ? update.messageIds : undefined), [[count - 2], [count - 1], [count]])
    }).pipe(Effect.scoped))
})

/** A process of its own (a pool and a Realtime layer) on the database, for the scope. */
const aProcess = (url: Redacted.Redacted<string>) => Layer.build(Realtime.layer.pipe(Layer.provideMerge(processOn(url))))

/** A subscription to an account's events in a process of its own. */
const subscribedIn = (url: Redacted.Redacted<string>, accountId: number) =>
  Effect.flatMap(aProcess(url), (process) =>
    Effect.gen(function*() {
      const realtime = yield* Realtime
      return yield* realtime.subscribe(accountId)
    }).pipe(Effect.provide(process)))

describe("Realtime across processes", () => {
  it.live("an event published by one process reaches a subscriber in another, and no one else's", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const events = yield* subscribedIn(url, 7)
      const publisherProcess = yield* aProcess(url)
      yield* Effect.gen(function*() {
        const realtime = yield* Realtime
        yield* realtime.publish({ accountId: 8, aliasId: 1, messageId: 1, status: "processed" })
        yield* realtime.publish({ accountId: 7, aliasId: 2, messageId: 2, status: "failed" })
      }).pipe(Effect.provide(publisherProcess))
      assert.deepStrictEqual(yield* Queue.take(events).pipe(Effect.timeout("10 seconds")), { accountId: 7, aliasId: 2, messageId: 2, status: "failed" })
    }).pipe(Effect.scoped))

  it.live("a burst committed at once reaches the subscriber whole and in order", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const events = yield* subscribedIn(url, 7)
      const publisherProcess = yield* aProcess(url)
      yield* Effect.gen(function*() {
        const realtime = yield* Realtime
        const sql = yield* SqlClient.SqlClient
        yield* sql.withTransaction(Effect.forEach(Array.from({ length: 200 }, (_, i) => i + 1), (messageId) =>
          realtime.publish({ accountId: 7, aliasId: 1, messageId, status: "processed" })))
      }).pipe(Effect.provide(publisherProcess))
      const heard: Array<number> = []
      while (heard.length < 200) heard.push(...(yield* Queue.takeAll(events).pipe(Effect.timeout("10 seconds"))).map((e) => "messageId" in e ? e.messageId : -1))
      assert.deepStrictEqual(heard, Array.from({ length: 200 }, (_, i) => i + 1))
    }).pipe(Effect.scoped))

  it.live("when its LISTEN connection is cut, a process listens again, tells its subscribers it may have missed events, and hears what follows", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const events = yield* subscribedIn(url, 7)
      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        // This test's own database: other test files listen on the same cluster.
        const listeners = sql<{ pid: number }>`
          SELECT pid FROM pg_stat_activity
          WHERE datname = current_database() AND query LIKE 'LISTEN%burnbox_realtime%' AND pid <> pg_backend_pid()`
        const found = yield* listeners
        assert.strictEqual(found.length, 1)
        const cut = found[0]!
        yield* sql`SELECT pg_terminate_backend(${cut.pid})`
        // Published until an event is heard: the process listens again about a second after the cut.
        const heard: Array<Heard> = []
        for (let n = 1; !heard.some((h) => h !== EventsMissed); n++) {
          assert.isBelow(n, 100, "no event heard 20 s after the cut")
          yield* sql`SELECT pg_notify('burnbox_realtime', ${JSON.stringify({ accountId: 7, aliasId: 1, messageId: n, status: "processed" })})`
          const more = yield* Queue.takeAll(events).pipe(Effect.timeoutOption("200 millis"))
          if (more._tag === "Some") heard.push(...more.value)
        }
        // Missed once, before anything the new connection hears.
        assert.strictEqual(heard[0], EventsMissed)
        assert.strictEqual(heard.filter((h) => h === EventsMissed).length, 1)
        const [again] = yield* listeners
        assert.isDefined(again)
        assert.notStrictEqual(again!.pid, cut.pid)
      }).pipe(Effect.provide(processOn(url)))
    }).pipe(Effect.scoped))
})

const withClientRows = (url: Redacted.Redacted<string>) =>
  Effect.runPromise(withClient(url, async (client) =>
    (await client.query<{ rollbacks: number }>("SELECT xact_rollback::int AS rollbacks FROM pg_stat_database WHERE datname = current_database()")).rows))

describe("JobQueue", () => {
  it.live("runs a job sent to a queue in the process that works it", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const jobs = yield* Layer.build(JobQueue.layer.pipe(Layer.provideMerge(processOn(url))))
      const ran = yield* Deferred.make<string>()
      yield* Effect.gen(function*() {
        const queue = yield* JobQueue
        yield* queue.work("test-queue", Deferred.succeed(ran, "ran"))
        yield* queue.send("test-queue")
      }).pipe(Effect.provide(jobs))
      assert.strictEqual(yield* Deferred.await(ran).pipe(Effect.timeout("30 seconds")), "ran")
    }).pipe(Effect.scoped))

  it.live("four workers starting together on a fresh database: pg-boss's schema is made once, no error, all work", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const logged: Array<string> = []
      const capture = Logger.layer([Logger.make(({ message }) => logged.push(String(message)))])
      yield* Effect.gen(function*() {
        const workers = yield* Effect.all(
          Array.from({ length: 4 }, () => Layer.build(JobQueue.layer.pipe(Layer.provideMerge(processOn(url)), Layer.provide(capture)))),
          { concurrency: "unbounded" }
        )
        const ran = yield* Deferred.make<string>()
        for (const [i, jobs] of workers.entries()) {
          yield* JobQueue.use((queue) => queue.work(`race-${i}`, Deferred.succeed(ran, `worker ${i}`))).pipe(Effect.provide(jobs))
        }
        yield* JobQueue.use((queue) => queue.send("race-3")).pipe(Effect.provide(workers[0]!))
        assert.strictEqual(yield* Deferred.await(ran).pipe(Effect.timeout("30 seconds")), "worker 3")
      }).pipe(Effect.scoped)
      assert.deepStrictEqual(logged.filter((line) => line.includes("pg-boss")), [])
      // A schema statement that lost a race fails and rolls its transaction back (PostgreSQL logs
      // `type "job_state" already exists`): none did. The workers' sessions have ended, so their
      // counts are in the statistics.
      yield* Effect.sleep("1500 millis")
      const [stats] = yield* Effect.promise(() => withClientRows(url))
      assert.strictEqual(stats?.rollbacks, 0)
    }))
})
