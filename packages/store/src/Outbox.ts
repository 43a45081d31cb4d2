import { type EventAlias, eventId, type EventType } from "@burnbox/domain"
import { Effect } from "effect"
import type { SqlClient } from "effect/sql"

/** Notified (at commit) whenever an event is appended, so delivery starts at once. */
export const OutboxChannel = "burnbox_events"

/**
 * Appends an event to the durable outbox. Call it inside the transaction that makes the
 * change the event reports, so both commit or neither does.
 */
export const appendEvent = (
  sql: SqlClient.SqlClient,
  event: { accountId: number; alias: EventAlias | null; type: EventType; time: Date; data: Record<string, unknown> }
) =>
  sql`
    INSERT INTO events (id, account_id, alias_id, type, time, data)
    VALUES (${eventId(event.time.getTime())}, ${event.accountId}, ${event.alias?.id ?? null}, ${event.type}, ${event.time},
            ${JSON.stringify(event.data)}::jsonb)`.pipe(
    Effect.andThen(sql`SELECT pg_notify(${OutboxChannel}, '')`),
    Effect.orDie,
    Effect.asVoid
  )
