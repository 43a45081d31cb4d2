import { type EventAlias, eventId, type EventType } from "@burnbox/domain"
import { Effect } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import { pgJson } from "../platform/PgText.ts"

/** Notified (at commit) whenever an event is appended, so delivery starts at once. */
export const OutboxChannel = "burnbox_events"

export interface NewEvent {
  readonly accountId: number
  readonly alias: EventAlias | null
  readonly type: EventType
  readonly time: Date
  readonly data: Record<string, unknown>
}

/**
 * An event as a row of `events` (for `insertEventRecords`): its id is made here.
 */
export const eventRecord = (event: NewEvent) => ({
  id: eventId(event.time.getTime()),
  account_id: event.accountId,
  alias_id: event.alias?.id ?? null,
  type: event.type,
  time: event.time.toISOString(),
  data: event.data
})

/**
 * The statement that inserts `records` (`eventRecord`s) into `events`, those `where` keeps
 * (it may test the recordset's columns as `e.*`; `message_id` is there for records that carry
 * one). A statement of its own, or a data-modifying step of a larger one.
 */
export const insertEventRecords = (
  sql: SqlClient.SqlClient,
  records: ReadonlyArray<ReturnType<typeof eventRecord> & { readonly message_id?: number }>,
  where: Statement.Fragment = sql`true`
) =>
  sql`
    INSERT INTO events (id, account_id, alias_id, type, time, data)
    SELECT e.id, e.account_id, e.alias_id, e.type, e.time, e.data
    FROM json_to_recordset(${pgJson(records)}::json)
      AS e(id text, account_id int, alias_id int, type text, time timestamptz, data jsonb, message_id int)
    WHERE ${where}`

/**
 * Appends events to the durable outbox with one statement (and one notification). Call it
 * inside the transaction that makes the change the events report, so both commit or neither does.
 * (A statement that appends events itself, with `insertEventRecords`, notifies `OutboxChannel` likewise.)
 */
export const appendEvents = (sql: SqlClient.SqlClient, events: ReadonlyArray<NewEvent>) =>
  events.length === 0
    ? Effect.void
    : insertEventRecords(sql, events.map(eventRecord)).pipe(
      Effect.andThen(sql`SELECT pg_notify(${OutboxChannel}, '')`),
      Effect.orDie,
      Effect.asVoid
    )

/** Appends one event to the outbox (see `appendEvents`). */
export const appendEvent = (sql: SqlClient.SqlClient, event: NewEvent) => appendEvents(sql, [event])
