/**
 * The pipeline's rules step (store/src/rules/RuleWalk.ts) without the HTTP server: a retried
 * pipeline job applies a rule's marks, tags and unread count once, whichever claim stores first
 * and however often a store is repeated; the unread count stays exact without the step writing
 * (or waiting for) the aliases row ingest updates, and its corrections are deltas of the mail
 * counters, folded with ingest's in one fold; a batch's own pins never pass maxPinned.
 */
import { assert, layer } from "@effect/vitest"
import { analyzeMessage, buildTestMessage, parseMessage, workedMail } from "@burnbox/domain/mail/index"
import { aliasCountsOf, aliasReceivedCountOf, aliasStorageUsedOf, aliasUnreadCountOf, ClaimTimeoutMs, Entitlements, foldMailCounts, MailQueue, Mailstore, type ProcessedMessage, Rules } from "@burnbox/store"
import { seedAlias, TestDatabase } from "@burnbox/testkit"
import { Clock, Deferred, Effect, Fiber, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"

const accept = (aliasId: number, accountId: number, address: string, subject: string) =>
  Effect.gen(function*() {
    const mailstore = yield* Mailstore
    const raw = buildTestMessage({ from: "Shop <shop@example.com>", subject, text: "Your code is 482913." }, {
      to: address,
      date: new Date(yield* Clock.currentTimeMillis)
    })
    const [accepted] = yield* mailstore.accept({ deliveries: [{ aliasId, accountId, recipient: address }], raw, source: "test", envelopeFrom: null, clientAddress: null, clientHelo: null })
    return accepted!.id
  }).pipe(Effect.orDie)

const worked = (claimed: ProcessedMessage["message"]) =>
  Effect.gen(function*() {
    const result = yield* Effect.promise(() => parseMessage(claimed.raw!))
    if (!result.ok) return yield* Effect.die(result.reason)
    return { message: claimed, mail: workedMail(result.message, analyzeMessage(result.message)), auth: { spf: null, dkim: null, dmarc: null }, events: [] }
  })

/** The alias's unread count as the API reads it, its aliases row's own column, and a plain count of the owner's unread mail outside the trash. */
const unreadCounts = (aliasId: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ counted: number; row: number; plain: number }>`
      SELECT ${aliasUnreadCountOf(sql, "al")} AS counted, al.unread_count AS row,
             (SELECT count(*)::int FROM messages m WHERE m.alias_id = al.id AND m.trashed_at IS NULL
                AND NOT EXISTS (SELECT 1 FROM message_states s WHERE s.message_id = m.id AND s.account_id = m.account_id AND s.is_read)) AS plain
      FROM aliases al WHERE al.id = ${aliasId}`
    return row!
  })

/**
 * The alias's counters as read (its row with its deltas), its rows alone (aliases and
 * alias_counts), and a recount of its stored mail: each [unread, received, bytes, in_mailbox, trashed].
 */
const aliasCounters = (aliasId: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ read: ReadonlyArray<number>; rows: ReadonlyArray<number>; recount: ReadonlyArray<number> }>`
      SELECT ARRAY[${aliasUnreadCountOf(sql, "al")}, ${aliasReceivedCountOf(sql, "al")}, ${aliasStorageUsedOf(sql, "al")},
                   ${aliasCountsOf(sql, [aliasId], "in_mailbox")}, ${aliasCountsOf(sql, [aliasId], "trashed")}]::float8[] AS read,
             ARRAY[al.unread_count, al.received_count, al.storage_used_bytes, c.in_mailbox, c.trashed]::float8[] AS rows,
             (SELECT ARRAY[count(*) FILTER (WHERE m.trashed_at IS NULL AND NOT EXISTS (
                             SELECT 1 FROM message_states s WHERE s.message_id = m.id AND s.account_id = m.account_id AND s.is_read)),
                           count(*), coalesce(sum(m.size_bytes), 0), count(*) FILTER (WHERE m.trashed_at IS NULL),
                           count(*) FILTER (WHERE m.trashed_at IS NOT NULL)]::float8[]
              FROM messages m WHERE m.alias_id = al.id) AS recount
      FROM aliases al JOIN alias_counts c ON c.alias_id = al.id WHERE al.id = ${aliasId}`
    return row!
  })

/**
 * Holds the alias's row (FOR NO KEY UPDATE, as a writer of its counters does) in a transaction of
 * its own until the answered effect releases it.
 */
const holdAliasRow = (aliasId: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const locked = yield* Deferred.make<void>()
    const release = yield* Deferred.make<void>()
    const holder = yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`SELECT id FROM aliases WHERE id = ${aliasId} FOR NO KEY UPDATE`
      yield* Deferred.succeed(locked, undefined)
      yield* Deferred.await(release)
    })).pipe(Effect.forkChild)
    yield* Deferred.await(locked)
    return Deferred.succeed(release, undefined).pipe(Effect.andThen(Fiber.join(holder)))
  })

/** The alias's deltas not folded yet. */
const deltasLeft = (aliasId: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [left] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM mail_count_deltas WHERE alias_id = ${aliasId}`
    return left!.n
  })

/** Claims every queued message at once and stores them as one batch of the pipeline. */
const storeOneBatch = (size: number) =>
  Effect.gen(function*() {
    const queue = yield* MailQueue
    const claimed = yield* queue.claimUpTo(size)
    assert.strictEqual(claimed.length, size)
    return yield* Effect.forEach(claimed, worked)
  })

const Store = Layer.mergeAll(MailQueue.layer, Mailstore.layer, Rules.layer.pipe(Layer.provide(Entitlements.layer))).pipe(Layer.provideMerge(TestDatabase))

layer(Store)("the rules step", (it) => {
  it.effect("a retried job (its claim timed out and taken again) sets the rule's marks, tags and unread count once", () =>
    Effect.gen(function*() {
      const queue = yield* MailQueue
      const rules = yield* Rules
      const sql = yield* SqlClient.SqlClient
      const { accountId, address, aliasId } = yield* seedAlias("ruled.otter.1")
      const [tag] = yield* sql<{ id: number }>`
        INSERT INTO tags (account_id, name, name_key) VALUES (${accountId}, 'shop', 'shop') RETURNING id`
      yield* rules.create(accountId, {
        name: "shop",
        match: { from: "shop@example.com", hasOtp: true },
        actions: [{ type: "tag", tagId: tag!.id }, { type: "mark_read" }, { type: "star" }]
      })
      const id = yield* accept(aliasId, accountId, address, "your code")
      const unreadBefore = (yield* unreadCounts(aliasId)).counted

      const [first] = yield* queue.claim
      yield* TestClock.adjust(ClaimTimeoutMs + 1)
      const [retry] = yield* queue.claim
      assert.deepStrictEqual([first!.id, retry!.id, retry!.attempts], [id, id, 2])
      const retried = yield* worked(retry!)
      yield* queue.store([retried])
      // The first claim's worker finishes late, and a store is repeated: neither changes anything.
      yield* queue.store([yield* worked(first!)])
      yield* queue.store([retried])

      const tags = yield* sql`SELECT account_id, tag_id FROM message_tags WHERE message_id = ${id}`
      assert.deepStrictEqual(tags, [{ account_id: accountId, tag_id: tag!.id }])
      const states = yield* sql`SELECT account_id, is_read, starred, pinned, archived FROM message_states WHERE message_id = ${id}`
      assert.deepStrictEqual(states, [{ account_id: accountId, is_read: true, starred: true, pinned: false, archived: false }])
      const counts = yield* unreadCounts(aliasId)
      assert.deepStrictEqual([counts.counted, counts.plain], [unreadBefore - 1, unreadBefore - 1])
    }))

  it.effect("the unread count stays exact through the rules step and the fold, and the step never waits for the aliases row ingest holds", () =>
    Effect.gen(function*() {
      const queue = yield* MailQueue
      const rules = yield* Rules
      const sql = yield* SqlClient.SqlClient
      const { accountId, address, aliasId } = yield* seedAlias("ruled.otter.2")
      yield* rules.create(accountId, { name: "read receipts", match: { subject: "receipt" }, actions: [{ type: "mark_read" }, { type: "star" }] })
      for (const subject of ["receipt 1", "hello", "receipt 2", "receipt 3", "hello again"]) yield* accept(aliasId, accountId, address, subject)
      yield* foldMailCounts(sql) // the accepted mail's unread count onto the row (and the earlier tests' corrections)
      const batch = yield* storeOneBatch(5)

      // Ingest's transaction holds the alias row (as its counters' UPDATE does) while the batch is stored.
      const release = yield* holdAliasRow(aliasId)
      // Waiting here for the row would hang the test until ingest let go, which it does only after.
      yield* queue.store(batch)
      const whileHeld = yield* unreadCounts(aliasId)
      yield* release
      // Exact at once; the correction is not on the row ingest counted the mail on.
      assert.deepStrictEqual(whileHeld, { counted: 2, row: 5, plain: 2 })

      // The correction is one delta row of the mail counters (Mailstore's own fold may take it first).
      yield* foldMailCounts(sql)
      assert.deepStrictEqual(yield* unreadCounts(aliasId), { counted: 2, row: 2, plain: 2 })
      assert.strictEqual(yield* deltasLeft(aliasId), 0)
    }), 60_000)

  it.effect("ingest's deltas and the rules step's corrections are one table: exact while both wait, and one fold leaves the rows equal to a recount", () =>
    Effect.gen(function*() {
      const queue = yield* MailQueue
      const rules = yield* Rules
      const sql = yield* SqlClient.SqlClient
      const { accountId, address, aliasId } = yield* seedAlias("ruled.otter.4")
      yield* rules.create(accountId, { name: "receipts", match: { subject: "receipt" }, actions: [{ type: "mark_read" }] })
      yield* rules.create(accountId, { name: "junk", match: { subject: "junk" }, actions: [{ type: "trash" }] })
      // The first message makes the owner's plan known to ingest, so the rest take the batched path (which locks no aliases row).
      yield* accept(aliasId, accountId, address, "receipt 1")
      yield* foldMailCounts(sql)

      // No fold can take this alias's deltas while its row is held (the fold skips a row it cannot lock).
      const release = yield* holdAliasRow(aliasId)
      for (const subject of ["hello", "receipt 2", "junk 1", "hello again", "junk 2"]) yield* accept(aliasId, accountId, address, subject)
      yield* queue.store(yield* storeOneBatch(6))

      const [kinds] = yield* sql<{ arrivals: number; corrections: number; unread: number }>`
        SELECT count(*) FILTER (WHERE in_mailbox + trashed > 0)::int AS arrivals,
               count(*) FILTER (WHERE unread < 0 AND in_mailbox + trashed = 0 AND bytes = 0 AND last_received_at IS NULL)::int AS corrections,
               sum(unread)::int AS unread
        FROM mail_count_deltas WHERE alias_id = ${aliasId}`
      // 5 arrivals counted unread, 4 of them read or trashed by a rule (with "receipt 1", folded before).
      assert.deepStrictEqual([kinds!.arrivals > 0, kinds!.corrections, kinds!.unread], [true, 1, 5 - 4])
      const waiting = yield* aliasCounters(aliasId)
      assert.deepStrictEqual(waiting.read, waiting.recount)
      assert.deepStrictEqual(waiting.recount.slice(0, 2), [2, 6])
      // The rows alone hold "receipt 1" as it arrived, unread.
      assert.deepStrictEqual(waiting.rows.slice(0, 2), [1, 1])

      yield* release
      yield* foldMailCounts(sql)
      const folded = yield* aliasCounters(aliasId)
      assert.deepStrictEqual([folded.read, folded.rows], [folded.recount, folded.recount])
      assert.deepStrictEqual(folded.recount.slice(3), [4, 2])
      assert.strictEqual(yield* deltasLeft(aliasId), 0)
    }), 60_000)

  it.effect("a rule pinning every message of a batch larger than the pins to spare pins exactly up to maxPinned, oldest first", () =>
    Effect.gen(function*() {
      const queue = yield* MailQueue
      const rules = yield* Rules
      const sql = yield* SqlClient.SqlClient
      const { accountId, address, aliasId } = yield* seedAlias("ruled.otter.3")
      yield* sql`UPDATE accounts SET overrides = '{"maxPinned": 3}' WHERE id = ${accountId}`
      // One pin already taken.
      const earlier = yield* accept(aliasId, accountId, address, "pinned by hand")
      yield* queue.store(yield* storeOneBatch(1))
      yield* sql`INSERT INTO message_states (message_id, account_id, pinned) VALUES (${earlier}, ${accountId}, true)`

      yield* rules.create(accountId, { name: "pin all", actions: [{ type: "pin" }, { type: "star" }] })
      const ids: Array<number> = []
      for (let i = 0; i < 5; i++) ids.push(yield* accept(aliasId, accountId, address, `mail ${i}`))
      yield* queue.store(yield* storeOneBatch(5))

      const states = yield* sql<{ message_id: number; pinned: boolean; starred: boolean }>`
        SELECT message_id, pinned, starred FROM message_states WHERE message_id IN ${sql.in(ids)} ORDER BY message_id`
      assert.deepStrictEqual(states.map((s) => [s.message_id, s.pinned, s.starred]), [
        [ids[0], true, true], [ids[1], true, true], [ids[2], false, true], [ids[3], false, true], [ids[4], false, true]
      ])
      const [pins] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM message_states WHERE account_id = ${accountId} AND pinned`
      assert.strictEqual(pins!.n, 3)
    }))
})
