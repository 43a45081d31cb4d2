/**
 * An alias's unread count (`unreadCount`): the owner's unread mail outside the trash. Ingest,
 * reader actions and destruction keep it on the aliases row (`unread_count`); the pipeline's
 * rules step, which must not wait on that row (ingest updates it for every batch), appends its
 * corrections to `alias_unread_deltas` (migration 0027), folded into the row every minute. The
 * count is the row's value plus the alias's corrections, read in one statement, so it is exact
 * whenever it is read. Mail arriving counts unread through its own deltas (MailCounts.ts), also
 * read here.
 */
import { Effect, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { aliasUnreadDeltasOf } from "../messages/MailCounts.ts"

/** The SQL expression of the unread count of the alias row `alias` (an alias of the FROM list). */
export const unreadCountOf = (sql: SqlClient.SqlClient, alias: string) =>
  sql`(${sql(alias)}.unread_count + coalesce((SELECT sum(x.delta) FROM alias_unread_deltas x WHERE x.alias_id = ${sql(alias)}.id), 0)
      + ${aliasUnreadDeltasOf(sql, alias)})::int`

/**
 * A data-modifying step that takes `n` unread messages off each alias of `counts` (a CTE with
 * alias_id and n), appending without a lock: it never waits for a writer of the aliases rows.
 */
export const unreadDeltasFragment = (sql: SqlClient.SqlClient, counts: string) =>
  sql`INSERT INTO alias_unread_deltas (alias_id, delta) SELECT c.alias_id, -c.n FROM ${sql(counts)} c WHERE c.n <> 0`

/**
 * Folds the appended corrections into the aliases rows: each row is deleted and its delta added
 * in one statement, so a reader sees them either here or there, never both or neither. The
 * aliases rows are locked in id order, as every writer of their counters locks them; rows
 * appended meanwhile wait for the next fold, and the rows of an alias that is gone are dropped.
 * Answers how many rows it folded.
 */
export const foldUnreadDeltas = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const [row] = yield* SqlSchema.findAll({
      Request: Schema.Void,
      Result: Schema.Struct({ n: Schema.Int }),
      execute: () =>
        sql`
          WITH locked AS (
            SELECT al.id FROM aliases al WHERE al.id IN (SELECT DISTINCT alias_id FROM alias_unread_deltas)
            ORDER BY al.id FOR NO KEY UPDATE OF al
          ), folded AS (
            -- after the locks (the count reads them): a fold waits for another at the row, not crosswise
            DELETE FROM alias_unread_deltas x
            WHERE (SELECT count(*) FROM locked) >= 0
              AND (x.alias_id IN (SELECT id FROM locked) OR NOT EXISTS (SELECT 1 FROM aliases al WHERE al.id = x.alias_id))
            RETURNING x.alias_id, x.delta
          ), summed AS (
            UPDATE aliases al SET unread_count = al.unread_count + s.delta
            FROM (SELECT alias_id, sum(delta)::int AS delta FROM folded GROUP BY alias_id) s
            WHERE al.id = s.alias_id AND s.delta <> 0
          )
          SELECT count(*)::int AS n FROM folded`
    })(undefined)
    return row?.n ?? 0
  }).pipe(Effect.orDie, Effect.withSpan("Aliases.foldUnread"))
