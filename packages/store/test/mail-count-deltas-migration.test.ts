/**
 * Migration 0034 (one delta table for the mail counters): on a database migrated up to 0033 that
 * holds ingest's deltas (0029) and the rules step's unread corrections not folded yet (0027), it
 * moves the corrections into `mail_count_deltas` and drops their table, and every counter reads
 * the same after it as before (MailCounts.ts, the one reader), and after the one fold.
 */
import { assert, layer } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import { aliasReceivedCountOf, aliasStorageUsedOf, aliasUnreadCountOf, foldMailCounts, loadMigrations, seed, withClient, withDatabase } from "@burnbox/store"
import { clusterUrl, processOn } from "@burnbox/testkit"
import { Context, Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"

const migrations = loadMigrations()
const runMigrations = (url: Redacted.Redacted<string>, which: (id: number) => boolean) =>
  withClient(url, async (client) => {
    for (const migration of migrations.filter((m) => which(m.id))) await client.query(migration.sql)
  })

/** The URL of the test's database. */
class MigrationUrl extends Context.Service<MigrationUrl, Redacted.Redacted<string>>()("test/MigrationUrl") {}

/** A new empty database, migrated up to 0033. */
const Before0034 = Layer.unwrap(Effect.gen(function*() {
  const cluster = Redacted.make(clusterUrl())
  const name = `m_${randomBytes(6).toString("hex")}`
  yield* withClient(cluster, (client) => client.query(`CREATE DATABASE ${name}`))
  const url = withDatabase(cluster, name)
  yield* runMigrations(url, (id) => id < 34)
  yield* seed(url, [{ name: "burnbox.test", tier: "public" }])
  return processOn(url).pipe(Layer.provideMerge(Layer.succeed(MigrationUrl, url)))
}))

layer(Before0034, { timeout: 120_000 })("migration 0034", (it) => {
  it.effect("moves the unread corrections into mail_count_deltas exactly, and every counter reads the same before and after, and after the fold", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const [domain] = yield* sql<{ id: number }>`SELECT id FROM domains WHERE name = 'burnbox.test'`
      const [account] = yield* sql<{ id: number }>`
        INSERT INTO accounts (email, email_key, password_hash, plan, created_at)
        VALUES ('owner@example.com', 'owner@example.com', 'not-a-hash', 'pro', now()) RETURNING id`
      const aliases = yield* sql<{ id: number }>`
        INSERT INTO aliases (account_id, domain_id, local_part, local_key, style, status, claimed_at, unread_count, received_count, storage_used_bytes, last_received_at)
        VALUES (${account!.id}, ${domain!.id}, 'one', 'one', 'words', 'active', now(), 3, 4, 400, '2026-01-01T00:00:00Z'),
               (${account!.id}, ${domain!.id}, 'two', 'two', 'words', 'active', now(), 0, 0, 0, NULL)
        RETURNING id`
      const [one, two] = [aliases[0]!.id, aliases[1]!.id]
      // The counts rows 0029's insert trigger makes for mail arriving.
      yield* sql`INSERT INTO mailbox_counts (account_id) VALUES (${account!.id})`
      yield* sql`INSERT INTO alias_counts (alias_id) VALUES (${one}), (${two})`
      yield* sql`
        INSERT INTO mail_count_deltas (account_id, alias_id, in_mailbox, trashed, bytes, last_received_at) VALUES
          (${account!.id}, ${one}, 2, 1, 300, '2026-01-02T00:00:00Z'),
          (${account!.id}, ${two}, 5, 0, 500, '2026-01-03T00:00:00Z')`
      // Two corrections of `one`, one of `two`, and one of an alias that is gone (0027's fold dropped those).
      yield* sql`INSERT INTO alias_unread_deltas (alias_id, delta) VALUES (${one}, -1), (${one}, -2), (${two}, -4), (${two + 1000}, -7)`

      /** Per alias: unread, received, bytes, last arrival; and the account's in_mailbox, trashed and bytes deltas. */
      const counters = (unread: (al: string) => ReturnType<typeof aliasUnreadCountOf>) =>
        sql<{ id: number; unread: number; received: number; bytes: number; last: Date | null }>`
          SELECT al.id, ${unread("al")} AS unread, ${aliasReceivedCountOf(sql, "al")} AS received, ${aliasStorageUsedOf(sql, "al")} AS bytes,
                 greatest(al.last_received_at, (SELECT max(d.last_received_at) FROM mail_count_deltas d WHERE d.alias_id = al.id)) AS last
          FROM aliases al ORDER BY al.id`
      // 0027 + 0029's reader: the row, its corrections, and the messages ingest appended (each unread outside the trash).
      const before = yield* counters((al) =>
        sql`(${sql(al)}.unread_count + coalesce((SELECT sum(x.delta) FROM alias_unread_deltas x WHERE x.alias_id = ${sql(al)}.id), 0)
            + coalesce((SELECT sum(d.in_mailbox) FROM mail_count_deltas d WHERE d.alias_id = ${sql(al)}.id), 0))::int`
      )
      assert.deepStrictEqual(before.map((c) => [c.unread, c.received, c.bytes]), [[3 - 3 + 2, 4 + 3, 700], [5 - 4, 5, 500]])

      yield* runMigrations(yield* MigrationUrl, (id) => id === 34)

      const [gone] = yield* sql<{ table: string | null }>`SELECT to_regclass('alias_unread_deltas')::text AS table`
      assert.strictEqual(gone!.table, null)
      const rows = yield* sql<{ alias_id: number; in_mailbox: number; trashed: number; bytes: string; last_received_at: Date | null; unread: number }>`
        SELECT alias_id, in_mailbox, trashed, bytes::text AS bytes, last_received_at, unread FROM mail_count_deltas
        WHERE account_id = ${account!.id} ORDER BY alias_id, unread`
      assert.deepStrictEqual(rows.map((r) => [r.alias_id, r.in_mailbox, r.trashed, r.bytes, r.last_received_at === null, r.unread]), [
        [one, 0, 0, "0", true, -2],
        [one, 0, 0, "0", true, -1],
        [one, 2, 1, "300", false, 2],
        [two, 0, 0, "0", true, -4],
        [two, 5, 0, "500", false, 5]
      ])
      const [strays] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM mail_count_deltas WHERE account_id <> ${account!.id}`
      assert.strictEqual(strays!.n, 0)
      const after = yield* counters((al) => aliasUnreadCountOf(sql, al))
      assert.deepStrictEqual(after, before)

      assert.strictEqual(yield* foldMailCounts(sql), 5)
      assert.deepStrictEqual(yield* counters((al) => aliasUnreadCountOf(sql, al)), before)
      const folded = yield* sql<{ unread_count: number; received_count: number }>`SELECT unread_count, received_count FROM aliases ORDER BY id`
      assert.deepStrictEqual(folded.map((r) => [r.unread_count, r.received_count]), before.map((c) => [c.unread, c.received]))
    }))
})
