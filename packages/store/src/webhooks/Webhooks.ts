/**
 * Webhook endpoints, their delivery log, tests and redelivery (spec 2.21, 3.3, 4.9, 6.5).
 * Delivery itself is the worker's engine (packages/worker/src/webhooks/Delivery.ts) over the queue of
 * webhooks/Deliveries.ts; this repository writes the rows they work from.
 */
import {
  type ActiveEndpointRequest,
  DeliveryInProgress,
  DeliveryNotFound,
  DeliveryPayloadExpired,
  DeliveryRetentionMs,
  envelopeBytes,
  eventId,
  SecretOverlapMs,
  WebhookInactive,
  WebhookLimitReached,
  WebhookNotFound,
  WebhookUrlRefused,
  type CreateWebhook,
  type DeliveryAttempt,
  type DeliveryStatus,
  type UpdateWebhook,
  type Webhook,
  type WebhookDelivery,
  type WebhookDeliveryReceipt,
  type WebhookStatus,
  type WebhookSubscription
} from "@burnbox/domain"
import { decodeEndpointSecret, decryptPrivateKey, encryptPrivateKey, generateEndpointSecret } from "@burnbox/domain/webhooks/index"
import { Context, Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { BurnboxConfig } from "../platform/Config.ts"
import { checkTarget } from "../platform/OutboundHttp.ts"
import { now } from "../platform/Time.ts"

// ---------------------------------------------------------------------------------------------
// Endpoint secrets at rest

/** The endpoint secret, encrypted under BURNBOX_SECRET (the HMAC needs it back, so no digest). */
export const encryptEndpointSecret = (secret: Redacted.Redacted<string>, serverSecret: Redacted.Redacted<string>): string =>
  encryptPrivateKey(decodeEndpointSecret(Redacted.value(secret)), Redacted.value(serverSecret))

export const decryptEndpointSecret = (stored: string, serverSecret: Redacted.Redacted<string>): Redacted.Redacted<string> =>
  Redacted.make(`whsec_${Buffer.from(decryptPrivateKey(stored, Redacted.value(serverSecret))).toString("base64")}`)

// ---------------------------------------------------------------------------------------------
// Rows

export interface WebhookRow {
  id: number
  account_id: number
  name: string
  url: string
  subscription: WebhookSubscription
  spki_pin: string | null
  include_text_body: boolean
  include_message_restored: boolean
  status: WebhookStatus
  failure_count: number
  secret_version: number
  secret_encrypted: string
  previous_secret_encrypted: string | null
  previous_secret_expires_at: Date | null
  last_success_at: Date | null
  last_failure_at: Date | null
  failure_since: Date | null
  disabled_at: Date | null
  created_at: Date
  updated_at: Date
}

const iso = (d: Date | null) => d?.toISOString() ?? null
/** "Database timestamp text" (spec 2.21): what PostgreSQL prints for a timestamptz in UTC. */
export const dbText = (d: Date) => d.toISOString().replace("T", " ").replace("Z", "+00")
const dbTextOrNull = (d: Date | null) => (d === null ? null : dbText(d))

export const toWebhook = (row: WebhookRow): Webhook => ({
  id: row.id,
  name: row.name,
  url: row.url,
  subscription: row.subscription,
  spkiPin: row.spki_pin,
  includeTextBody: row.include_text_body,
  includeMessageRestored: row.include_message_restored,
  status: row.status,
  failureCount: row.failure_count,
  secretVersion: row.secret_version,
  lastSuccessAt: iso(row.last_success_at),
  lastFailureAt: iso(row.last_failure_at),
  failureSince: iso(row.failure_since),
  disabledAt: iso(row.disabled_at),
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString()
})

interface DeliveryRow {
  id: string | number
  webhook_id: number
  webhook_name: string
  event_id: string
  event_type: WebhookDelivery["eventType"]
  status: DeliveryStatus
  attempt_count: number
  cycle_attempt_count: number
  last_http_status: number | null
  last_error: string | null
  latency_ms: number | null
  response_snippet: string | null
  next_attempt_at: Date
  last_attempt_at: Date | null
  delivered_at: Date | null
  created_at: Date
  attempts: ReadonlyArray<{
    attempt: number
    status: "succeeded" | "failed"
    http_status: number | null
    error_code: string | null
    latency_ms: number
    response_snippet: string | null
    attempted_at: string
  }> | null
}

const toDelivery = (row: DeliveryRow): WebhookDelivery => ({
  id: Number(row.id),
  webhookId: row.webhook_id,
  webhookName: row.webhook_name,
  eventId: row.event_id,
  eventType: row.event_type,
  status: row.status,
  attemptCount: row.attempt_count,
  cycleAttemptCount: row.cycle_attempt_count,
  lastHttpStatus: row.last_http_status,
  lastError: row.last_error,
  latencyMs: row.latency_ms,
  responseSnippet: row.response_snippet,
  nextAttemptAt: dbText(row.next_attempt_at),
  lastAttemptAt: dbTextOrNull(row.last_attempt_at),
  deliveredAt: dbTextOrNull(row.delivered_at),
  createdAt: dbText(row.created_at),
  attempts: (row.attempts ?? []).map((a): DeliveryAttempt => ({
    attempt: a.attempt,
    status: a.status,
    httpStatus: a.http_status,
    errorCode: a.error_code,
    latencyMs: a.latency_ms,
    responseSnippet: a.response_snippet,
    attemptedAt: new Date(a.attempted_at).toISOString()
  }))
})

const toReceipt = (row: Omit<DeliveryRow, "webhook_name" | "attempts">): WebhookDeliveryReceipt => ({
  id: Number(row.id),
  webhookId: row.webhook_id,
  eventId: row.event_id,
  eventType: row.event_type,
  status: row.status,
  attemptCount: row.attempt_count,
  cycleAttemptCount: row.cycle_attempt_count,
  nextAttemptAt: row.next_attempt_at.toISOString(),
  createdAt: row.created_at.toISOString()
})

/** Tests and redelivery go only to an active endpoint. */
const refuseInactive = (row: WebhookRow, refused: ActiveEndpointRequest) =>
  row.status === "active"
    ? Effect.void
    : Effect.fail(new WebhookInactive({ webhookId: row.id, status: row.status, refused }))

export const WebhookTestMessage = "This is a test event from burnbox."

export class Webhooks extends Context.Service<Webhooks, {
  readonly list: (accountId: number) => Effect.Effect<ReadonlyArray<Webhook>>
  readonly create: (accountId: number, input: CreateWebhook, limit: number) =>
    Effect.Effect<{ webhook: Webhook; secret: Redacted.Redacted<string> }, WebhookLimitReached | WebhookUrlRefused>
  readonly update: (accountId: number, id: number, input: UpdateWebhook) => Effect.Effect<Webhook, WebhookNotFound | WebhookUrlRefused>
  readonly remove: (accountId: number, id: number) => Effect.Effect<void, WebhookNotFound>
  readonly rotateSecret: (accountId: number, id: number) =>
    Effect.Effect<{ webhook: Webhook; secret: Redacted.Redacted<string> }, WebhookNotFound>
  /** Newest first; `webhookId` null means every owned endpoint. */
  readonly deliveries: (accountId: number, webhookId: number | null, limit: number) =>
    Effect.Effect<ReadonlyArray<WebhookDelivery>, WebhookNotFound>
  readonly queueTest: (accountId: number, id: number) => Effect.Effect<WebhookDeliveryReceipt, WebhookNotFound | WebhookInactive>
  readonly redeliver: (accountId: number, deliveryId: number) =>
    Effect.Effect<WebhookDeliveryReceipt, DeliveryNotFound | WebhookNotFound | WebhookInactive | DeliveryPayloadExpired | DeliveryInProgress>
}>()("burnbox/Webhooks") {
  static readonly layer = Layer.effect(Webhooks, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* BurnboxConfig

    const owned = (accountId: number, id: number, lock = false) =>
      sql<WebhookRow>`
        SELECT * FROM webhooks WHERE id = ${id} AND account_id = ${accountId} AND deleted_at IS NULL
        ${lock ? sql`FOR NO KEY UPDATE` : sql``}`.pipe(
        Effect.orDie,
        Effect.flatMap((rows) => (rows[0] ? Effect.succeed(rows[0]) : Effect.fail(new WebhookNotFound({ webhookId: id }))))
      )

    /** The URL's rules and its DNS answer; a refusal names the rule. */
    const validateUrl = (raw: string) =>
      Effect.gen(function*() {
        const checked = yield* checkTarget(raw, config.webhookAllowPrivate)
        if (!checked.ok) return yield* Effect.fail(new WebhookUrlRefused({ reason: checked.reason }))
        return checked.url.href
      })

    const list = Effect.fn("Webhooks.list")(function*(accountId: number) {
      const rows = yield* sql<WebhookRow>`
        SELECT * FROM webhooks WHERE account_id = ${accountId} AND deleted_at IS NULL ORDER BY id`.pipe(Effect.orDie)
      return rows.map(toWebhook)
    })

    const create = Effect.fn("Webhooks.create")(function*(accountId: number, input: CreateWebhook, limit: number) {
      const url = yield* validateUrl(input.url)
      const at = yield* now
      const secret = Redacted.make(generateEndpointSecret())
      const row = yield* sql.withTransaction(Effect.gen(function*() {
        // Serialise creations per account so the count cannot be raced past the limit.
        yield* sql`SELECT id FROM accounts WHERE id = ${accountId} FOR NO KEY UPDATE`
        const [count] = yield* sql<{ n: number }>`
          SELECT count(*)::int AS n FROM webhooks WHERE account_id = ${accountId} AND deleted_at IS NULL`
        if (count!.n >= limit) return undefined
        const [inserted] = yield* sql<WebhookRow>`
          INSERT INTO webhooks (account_id, name, url, subscription, spki_pin, include_text_body, include_message_restored,
                                secret_encrypted, created_at, updated_at)
          VALUES (${accountId}, ${input.name}, ${url}, ${JSON.stringify(input.subscription)}::jsonb, ${input.spki_pin ?? null},
                  ${input.include_text_body ?? false}, ${input.include_message_restored ?? false},
                  ${encryptEndpointSecret(secret, config.secret)}, ${at}, ${at})
          RETURNING *`
        return inserted
      })).pipe(Effect.orDie)
      if (row === undefined) {
        return yield* Effect.fail(new WebhookLimitReached({ limit }))
      }
      return { webhook: toWebhook(row), secret }
    })

    /** Abandons what is queued for an endpoint that will get nothing more. */
    const abandonQueued = (webhookId: number) =>
      sql`UPDATE webhook_deliveries SET status = 'abandoned', claimed_at = NULL
          WHERE webhook_id = ${webhookId} AND status IN ('pending', 'delivering')`

    const update = Effect.fn("Webhooks.update")(function*(accountId: number, id: number, input: UpdateWebhook) {
      const url = input.url === undefined ? undefined : yield* validateUrl(input.url)
      const at = yield* now
      return yield* sql.withTransaction(Effect.gen(function*() {
        const row = yield* owned(accountId, id, true)
        const status = input.status ?? row.status
        const reactivated = input.status === "active" && row.status !== "active"
        const [updated] = yield* sql<WebhookRow>`
          UPDATE webhooks SET
            name = ${input.name ?? row.name},
            url = ${url ?? row.url},
            subscription = ${JSON.stringify(input.subscription ?? row.subscription)}::jsonb,
            spki_pin = ${input.spki_pin === undefined ? row.spki_pin : input.spki_pin},
            include_text_body = ${input.include_text_body ?? row.include_text_body},
            include_message_restored = ${input.include_message_restored ?? row.include_message_restored},
            status = ${status},
            disabled_at = ${reactivated ? null : row.disabled_at},
            failure_since = ${reactivated ? null : row.failure_since},
            updated_at = ${at}
          WHERE id = ${id} RETURNING *`.pipe(Effect.orDie)
        if (status !== "active") yield* abandonQueued(id).pipe(Effect.orDie)
        return toWebhook(updated!)
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    const remove = Effect.fn("Webhooks.remove")(function*(accountId: number, id: number) {
      const at = yield* now
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* owned(accountId, id, true)
        yield* sql`UPDATE webhooks SET deleted_at = ${at}, updated_at = ${at} WHERE id = ${id}`.pipe(Effect.orDie)
        yield* abandonQueued(id).pipe(Effect.orDie)
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    const rotateSecret = Effect.fn("Webhooks.rotateSecret")(function*(accountId: number, id: number) {
      const at = yield* now
      const secret = Redacted.make(generateEndpointSecret())
      const row = yield* sql.withTransaction(Effect.gen(function*() {
        yield* owned(accountId, id, true)
        const [updated] = yield* sql<WebhookRow>`
          UPDATE webhooks SET
            previous_secret_encrypted = secret_encrypted,
            previous_secret_expires_at = ${new Date(at.getTime() + SecretOverlapMs)},
            secret_encrypted = ${encryptEndpointSecret(secret, config.secret)},
            secret_version = secret_version + 1,
            updated_at = ${at}
          WHERE id = ${id} RETURNING *`.pipe(Effect.orDie)
        return updated!
      })).pipe(Effect.catchTag("SqlError", Effect.die))
      return { webhook: toWebhook(row), secret }
    })

    const deliveries = Effect.fn("Webhooks.deliveries")(function*(accountId: number, webhookId: number | null, limit: number) {
      if (webhookId !== null) yield* owned(accountId, webhookId)
      const at = yield* now
      const rows = yield* sql<DeliveryRow>`
        SELECT d.id, d.webhook_id, w.name AS webhook_name, d.event_id, d.event_type, d.status, d.attempt_count,
               d.cycle_attempt_count, d.last_http_status, d.last_error, d.latency_ms, d.response_snippet, d.next_attempt_at,
               d.last_attempt_at, d.delivered_at, d.created_at,
               (SELECT json_agg(json_build_object(
                  'attempt', a.attempt, 'status', a.status, 'http_status', a.http_status, 'error_code', a.error_code,
                  'latency_ms', a.latency_ms, 'response_snippet', a.response_snippet, 'attempted_at', a.attempted_at)
                  ORDER BY a.attempt)
                FROM webhook_attempts a WHERE a.delivery_id = d.id) AS attempts
        FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
        WHERE d.account_id = ${accountId} AND d.purged_at IS NULL
          AND d.created_at > ${new Date(at.getTime() - DeliveryRetentionMs)}
          ${webhookId === null ? sql`` : sql`AND d.webhook_id = ${webhookId}`}
        ORDER BY d.id DESC LIMIT ${limit}`.pipe(Effect.orDie)
      return rows.map(toDelivery)
    })

    const queueTest = Effect.fn("Webhooks.queueTest")(function*(accountId: number, id: number) {
      const at = yield* now
      return yield* sql.withTransaction(Effect.gen(function*() {
        const row = yield* owned(accountId, id, true)
        yield* refuseInactive(row, "test")
        const event = { id: eventId(at.getTime()), type: "webhook.test" as const, time: at, data: { endpoint_id: id, message: WebhookTestMessage } }
        yield* sql`
          INSERT INTO events (id, account_id, alias_id, type, time, data, dispatched_at)
          VALUES (${event.id}, ${accountId}, NULL, ${event.type}, ${at}, ${JSON.stringify(event.data)}::jsonb, ${at})`.pipe(Effect.orDie)
        const [delivery] = yield* sql<Omit<DeliveryRow, "webhook_name" | "attempts">>`
          INSERT INTO webhook_deliveries (webhook_id, account_id, event_id, event_type, payload, next_attempt_at, created_at)
          VALUES (${id}, ${accountId}, ${event.id}, ${event.type}, ${envelopeBytes(event)}, ${at}, ${at})
          RETURNING *`.pipe(Effect.orDie)
        return toReceipt(delivery!)
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    const redeliver = Effect.fn("Webhooks.redeliver")(function*(accountId: number, deliveryId: number) {
      const at = yield* now
      return yield* sql.withTransaction(Effect.gen(function*() {
        const rows = yield* sql<{ webhook_id: number; status: DeliveryStatus; created_at: Date; purged: boolean }>`
          SELECT d.webhook_id, d.status, d.created_at, (d.purged_at IS NOT NULL OR d.payload IS NULL) AS purged
          FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
          WHERE d.id = ${deliveryId} AND d.account_id = ${accountId} AND w.deleted_at IS NULL
          FOR UPDATE OF d`.pipe(Effect.orDie)
        const found = rows[0]
        if (found === undefined) return yield* Effect.fail(new DeliveryNotFound({ deliveryId }))
        if (found.purged || found.created_at.getTime() <= at.getTime() - DeliveryRetentionMs) {
          return yield* Effect.fail(new DeliveryPayloadExpired({ deliveryId }))
        }
        const webhook = yield* owned(accountId, found.webhook_id, true)
        yield* refuseInactive(webhook, "redelivery")
        if (found.status === "delivering") {
          return yield* Effect.fail(new DeliveryInProgress({ deliveryId }))
        }
        // Same event id and bytes; a fresh cycle; the attempt history stays.
        const [delivery] = yield* sql<Omit<DeliveryRow, "webhook_name" | "attempts">>`
          UPDATE webhook_deliveries SET status = 'pending', cycle_attempt_count = 0, next_attempt_at = ${at}, claimed_at = NULL
          WHERE id = ${deliveryId} RETURNING *`.pipe(Effect.orDie)
        return toReceipt(delivery!)
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    return Webhooks.of({ list, create, update, remove, rotateSecret, deliveries, queueTest, redeliver })
  }))
}
