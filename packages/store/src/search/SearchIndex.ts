/**
 * The search index (`message_search`, migrations 0010-0017): the words of each message outside
 * the trash, scoped to its account, with the owner's archive mark. This module owns its writes;
 * the pipeline's store statement takes them as a fragment so a message is stored and indexed by
 * one statement. (Queries still live with the message list, `MessageList.ts`.)
 */
import { Effect } from "effect"
import type { SqlClient, Statement } from "effect/sql"

/**
 * A data-modifying step that indexes the rows of `rows` (a CTE with id, account_id, alias_id,
 * received_at, has_attachments, trashed_at, subject, sender_text, search_text), with the owner's
 * archive mark as the statement sees it (`refreshArchiveMarks` reads it again after commit).
 */
export const indexFragment = (sql: SqlClient.SqlClient, rows: string): Statement.Fragment =>
  sql`
    INSERT INTO message_search (id, account_id, alias_id, received_at, has_attachments, trashed_at, archived, search)
    SELECT s.id, s.account_id, s.alias_id, s.received_at, s.has_attachments, s.trashed_at,
           EXISTS (SELECT 1 FROM message_states ms WHERE ms.message_id = s.id AND ms.account_id = s.account_id AND ms.archived),
           account_lexemes(s.account_id, setweight(to_tsvector('simple', s.subject), 'A')
             || setweight(to_tsvector('simple', s.sender_text), 'B')
             || to_tsvector('simple', s.search_text))
    FROM ${sql(rows)} s
    ON CONFLICT (id, account_id) DO UPDATE
    SET has_attachments = excluded.has_attachments, trashed_at = excluded.trashed_at,
        archived = excluded.archived, search = excluded.search`

/**
 * The owners' archive marks of just-indexed messages, read again once the rows exist (migration
 * 0012): a mark committed after the indexing statement took its snapshot is seen here, and a mark
 * committed after this reads the row itself (its trigger waits for the message's lock).
 */
export const refreshArchiveMarks = (sql: SqlClient.SqlClient, ids: ReadonlyArray<number>) =>
  ids.length === 0
    ? Effect.void
    : sql`
        UPDATE message_search ms SET archived = true FROM message_states s
        WHERE s.message_id IN ${sql.in(ids)} AND s.archived AND NOT ms.archived
          AND ms.id = s.message_id AND ms.account_id = s.account_id`.pipe(Effect.asVoid)
