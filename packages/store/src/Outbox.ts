import { type EventAlias, eventId, type EventType } from "@burnbox/domain"
import { Effect } from "effect"
import type { SqlClient } from "effect/sql"

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
 * An event as a row of `events`, for `json_to_recordset(...) AS e(id text, account_id int,
 * alias_id int, type text, time timestamptz, data jsonb)`: its id is made here.
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
 * Appends events to the durable outbox with one statement (and one notification). Call it
 * inside the transaction that makes the change the events report, so both commit or neither does.
 * (A statement that appends events itself, from `eventRecord`s, notifies `OutboxChannel` likewise.)
 */
export const appendEvents = (sql: SqlClient.SqlClient, events: ReadonlyArray<NewEvent>) =>
  events.length === 0
    ? Effect.void
    : sql`
    INSERT INTO events (id, account_id, alias_id, type, time, data)
    SELECT e.id, e.account_id, e.alias_id, e.type, e.time, e.data
    FROM json_to_recordset(${JSON.stringify(events.map(eventRecord))}::json)
      AS e(id text, account_id int, alias_id int, type text, time timestamptz, data jsonb)`.pipe(
      Effect.andThen(sql`SELECT pg_notify(${OutboxChannel}, '')`),
      Effect.orDie,
      Effect.asVoid
    )

/** Appends one event to the outbox (see `appendEvents`). */
export const appendEvent = (sql: SqlClient.SqlClient, event: NewEvent) => appendEvents(sql, [event])
