/**
 * The counters storing mail adds to (issue 36 item 2, migrations 0029 and 0034): an account's
 * storage used and mailbox counts, an alias's received, unread and storage counters, its last
 * arrival and its alias_counts. Every insert into `messages` appends what it adds to
 * `mail_count_deltas` (a trigger, without a lock), so batches of one account never wait on these
 * rows; the pipeline's rules step appends there too, its correction of the alias's unread count
 * for mail a rule reads or trashes (`unreadCorrections`), so it never waits for a writer of the
 * aliases row. A counter is its row plus the sum of its deltas, read in one statement by
 * the expressions below (the one reader), exact at every moment and after any crash: the deltas
 * commit with what they count. `foldMailCounts` (the one fold) moves the deltas into the rows.
 */
import { Effect, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"

type Sql = SqlClient.SqlClient

const deltasOfAccount = (sql: Sql, account: string, column: string) =>
  sql`coalesce((SELECT sum(${sql.literal(column)}) FROM mail_count_deltas d WHERE d.account_id = ${sql.literal(account)}), 0)`
const deltasOfAlias = (sql: Sql, alias: string, column: string) =>
  sql`coalesce((SELECT sum(${sql.literal(column)}) FROM mail_count_deltas d WHERE d.alias_id = ${sql.literal(alias)}), 0)`

/** Storage used by the account row `a` (an alias of the FROM list), as float8. */
export const accountStorageUsedOf = (sql: Sql, a: string) =>
  sql`(${sql(a)}.storage_used_bytes + ${deltasOfAccount(sql, `${a}.id`, "d.bytes")})::float8`

/** The alias row `al`'s counters with their deltas: received_count, storage_used_bytes (float8), last_received_at. */
export const aliasReceivedCountOf = (sql: Sql, al: string) =>
  sql`(${sql(al)}.received_count + ${deltasOfAlias(sql, `${al}.id`, "d.in_mailbox + d.trashed")})::int`
export const aliasStorageUsedOf = (sql: Sql, al: string) =>
  sql`(${sql(al)}.storage_used_bytes + ${deltasOfAlias(sql, `${al}.id`, "d.bytes")})::float8`
export const aliasLastReceivedOf = (sql: Sql, al: string) =>
  sql`greatest(${sql(al)}.last_received_at, (SELECT max(d.last_received_at) FROM mail_count_deltas d WHERE d.alias_id = ${sql(al)}.id))`
/**
 * The unread count of the alias row `al` (`unreadCount`: the owner's unread mail outside the
 * trash). Reader actions and destruction write the row's `unread_count`; mail arriving (each
 * message unread) and the rules step's corrections are its deltas.
 */
export const aliasUnreadCountOf = (sql: Sql, al: string) =>
  sql`(${sql(al)}.unread_count + ${deltasOfAlias(sql, `${al}.id`, "d.unread")})::int`

/**
 * A data-modifying step that takes `n` unread messages off each alias of `counts` (a CTE with
 * account_id (the alias's owner), alias_id and n): the rules step's correction, appended without a
 * lock (no foreign key either), so it never waits for a writer of the aliases rows.
 */
export const unreadCorrections = (sql: Sql, counts: string) =>
  sql`INSERT INTO mail_count_deltas (account_id, alias_id, in_mailbox, trashed, bytes, last_received_at, unread)
      SELECT c.account_id, c.alias_id, 0, 0, 0, NULL, -c.n FROM ${sql(counts)} c WHERE c.n <> 0`

/** An account's mailbox counts (mailbox_counts with its deltas): the column's value for account `accountId` (a parameter). */
export const mailboxCountOf = (sql: Sql, accountId: number, column: "in_mailbox - archived" | "archived" | "trashed") =>
  column === "archived"
    ? sql`coalesce((SELECT c.archived FROM mailbox_counts c WHERE c.account_id = ${accountId}), 0)`
    : sql`(coalesce((SELECT ${sql.literal(`c.${column}`)} FROM mailbox_counts c WHERE c.account_id = ${accountId}), 0)
        + coalesce((SELECT sum(${sql.literal(column === "trashed" ? "d.trashed" : "d.in_mailbox")}) FROM mail_count_deltas d WHERE d.account_id = ${accountId}), 0))::int`

/** The sum of alias_counts' `column` (with its deltas) over the aliases of `aliasIds` (a non-empty list). */
export const aliasCountsOf = (sql: Sql, aliasIds: ReadonlyArray<number>, column: "in_mailbox" | "trashed") =>
  sql`(coalesce((SELECT sum(${sql.literal(`c.${column}`)}) FROM alias_counts c WHERE c.alias_id IN ${sql.in(aliasIds)}), 0)
      + coalesce((SELECT sum(${sql.literal(`d.${column}`)}) FROM mail_count_deltas d WHERE d.alias_id IN ${sql.in(aliasIds)}), 0))::int`

/**
 * Moves the deltas into their rows, in one statement: a delta is deleted and added to its
 * account, mailbox_counts, alias and alias_counts rows at once, so a reader sees it either there
 * or here (a row is written only when its sum is not zero: a rules correction adds to its
 * alias's unread count alone). Only deltas whose rows it could lock without waiting (SKIP LOCKED)
 * are folded; the rest wait for the next fold, so it never waits for, or deadlocks with, any
 * writer of those rows. A delta of an alias that is gone still adds to its account's rows; one of an account that
 * is gone is dropped. Answers how many deltas it folded.
 */
export const foldMailCounts = (sql: Sql) =>
  Effect.gen(function*() {
    const [row] = yield* SqlSchema.findAll({
      Request: Schema.Void,
      Result: Schema.Struct({ n: Schema.Int }),
      execute: () =>
        sql`
          WITH acc AS (
            SELECT a.id FROM accounts a WHERE a.id IN (SELECT DISTINCT account_id FROM mail_count_deltas)
            ORDER BY a.id FOR NO KEY UPDATE OF a SKIP LOCKED
          ), mc AS (
            SELECT c.account_id FROM mailbox_counts c WHERE c.account_id IN (SELECT id FROM acc)
            ORDER BY c.account_id FOR NO KEY UPDATE OF c SKIP LOCKED
          ), ali AS (
            SELECT al.id FROM aliases al WHERE al.id IN (SELECT DISTINCT alias_id FROM mail_count_deltas)
            ORDER BY al.id FOR NO KEY UPDATE OF al SKIP LOCKED
          ), ac AS (
            SELECT c.alias_id FROM alias_counts c WHERE c.alias_id IN (SELECT id FROM ali)
            ORDER BY c.alias_id FOR NO KEY UPDATE OF c SKIP LOCKED
          ), folded AS (
            DELETE FROM mail_count_deltas x
            WHERE (x.account_id IN (SELECT account_id FROM mc)
                   AND (x.alias_id IN (SELECT alias_id FROM ac) OR NOT EXISTS (SELECT 1 FROM aliases al WHERE al.id = x.alias_id)))
               OR NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = x.account_id)
            RETURNING x.account_id, x.alias_id, x.in_mailbox, x.trashed, x.bytes, x.last_received_at, x.unread
          ), accounts_added AS (
            UPDATE accounts a SET storage_used_bytes = a.storage_used_bytes + s.bytes
            FROM (SELECT account_id, sum(bytes) AS bytes FROM folded GROUP BY account_id) s
            WHERE a.id = s.account_id AND s.bytes <> 0
          ), mailbox_added AS (
            UPDATE mailbox_counts c SET in_mailbox = c.in_mailbox + s.in_mailbox, trashed = c.trashed + s.trashed
            FROM (SELECT account_id, sum(in_mailbox)::int AS in_mailbox, sum(trashed)::int AS trashed FROM folded GROUP BY account_id) s
            WHERE c.account_id = s.account_id AND (s.in_mailbox <> 0 OR s.trashed <> 0)
          ), aliases_added AS (
            UPDATE aliases al SET storage_used_bytes = al.storage_used_bytes + s.bytes, received_count = al.received_count + s.received,
                   unread_count = al.unread_count + s.unread, last_received_at = greatest(al.last_received_at, s.last)
            FROM (SELECT alias_id, sum(bytes) AS bytes, sum(in_mailbox + trashed)::int AS received, sum(unread)::int AS unread,
                         max(last_received_at) AS last FROM folded GROUP BY alias_id) s
            WHERE al.id = s.alias_id
          ), alias_counts_added AS (
            UPDATE alias_counts c SET in_mailbox = c.in_mailbox + s.in_mailbox, trashed = c.trashed + s.trashed
            FROM (SELECT alias_id, sum(in_mailbox)::int AS in_mailbox, sum(trashed)::int AS trashed FROM folded GROUP BY alias_id) s
            WHERE c.alias_id = s.alias_id AND (s.in_mailbox <> 0 OR s.trashed <> 0)
          )
          SELECT count(*)::int AS n FROM folded`
    })(undefined)
    return row?.n ?? 0
  }).pipe(Effect.orDie, Effect.withSpan("MailCounts.fold"))
