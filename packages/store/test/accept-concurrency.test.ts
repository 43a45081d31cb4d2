/**
 * Storing mail locks no account (issue 36 item 2): batches of one account, from two lanes of a
 * process and from two processes, run at once; the quota leases keep the account within its quota
 * at every moment, every message is taken, the counters (row + deltas, MailCounts.ts) equal a
 * recount of what is stored before and after a fold, and no statement deadlocks.
 */
import { assert, layer } from "@effect/vitest"
import { accountStorageUsedOf, foldMailCounts, Mailstore } from "@burnbox/store"
import { seedAlias, TestDatabase } from "@burnbox/testkit"
import { Context, Effect, Fiber, Layer, Ref } from "effect"
import { SqlClient } from "effect/sql"

const Store = Mailstore.layer.pipe(Layer.provideMerge(TestDatabase))

/** A message of exactly `size` bytes to `address`. */
const mailOf = (address: string, size: number, n: number) => {
  const head = `From: load@example.com\r\nTo: ${address}\r\nSubject: load ${n}\r\n\r\n`
  return Buffer.from(head + "x".repeat(size - head.length))
}

/** The account's counters as the store reads them, and what its rows say when counted. */
const countersAndRecount = (accountId: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ kept: number; stored: number; messages: number; in_mailbox: number; aliases_bytes: number; aliases_received: number }>`
      SELECT ${accountStorageUsedOf(sql, "a")} AS kept,
             (SELECT coalesce(sum(size_bytes), 0)::float8 FROM messages WHERE account_id = a.id) AS stored,
             (SELECT count(*)::int FROM messages WHERE account_id = a.id) AS messages,
             (SELECT c.in_mailbox + coalesce((SELECT sum(d.in_mailbox) FROM mail_count_deltas d WHERE d.account_id = a.id), 0)
              FROM mailbox_counts c WHERE c.account_id = a.id)::int AS in_mailbox,
             (SELECT sum(al.storage_used_bytes + coalesce((SELECT sum(d.bytes) FROM mail_count_deltas d WHERE d.alias_id = al.id), 0))
              FROM aliases al WHERE al.account_id = a.id)::float8 AS aliases_bytes,
             (SELECT sum(al.received_count + coalesce((SELECT sum(d.in_mailbox + d.trashed) FROM mail_count_deltas d WHERE d.alias_id = al.id), 0))
              FROM aliases al WHERE al.account_id = a.id)::int AS aliases_received
      FROM accounts a WHERE a.id = ${accountId}`
    return row!
  })

layer(Store, { timeout: 120_000 })("accepting mail without locking the account", (it) => {
  it.effect("two processes' lanes storing to one account at once keep it within its quota at every moment, take every message, count exactly and never deadlock", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const first = yield* Mailstore
      // A second process: its own Mailstore, its own lanes and leases, on the same database.
      const second = Context.get(yield* Layer.build(Mailstore.layer), Mailstore)
      const owner = yield* seedAlias("load.one")
      const [other] = yield* sql<{ id: number }>`
        INSERT INTO aliases (account_id, domain_id, local_part, local_key, style, status, claimed_at)
        SELECT ${owner.accountId}, id, 'load.two', 'load.two', 'words', 'active', now() FROM domains WHERE name = 'burnbox.test' RETURNING id`
      const targets = [{ aliasId: owner.aliasId, address: owner.address }, { aliasId: other!.id, address: "load.two@burnbox.test" }]
      const size = 2_000
      const quota = 150 * size + 500
      yield* sql`UPDATE accounts SET overrides = overrides || ${JSON.stringify({ storageQuotaBytes: quota })}::jsonb WHERE id = ${owner.accountId}`
      const [deadlocksBefore] = yield* sql<{ n: number }>`SELECT deadlocks::int AS n FROM pg_stat_database WHERE datname = current_database()`

      // What is committed, read as fast as the database answers while the load runs.
      const most = yield* Ref.make(0)
      const sampler = yield* sql<{ stored: number }>`SELECT coalesce(sum(size_bytes), 0)::float8 AS stored FROM messages WHERE account_id = ${owner.accountId}`.pipe(
        Effect.flatMap(([row]) => Ref.update(most, (n) => Math.max(n, row!.stored))),
        Effect.forever,
        Effect.forkChild
      )
      // Messages all at once, spread over both processes and both aliases.
      const load = (from: number, count: number) =>
        Effect.forEach(Array.from({ length: count }, (_, i) => from + i), (n) => {
          const target = targets[n % 2]!
          const store = Math.floor(n / 2) % 2 === 0 ? first : second
          return store.accept({
            deliveries: [{ aliasId: target.aliasId, accountId: owner.accountId, recipient: target.address }],
            raw: mailOf(target.address, size, n),
            source: "smtp",
            envelopeFrom: "load@example.com",
            clientAddress: null,
            clientHelo: null
          })
        }, { concurrency: "unbounded" })
      // Far from the quota (60 of 150 messages' room): once a process knows the account's plan (its
      // first batch of the account is stored under the quota lock), batches are stored on leases.
      const early = [...yield* load(0, 4), ...yield* load(4, 56)]
      // A lane's lease row stays only while its last batch was stored on it (eviction drops it).
      const [leases] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM quota_leases WHERE account_id = ${owner.accountId}`
      assert.isAbove(leases!.n, 0, "batches stored on leases")
      // Then 340 more (2.7 quotas' worth in all): leases shrink, then eviction under the quota lock.
      const late = yield* load(60, 340)
      yield* Fiber.interrupt(sampler)

      assert.strictEqual([...early, ...late].flat().length, 400)
      assert.isAtMost(yield* Ref.get(most), quota, "the stored mail never passed the quota")
      const [deadlocksAfter] = yield* sql<{ n: number }>`SELECT deadlocks::int AS n FROM pg_stat_database WHERE datname = current_database()`
      assert.strictEqual(deadlocksAfter!.n - deadlocksBefore!.n, 0)

      const exact = (counts: Effect.Success<ReturnType<typeof countersAndRecount>>) => {
        assert.isAtMost(counts.stored, quota)
        assert.strictEqual(counts.kept, counts.stored)
        assert.strictEqual(counts.aliases_bytes, counts.stored)
        assert.strictEqual(counts.in_mailbox, counts.messages)
      }
      const before = yield* countersAndRecount(owner.accountId)
      exact(before)
      // Evicted mail leaves received counts alone: every message taken was received.
      assert.strictEqual(before.aliases_received, 400)
      yield* foldMailCounts(sql)
      const after = yield* countersAndRecount(owner.accountId)
      exact(after)
      assert.deepStrictEqual(after, before)
      const [left] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM mail_count_deltas WHERE account_id = ${owner.accountId}`
      assert.strictEqual(left!.n, 0)
    }))
})
