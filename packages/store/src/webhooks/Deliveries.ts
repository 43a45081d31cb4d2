/**
 * The webhook delivery queue (spec 6.4, 6.5; decisions.md "Webhook subscriptions"): the
 * statements the worker's delivery engine (packages/worker/src/webhooks/Delivery.ts) runs on the tables
 * the store owns.
 *
 * - `dispatchBatch`: undispatched outbox events are taken with FOR UPDATE SKIP LOCKED; each
 *   becomes one `webhook_deliveries` row per selected active endpoint (domain's
 *   `webhooks/dispatch.ts` selects and builds the payloads), holding the exact body bytes, in the
 *   transaction that marks the events dispatched; an event with no delivery is deleted there.
 * - `claim`: due rows become `delivering` with a lease; a row whose lease ran out belongs to a
 *   worker that died and is claimed again, so a crash loses no event.
 * - `record`: the outcomes of a batch, with the endpoints' counters, and the three-day disable
 *   (its queue abandoned, a notice for the owner).
 * - `purge`: after 30 days a delivery's payload and log go.
 */
import {
  DeliveryEventType,
  DeliveryRetentionMs,
  DisableAfterFailingMs,
  WebhookStatus,
  WebhookSubscription
} from "@burnbox/domain"
import { RequestTimeHtmlMaxChars } from "@burnbox/domain/mail/index"
import {
  deliveriesFor,
  dispatchable,
  eventAccounts,
  messagesToTag,
  messagesToText,
  type OutboxEvent,
  selectEndpoints
} from "@burnbox/domain/webhooks/index"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, type Queue, Schema, type Scope } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { OutboxChannel } from "./Outbox.ts"
import { decodeRows } from "../platform/Rows.ts"
import { now } from "../platform/Time.ts"
import { liveGuestShare } from "../sharing/MailboxAccess.ts"
import type { EndpointSecrets } from "./Signer.ts"
import { pgJson } from "../platform/PgText.ts"

// ---------------------------------------------------------------------------------------------
// What the engine works with

/** A claimed delivery, with what an attempt needs of its endpoint. */
export interface DeliveryJob {
  readonly id: bigint
  readonly webhookId: number
  readonly eventId: string
  /** The exact body bytes every attempt sends; null once purged. */
  readonly payload: Uint8Array | null
  readonly attemptCount: number
  readonly cycleAttemptCount: number
  /** When this claim was made: an outcome is recorded only while the row is still this claim's. */
  readonly claimedAt: Date
  readonly url: string
  readonly spkiPin: string | null
  /** The endpoint's status when claimed; a paused, disabled or deleted endpoint gets nothing. */
  readonly webhookStatus: WebhookStatus
  readonly deleted: boolean
  readonly secrets: EndpointSecrets
}

/** How an attempt went. */
export type AttemptOutcome =
  | { readonly ok: true; readonly status: number; readonly snippet: string | null; readonly latencyMs: number }
  | {
    readonly ok: false
    readonly retryable: boolean
    readonly status: number | null
    readonly errorCode: string
    readonly snippet: string | null
    readonly latencyMs: number
  }

/** A finished attempt, and what comes next for its delivery. */
export interface FinishedAttempt {
  readonly job: DeliveryJob
  readonly outcome: AttemptOutcome
  /** The wait before the next attempt, or null for none (it succeeded, or failed for good). */
  readonly retryInMs: number | null
}

// ---------------------------------------------------------------------------------------------
// Rows

const OutboxEventRow = Schema.Struct({
  id: Schema.String,
  accountId: Schema.Int,
  aliasId: Schema.NullOr(Schema.Int),
  type: DeliveryEventType,
  time: Schema.Date,
  data: Schema.Record(Schema.String, Schema.Unknown)
}).pipe(Schema.encodeKeys({ accountId: "account_id", aliasId: "alias_id" }))

const EndpointRow = Schema.Struct({
  id: Schema.Int,
  accountId: Schema.Int,
  subscription: WebhookSubscription,
  includeTextBody: Schema.Boolean,
  includeMessageRestored: Schema.Boolean,
  createdAt: Schema.Date,
  url: Schema.String
}).pipe(Schema.encodeKeys({
  accountId: "account_id",
  includeTextBody: "include_text_body",
  includeMessageRestored: "include_message_restored",
  createdAt: "created_at"
}))

const MailboxGuestRow = Schema.Struct({ aliasId: Schema.Int, guestId: Schema.Int, ownerHandle: Schema.String })
const RevokedEndpointRow = Schema.Struct({ aliasId: Schema.Int, guestId: Schema.Int, webhookId: Schema.Int, url: Schema.String })

const MessageTagRow = Schema.Struct({ messageId: Schema.Int, accountId: Schema.Int, tagId: Schema.Int })
  .pipe(Schema.encodeKeys({ messageId: "message_id", accountId: "account_id", tagId: "tag_id" }))

const MessageBodiesRow = Schema.Struct({
  id: Schema.Int,
  webhookTextBody: Schema.NullOr(Schema.String),
  textBody: Schema.NullOr(Schema.String),
  htmlOriginal: Schema.NullOr(Schema.String)
}).pipe(Schema.encodeKeys({ webhookTextBody: "webhook_text_body", textBody: "text_body", htmlOriginal: "html_original" }))

const ClaimedRow = Schema.Struct({
  id: Schema.BigInt,
  webhookId: Schema.Int,
  eventId: Schema.String,
  payload: Schema.NullOr(Schema.Uint8Array),
  attemptCount: Schema.Int,
  cycleAttemptCount: Schema.Int,
  claimedAt: Schema.Date,
  url: Schema.String,
  spkiPin: Schema.NullOr(Schema.String),
  webhookStatus: WebhookStatus,
  deleted: Schema.Boolean,
  secretEncrypted: Schema.String,
  previousSecretEncrypted: Schema.NullOr(Schema.String),
  previousSecretExpiresAt: Schema.NullOr(Schema.Date)
}).pipe(Schema.encodeKeys({
  webhookId: "webhook_id",
  eventId: "event_id",
  attemptCount: "attempt_count",
  cycleAttemptCount: "cycle_attempt_count",
  claimedAt: "claimed_at",
  spkiPin: "spki_pin",
  webhookStatus: "webhook_status",
  secretEncrypted: "secret_encrypted",
  previousSecretEncrypted: "previous_secret_encrypted",
  previousSecretExpiresAt: "previous_secret_expires_at"
}))

const toJob = (
  { previousSecretEncrypted, previousSecretExpiresAt, secretEncrypted, ...row }: typeof ClaimedRow.Type
): DeliveryJob => ({
  ...row,
  secrets: { current: secretEncrypted, previous: previousSecretEncrypted, previousExpiresAt: previousSecretExpiresAt }
})

const DeliveryIdRow = Schema.Struct({ id: Schema.BigInt })

const CountedEndpointRow = Schema.Struct({
  id: Schema.Int,
  accountId: Schema.Int,
  name: Schema.String,
  status: WebhookStatus,
  failureSince: Schema.NullOr(Schema.Date)
}).pipe(Schema.encodeKeys({ accountId: "account_id", failureSince: "failure_since" }))

/** Decodes the rows a statement returned. */

// ---------------------------------------------------------------------------------------------
// The repository

export class WebhookDeliveries extends Context.Service<WebhookDeliveries, {
  /**
   * Takes up to `limit` undispatched outbox events (outbox order) and writes their deliveries,
   * in one transaction; answers how many events it took (fewer than `limit`: the outbox is empty).
   */
  readonly dispatchBatch: (limit: number) => Effect.Effect<number>
  /** Claims up to `limit` due deliveries (and those whose claim is older than `leaseMs`), in due order. */
  readonly claim: (options: { readonly limit: number; readonly leaseMs: number }) => Effect.Effect<ReadonlyArray<DeliveryJob>>
  /** Gives up claimed deliveries whose endpoint was paused, disabled or deleted meanwhile. */
  readonly abandon: (ids: ReadonlyArray<bigint>) => Effect.Effect<void>
  /**
   * Records a batch's attempts in one transaction, in the order they finished: the deliveries
   * still held by their claim, their attempt history, each endpoint's counters as if the
   * outcomes had been applied one by one, and the disabling of an endpoint failing for three days.
   */
  readonly record: (attempts: ReadonlyArray<FinishedAttempt>) => Effect.Effect<void>
  /** Strips the payload and log of deliveries older than 30 days; answers how many. */
  readonly purge: Effect.Effect<number>
  /** A wake-up each time events are appended to the outbox (at the appending commit). */
  readonly wakeups: Effect.Effect<Queue.Dequeue<unknown, unknown>, never, Scope.Scope>
}>()("burnbox/WebhookDeliveries") {
  static readonly layer = Layer.effect(WebhookDeliveries, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* PgClient.PgClient

    // -- dispatch -----------------------------------------------------------------------------

    /**
     * Taken and marked in one statement: their ids leave events_pending (migration 0031); the
     * event rows themselves are never rewritten.
     */
    const takeEvents = SqlSchema.findAll({
      Request: Schema.Struct({ limit: Schema.Int }),
      Result: OutboxEventRow,
      execute: ({ limit }) =>
        sql`
        WITH taken AS (
          -- By the rows' addresses (a TID scan): a row-wise (time, id) IN (...) hashed a whole
          -- scan of the queue, dead rows and all, for every batch (a quarter of PostgreSQL's time
          -- under ingest in bench:ingest-cost; an eighth with this).
          DELETE FROM events_pending
          WHERE ctid = ANY (ARRAY(SELECT ctid FROM events_pending ORDER BY time, id LIMIT ${limit} FOR UPDATE SKIP LOCKED))
          RETURNING time, id)
        SELECT e.id, e.account_id, e.alias_id, e.type, e.time, e.data
        FROM taken t JOIN events e ON e.id = t.id
        ORDER BY t.time, t.id`
    })

    const activeEndpoints = SqlSchema.findAll({
      Request: Schema.Array(Schema.Int),
      Result: EndpointRow,
      execute: (accountIds) =>
        sql`
        SELECT id, account_id, subscription, include_text_body, include_message_restored, created_at, url FROM webhooks
        WHERE account_id IN ${sql.in(accountIds)} AND status = 'active' AND deleted_at IS NULL
        ORDER BY id`
    })

    /** The live guests of the events' mailboxes (spec 6.5, rule 6: their endpoints receive the mailbox's events). */
    const mailboxGuests = SqlSchema.findAll({
      Request: Schema.Array(Schema.Int),
      Result: MailboxGuestRow,
      execute: (aliasIds) =>
        sql`
        SELECT s.alias_id AS "aliasId", s.guest_id AS "guestId", o.handle AS "ownerHandle"
        FROM shares s JOIN accounts o ON o.id = s.owner_id
        WHERE s.alias_id IN ${sql.in(aliasIds)} AND ${sql.literal(liveGuestShare("s"))}`
    })
    /** Guest endpoints the owners revoked on those mailboxes. */
    const revokedEndpoints = SqlSchema.findAll({
      Request: Schema.Array(Schema.Int),
      Result: RevokedEndpointRow,
      execute: (aliasIds) =>
        sql`
        SELECT g.alias_id AS "aliasId", g.guest_id AS "guestId", g.webhook_id AS "webhookId", w.url
        FROM share_grants g JOIN webhooks w ON w.id = g.webhook_id
        WHERE g.alias_id IN ${sql.in(aliasIds)} AND g.kind = 'webhook' AND g.revoked_at IS NOT NULL`
    })

    const messageTags = SqlSchema.findAll({
      Request: Schema.Array(Schema.Int),
      Result: MessageTagRow,
      execute: (messageIds) => sql`
          SELECT message_id, account_id, tag_id FROM message_tags WHERE message_id IN ${sql.in(messageIds)}`
    })

    const messageBodies = SqlSchema.findAll({
      Request: Schema.Array(Schema.Int),
      Result: MessageBodiesRow,
      // The pipeline made each text_body; only rows processed before it did (migration 0018)
      // need their bodies, and of those only a small HTML is read (dispatch's textBodyOf).
      execute: (messageIds) => sql`
          SELECT id, webhook_text_body,
                 CASE WHEN webhook_text_body IS NULL THEN text_body END AS text_body,
                 CASE WHEN webhook_text_body IS NULL AND octet_length(html_original) <= ${RequestTimeHtmlMaxChars}
                      THEN html_original END AS html_original
          FROM messages WHERE id IN ${sql.in(messageIds)}`
    })

    /**
     * One delivery row per (event, selected endpoint), for a batch of events: the endpoints of
     * every account in the batch, the tags of every message and (for endpoints that asked for
     * it) the text bodies are each read with one query, and the rows written with one insert.
     * Answers the ids of the events that have a delivery.
     */
    const dispatchEvents = Effect.fn("WebhookDeliveries.dispatchEvents")(function*(events: ReadonlyArray<OutboxEvent>) {
      const none: ReadonlySet<string> = new Set()
      if (events.length === 0) return none
      const aliasIds = [...new Set(events.flatMap((e) => e.aliasId === null ? [] : [e.aliasId]))]
      const guests = aliasIds.length > 0 ? yield* mailboxGuests(aliasIds) : []
      const revoked = guests.length > 0 ? yield* revokedEndpoints(aliasIds) : []
      const accountIds = [...new Set([...eventAccounts(events), ...guests.map((g) => g.guestId)])]
      const endpoints = yield* activeEndpoints(accountIds)
      if (endpoints.length === 0) return none
      const tagged = messagesToTag(events, endpoints, guests)
      const tags = tagged.length > 0 ? yield* messageTags(tagged) : []
      const selections = selectEndpoints(events, endpoints, tags, guests, revoked)
      const texted = messagesToText(selections)
      const bodies = texted.length > 0 ? yield* messageBodies(texted) : []
      const rows = deliveriesFor(selections, bodies).map((delivery) => ({
        webhook_id: delivery.webhookId,
        account_id: delivery.accountId,
        event_id: delivery.eventId,
        event_type: delivery.eventType,
        payload: delivery.payload,
        next_attempt_at: delivery.time,
        created_at: delivery.time
      }))
      // At most 7 parameters a row: well under PostgreSQL's 32767 for a batch of 500 events x a few endpoints.
      for (let i = 0; i < rows.length; i += 4_000) {
        const [first, ...rest] = rows.slice(i, i + 4_000)
        yield* sql`INSERT INTO webhook_deliveries ${sql.insert([first!, ...rest])} ON CONFLICT (webhook_id, event_id) DO NOTHING`
      }
      return new Set(rows.map((row) => row.event_id))
    })

    const dispatchBatch = Effect.fn("WebhookDeliveries.dispatchBatch")(function*(limit: number) {
      return yield* sql.withTransaction(Effect.gen(function*() {
        const taken = yield* takeEvents({ limit })
        const delivered = yield* dispatchEvents(dispatchable(taken))
        // An event no endpoint receives is read by nothing once dispatched (its deliveries carry
        // their own payload; sharing revocations read the events of pending deliveries): it goes,
        // ~1.5 KB of disk a message (issue #36), rather than staying past its mail's retention.
        const unread = taken.flatMap((event) => delivered.has(event.id) ? [] : [event.id])
        if (unread.length > 0) yield* sql`DELETE FROM events WHERE id = ANY(${unread}::text[])`
        return taken.length
      }))
    }, Effect.orDie)

    // -- delivery -----------------------------------------------------------------------------

    /** Claims due deliveries, with what an attempt needs, in one statement. */
    const claimDue = SqlSchema.findAll({
      Request: Schema.Struct({ at: Schema.Date, expired: Schema.Date, limit: Schema.Int }),
      Result: ClaimedRow,
      execute: ({ at, expired, limit }) =>
        sql`
      WITH claimed AS (
        UPDATE webhook_deliveries SET status = 'delivering', claimed_at = ${at}
        WHERE id IN (
          SELECT id FROM webhook_deliveries
          WHERE (status = 'pending' AND next_attempt_at <= ${at})
             OR (status = 'delivering' AND claimed_at < ${expired})
          ORDER BY next_attempt_at, id LIMIT ${limit} FOR UPDATE SKIP LOCKED)
        RETURNING id, webhook_id, event_id, payload, attempt_count, cycle_attempt_count, claimed_at, next_attempt_at)
      SELECT c.id, c.webhook_id, c.event_id, c.payload, c.attempt_count, c.cycle_attempt_count, c.claimed_at,
             w.url, w.spki_pin, w.status AS webhook_status, (w.deleted_at IS NOT NULL) AS deleted,
             w.secret_encrypted, w.previous_secret_encrypted, w.previous_secret_expires_at
      FROM claimed c JOIN webhooks w ON w.id = c.webhook_id
      ORDER BY c.next_attempt_at, c.id`
    })

    const claim = Effect.fn("WebhookDeliveries.claim")(function*(options: { readonly limit: number; readonly leaseMs: number }) {
      const at = yield* now
      const rows = yield* claimDue({ at, expired: new Date(at.getTime() - options.leaseMs), limit: options.limit })
      return rows.map(toJob)
    }, Effect.orDie)

    const abandon = Effect.fn("WebhookDeliveries.abandon")(function*(ids: ReadonlyArray<bigint>) {
      if (ids.length === 0) return
      yield* sql`UPDATE webhook_deliveries SET status = 'abandoned', claimed_at = NULL
                 WHERE id IN ${sql.in(ids)} AND status = 'delivering'`
    }, Effect.orDie)

    const record = Effect.fn("WebhookDeliveries.record")(function*(attempts: ReadonlyArray<FinishedAttempt>) {
      yield* sql.withTransaction(Effect.gen(function*() {
        if (attempts.length === 0) return
        const at = yield* now
        const rows = attempts.map(({ job, outcome, retryInMs }) => ({
          job,
          outcome,
          attempt: job.attemptCount + 1,
          cycle: job.cycleAttemptCount + 1,
          status: outcome.ok ? "succeeded" : retryInMs === null ? "failed" : "pending",
          nextAttemptAt: retryInMs === null ? at : new Date(at.getTime() + retryInMs)
        }))
        // Endpoints first, in id order, then their deliveries: the order every writer of both
        // takes, so two batches (or a PATCH meanwhile) cannot deadlock.
        const webhookIds = [...new Set(rows.map((r) => r.job.webhookId))].sort((a, b) => a - b)
        yield* sql`SELECT id FROM webhooks WHERE id IN ${sql.in(webhookIds)} ORDER BY id FOR UPDATE`
        // Rows go in as one JSON document: the driver cannot type an array that holds only nulls.
        const updated = yield* sql`
          UPDATE webhook_deliveries d SET
            status = u.status, attempt_count = u.attempt, cycle_attempt_count = u.cycle,
            last_http_status = u.http_status, last_error = u.error, latency_ms = u.latency_ms, response_snippet = u.snippet,
            next_attempt_at = u.next_attempt_at, last_attempt_at = ${at},
            delivered_at = CASE WHEN u.status = 'succeeded' THEN ${at}::timestamptz END, claimed_at = NULL
          FROM json_to_recordset(${pgJson(rows.map((r) => ({
          id: String(r.job.id),
          status: r.status,
          attempt: r.attempt,
          cycle: r.cycle,
          http_status: r.outcome.status,
          error: r.outcome.ok ? null : r.outcome.errorCode,
          latency_ms: r.outcome.latencyMs,
          snippet: r.outcome.snippet,
          next_attempt_at: r.nextAttemptAt.toISOString(),
          claimed_at: r.job.claimedAt.toISOString()
        })))}::json) AS u(id bigint, status text, attempt int, cycle int, http_status int, error text, latency_ms int,
                              snippet text, next_attempt_at timestamptz, claimed_at timestamptz)
          WHERE d.id = u.id AND d.status = 'delivering' AND d.claimed_at = u.claimed_at
          RETURNING d.id`.pipe(Effect.flatMap(decodeRows(DeliveryIdRow)))
        // Rows not updated were abandoned (endpoint paused or deleted) or taken over by another worker meanwhile.
        const kept = new Set(updated.map((r) => String(r.id)))
        const recorded = rows.filter((r) => kept.has(String(r.job.id)))
        if (recorded.length === 0) return
        yield* sql`
          INSERT INTO webhook_attempts (delivery_id, attempt, status, http_status, error_code, latency_ms, response_snippet, attempted_at)
          SELECT u.id, u.attempt, u.status, u.http_status, u.error, u.latency_ms, u.snippet, ${at}
          FROM json_to_recordset(${pgJson(recorded.map((r) => ({
          id: String(r.job.id),
          attempt: r.attempt,
          status: r.outcome.ok ? "succeeded" : "failed",
          http_status: r.outcome.status,
          error: r.outcome.ok ? null : r.outcome.errorCode,
          latency_ms: r.outcome.latencyMs,
          snippet: r.outcome.snippet
        })))}::json) AS u(id bigint, attempt int, status text, http_status int, error text, latency_ms int, snippet text)
          ON CONFLICT DO NOTHING`
        // Per endpoint: did any attempt succeed, and how many failures came after the last success.
        const perEndpoint = new Map<number, { succeeded: boolean; trailing: number; failed: boolean }>()
        for (const r of recorded) {
          const e = perEndpoint.get(r.job.webhookId) ?? { succeeded: false, trailing: 0, failed: false }
          if (r.outcome.ok) {
            e.succeeded = true
            e.trailing = 0
          } else {
            e.failed = true
            e.trailing++
          }
          perEndpoint.set(r.job.webhookId, e)
        }
        const endpoints = [...perEndpoint].sort((a, b) => a[0] - b[0])
        const counted = yield* sql`
          UPDATE webhooks w SET
            last_success_at = CASE WHEN u.succeeded THEN ${at}::timestamptz ELSE w.last_success_at END,
            failure_count = CASE WHEN u.succeeded THEN u.failures_after ELSE w.failure_count + u.failures_after END,
            failure_since = CASE WHEN u.failures_after = 0 THEN NULL WHEN u.succeeded THEN ${at}::timestamptz
                                 ELSE COALESCE(w.failure_since, ${at}::timestamptz) END,
            last_failure_at = CASE WHEN u.failed THEN ${at}::timestamptz ELSE w.last_failure_at END
          FROM json_to_recordset(${pgJson(endpoints.map(([id, e]) => ({ id, succeeded: e.succeeded, failures_after: e.trailing, failed: e.failed })))}::json)
            AS u(id int, succeeded boolean, failures_after int, failed boolean)
          WHERE w.id = u.id
          RETURNING w.id, w.account_id, w.name, w.status, w.failure_since`.pipe(Effect.flatMap(decodeRows(CountedEndpointRow)))
        for (const webhook of [...counted].sort((a, b) => a.id - b.id)) {
          if (webhook.status !== "active" || webhook.failureSince === null) continue
          if (at.getTime() - webhook.failureSince.getTime() < DisableAfterFailingMs) continue
          yield* sql`UPDATE webhooks SET status = 'disabled', disabled_at = ${at}, updated_at = ${at} WHERE id = ${webhook.id}`
          yield* sql`UPDATE webhook_deliveries SET status = 'abandoned', claimed_at = NULL
                     WHERE webhook_id = ${webhook.id} AND status IN ('pending', 'delivering')`
          yield* sql`
            INSERT INTO account_notices (account_id, kind, data, created_at)
            VALUES (${webhook.accountId}, 'webhook.disabled',
                    ${pgJson({ webhookId: webhook.id, name: webhook.name, failureSince: webhook.failureSince.toISOString() })}::jsonb,
                    ${at})`
          yield* Effect.logWarning(`webhook ${webhook.id} disabled after three days of failures`)
        }
      }))
    }, Effect.orDie)

    // -- retention ----------------------------------------------------------------------------

    const purge = Effect.gen(function*() {
      const at = yield* now
      const cutoff = new Date(at.getTime() - DeliveryRetentionMs)
      return yield* sql.withTransaction(Effect.gen(function*() {
        const purged = yield* sql`
          UPDATE webhook_deliveries SET payload = NULL, response_snippet = NULL, last_error = NULL, purged_at = ${at},
                 status = CASE WHEN status IN ('pending', 'delivering') THEN 'abandoned' ELSE status END
          WHERE created_at <= ${cutoff} AND purged_at IS NULL RETURNING id`.pipe(Effect.flatMap(decodeRows(DeliveryIdRow)))
        if (purged.length > 0) yield* sql`DELETE FROM webhook_attempts WHERE delivery_id IN ${sql.in(purged.map((r) => r.id))}`
        // The stripped rows answer 410 for another 30 days, then go; so do long-deleted endpoints.
        yield* sql`DELETE FROM webhook_deliveries WHERE purged_at <= ${cutoff}`
        yield* sql`DELETE FROM webhooks WHERE deleted_at <= ${cutoff}`
        return purged.length
      }))
    }).pipe(Effect.orDie, Effect.withSpan("WebhookDeliveries.purge"))

    const wakeups = pg.listen(OutboxChannel).pipe(Effect.orDie)

    return WebhookDeliveries.of({ dispatchBatch, claim, abandon, record, purge, wakeups })
  }))
}
