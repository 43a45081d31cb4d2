/**
 * Webhook endpoints, their delivery log, tests and redelivery (spec 2.21, 3.3, 4.9, 6.5).
 * Delivery itself is the worker's engine (packages/worker/src/webhooks/Delivery.ts) over the queue of
 * webhooks/Deliveries.ts; this repository writes the rows they work from.
 */
import {
  type ActiveEndpointRequest,
  DeliveryEventType,
  DeliveryInProgress,
  DeliveryNotFound,
  DeliveryPayloadExpired,
  DeliveryRetentionMs,
  DeliveryStatus,
  envelopeBytes,
  eventId,
  SecretOverlapMs,
  WebhookInactive,
  WebhookLimitReached,
  WebhookNotFound,
  WebhookUrlRefused,
  type CreateWebhook,
  type DeliveryAttempt,
  type UpdateWebhook,
  type Webhook,
  type WebhookDelivery,
  WebhookDeliveryReceipt,
  WebhookStatus,
  WebhookSubscription
} from "@burnbox/domain"
import { decodeEndpointSecret, decryptPrivateKey, encryptPrivateKey, generateEndpointSecret } from "@burnbox/domain/webhooks/index"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { BurnboxConfig } from "../platform/Config.ts"
import { checkTarget } from "../platform/OutboundHttp.ts"
import { pgJson } from "../platform/PgText.ts"
import { CountRow, IntFromInt8, IsoFromDate } from "../platform/Rows.ts"
import { now } from "../platform/Time.ts"
import { Entitlements } from "../plans/Entitlements.ts"

// ---------------------------------------------------------------------------------------------
// Endpoint secrets at rest

/** The endpoint secret, encrypted under BURNBOX_SECRET (the HMAC needs it back, so no digest). */
export const encryptEndpointSecret = (secret: Redacted.Redacted<string>, serverSecret: Redacted.Redacted<string>): string =>
  encryptPrivateKey(decodeEndpointSecret(Redacted.value(secret)), Redacted.value(serverSecret))

export const decryptEndpointSecret = (stored: string, serverSecret: Redacted.Redacted<string>): Redacted.Redacted<string> =>
  Redacted.make(`whsec_${Buffer.from(decryptPrivateKey(stored, Redacted.value(serverSecret))).toString("base64")}`)

// ---------------------------------------------------------------------------------------------
// Rows

/** An endpoint as stored (`SELECT *`), secrets encrypted. */
export const WebhookRow = Schema.Struct({
  id: Schema.Int,
  account_id: Schema.Int,
  name: Schema.String,
  url: Schema.String,
  subscription: WebhookSubscription,
  spki_pin: Schema.NullOr(Schema.String),
  include_text_body: Schema.Boolean,
  include_message_restored: Schema.Boolean,
  status: WebhookStatus,
  failure_count: Schema.Int,
  secret_version: Schema.Int,
  secret_encrypted: Schema.String,
  previous_secret_encrypted: Schema.NullOr(Schema.String),
  previous_secret_expires_at: Schema.NullOr(Schema.Date),
  last_success_at: Schema.NullOr(Schema.Date),
  last_failure_at: Schema.NullOr(Schema.Date),
  failure_since: Schema.NullOr(Schema.Date),
  disabled_at: Schema.NullOr(Schema.Date),
  created_at: Schema.Date,
  updated_at: Schema.Date
})
export type WebhookRow = typeof WebhookRow.Type

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

/** An attempt as the delivery log's `json_agg` writes it (the time as PostgreSQL prints a timestamptz in JSON). */
const AttemptJson = Schema.Struct({
  attempt: Schema.Int,
  status: Schema.Literals(["succeeded", "failed"]),
  http_status: Schema.NullOr(Schema.Int),
  error_code: Schema.NullOr(Schema.String),
  latency_ms: Schema.Int,
  response_snippet: Schema.NullOr(Schema.String),
  attempted_at: Schema.String
})

/** A delivery with its endpoint's name and its attempts, as the log reads it. */
const DeliveryRow = Schema.Struct({
  id: IntFromInt8,
  webhook_id: Schema.Int,
  webhook_name: Schema.String,
  event_id: Schema.String,
  event_type: DeliveryEventType,
  status: DeliveryStatus,
  attempt_count: Schema.Int,
  cycle_attempt_count: Schema.Int,
  last_http_status: Schema.NullOr(Schema.Int),
  last_error: Schema.NullOr(Schema.String),
  latency_ms: Schema.NullOr(Schema.Int),
  response_snippet: Schema.NullOr(Schema.String),
  next_attempt_at: Schema.Date,
  last_attempt_at: Schema.NullOr(Schema.Date),
  delivered_at: Schema.NullOr(Schema.Date),
  created_at: Schema.Date,
  attempts: Schema.NullOr(Schema.Array(AttemptJson))
})
type DeliveryRow = typeof DeliveryRow.Type

/** A delivery row (`RETURNING *`) is the WebhookDeliveryReceipt resource. */
const ReceiptRow = Schema.Struct({
  ...WebhookDeliveryReceipt.fields,
  id: IntFromInt8,
  nextAttemptAt: IsoFromDate,
  createdAt: IsoFromDate
}).pipe(Schema.encodeKeys({
  webhookId: "webhook_id",
  eventId: "event_id",
  eventType: "event_type",
  attemptCount: "attempt_count",
  cycleAttemptCount: "cycle_attempt_count",
  nextAttemptAt: "next_attempt_at",
  createdAt: "created_at"
}))

/** What redelivery checks of a delivery. */
const RedeliverableRow = Schema.Struct({ webhook_id: Schema.Int, status: DeliveryStatus, created_at: Schema.Date, purged: Schema.Boolean })

const toDelivery = (row: DeliveryRow): WebhookDelivery => ({
  id: row.id,
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

/** Tests and redelivery go only to an active endpoint. */
const refuseInactive = (row: WebhookRow, refused: ActiveEndpointRequest) =>
  row.status === "active"
    ? Effect.void
    : Effect.fail(new WebhookInactive({ webhookId: row.id, status: row.status, refused }))

export const WebhookTestMessage = "This is a test event from burnbox."

export class Webhooks extends Context.Service<Webhooks, {
  readonly list: (accountId: number) => Effect.Effect<ReadonlyArray<Webhook>>
  /** The account's endpoints and its plan's maximum of them (GET /webhooks, spec 2.21 WebhookList). */
  readonly listWithLimit: (accountId: number) => Effect.Effect<{ readonly items: ReadonlyArray<Webhook>; readonly limit: number }>
  /** A new endpoint, within the plan's `webhookCount`; its secret is returned once. */
  readonly create: (accountId: number, input: CreateWebhook) =>
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
    const entitlements = yield* Entitlements

    const ownedRow = SqlSchema.findOneOption({
      Request: Schema.Struct({ accountId: Schema.Int, id: Schema.Int, lock: Schema.Boolean }),
      Result: WebhookRow,
      execute: ({ accountId, id, lock }) =>
        sql`
        SELECT * FROM webhooks WHERE id = ${id} AND account_id = ${accountId} AND deleted_at IS NULL
        ${lock ? sql`FOR NO KEY UPDATE` : sql``}`
    })
    const owned = (accountId: number, id: number, lock = false) =>
      ownedRow({ accountId, id, lock }).pipe(
        Effect.orDie,
        Effect.flatMap((row) => (Option.isSome(row) ? Effect.succeed(row.value) : Effect.fail(new WebhookNotFound({ webhookId: id }))))
      )

    /** The URL's rules and its DNS answer; a refusal names the rule. */
    const validateUrl = (raw: string) =>
      Effect.gen(function*() {
        const checked = yield* checkTarget(raw, config.webhookAllowPrivate)
        if (!checked.ok) return yield* Effect.fail(new WebhookUrlRefused({ reason: checked.reason }))
        return checked.url.href
      })

    const ofAccount = SqlSchema.findAll({
      Request: Schema.Int,
      Result: WebhookRow,
      execute: (accountId) => sql`
        SELECT * FROM webhooks WHERE account_id = ${accountId} AND deleted_at IS NULL ORDER BY id`
    })
    const list = Effect.fn("Webhooks.list")(function*(accountId: number) {
      const rows = yield* ofAccount(accountId).pipe(Effect.orDie)
      return rows.map(toWebhook)
    })

    const countOf = SqlSchema.findOne({
      Request: Schema.Int,
      Result: CountRow,
      execute: (accountId) => sql`
          SELECT count(*)::int AS n FROM webhooks WHERE account_id = ${accountId} AND deleted_at IS NULL`
    })
    /** What an endpoint's owner sets, as created and as changed. */
    const settingFields = {
      name: Schema.String,
      url: Schema.String,
      subscription: WebhookSubscription,
      spkiPin: Schema.NullOr(Schema.String),
      includeTextBody: Schema.Boolean,
      includeMessageRestored: Schema.Boolean,
      at: Schema.Date
    }
    const insert = SqlSchema.findOne({
      Request: Schema.Struct({ ...settingFields, accountId: Schema.Int, secretEncrypted: Schema.String }),
      Result: WebhookRow,
      execute: (endpoint) => sql`
          INSERT INTO webhooks (account_id, name, url, subscription, spki_pin, include_text_body, include_message_restored,
                                secret_encrypted, created_at, updated_at)
          VALUES (${endpoint.accountId}, ${endpoint.name}, ${endpoint.url}, ${pgJson(endpoint.subscription)}::jsonb, ${endpoint.spkiPin},
                  ${endpoint.includeTextBody}, ${endpoint.includeMessageRestored},
                  ${endpoint.secretEncrypted}, ${endpoint.at}, ${endpoint.at})
          RETURNING *`
    })

    const create = Effect.fn("Webhooks.create")(function*(accountId: number, input: CreateWebhook) {
      const url = yield* validateUrl(input.url)
      const at = yield* now
      const secret = Redacted.make(generateEndpointSecret())
      let limit = 0
      const row = yield* sql.withTransaction(Effect.gen(function*() {
        // Serialise creations per account so the count cannot be raced past the limit.
        limit = (yield* entitlements.lock(accountId)).webhookCount
        const count = yield* countOf(accountId)
        if (count.n >= limit) return undefined
        return yield* insert({
          accountId,
          name: input.name,
          url,
          subscription: input.subscription,
          spkiPin: input.spki_pin ?? null,
          includeTextBody: input.include_text_body ?? false,
          includeMessageRestored: input.include_message_restored ?? false,
          secretEncrypted: encryptEndpointSecret(secret, config.secret),
          at
        })
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

    const write = SqlSchema.findOne({
      Request: Schema.Struct({
        ...settingFields,
        id: Schema.Int,
        status: WebhookStatus,
        disabledAt: Schema.NullOr(Schema.Date),
        failureSince: Schema.NullOr(Schema.Date)
      }),
      Result: WebhookRow,
      execute: (endpoint) => sql`
          UPDATE webhooks SET
            name = ${endpoint.name},
            url = ${endpoint.url},
            subscription = ${pgJson(endpoint.subscription)}::jsonb,
            spki_pin = ${endpoint.spkiPin},
            include_text_body = ${endpoint.includeTextBody},
            include_message_restored = ${endpoint.includeMessageRestored},
            status = ${endpoint.status},
            disabled_at = ${endpoint.disabledAt},
            failure_since = ${endpoint.failureSince},
            updated_at = ${endpoint.at}
          WHERE id = ${endpoint.id} RETURNING *`
    })

    const update = Effect.fn("Webhooks.update")(function*(accountId: number, id: number, input: UpdateWebhook) {
      const url = input.url === undefined ? undefined : yield* validateUrl(input.url)
      const at = yield* now
      return yield* sql.withTransaction(Effect.gen(function*() {
        const row = yield* owned(accountId, id, true)
        const status = input.status ?? row.status
        const reactivated = input.status === "active" && row.status !== "active"
        const updated = yield* write({
          id,
          name: input.name ?? row.name,
          url: url ?? row.url,
          subscription: input.subscription ?? row.subscription,
          spkiPin: input.spki_pin === undefined ? row.spki_pin : input.spki_pin,
          includeTextBody: input.include_text_body ?? row.include_text_body,
          includeMessageRestored: input.include_message_restored ?? row.include_message_restored,
          status,
          disabledAt: reactivated ? null : row.disabled_at,
          failureSince: reactivated ? null : row.failure_since,
          at
        }).pipe(Effect.orDie)
        if (status !== "active") yield* abandonQueued(id).pipe(Effect.orDie)
        return toWebhook(updated)
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

    const rotate = SqlSchema.findOne({
      Request: Schema.Struct({ id: Schema.Int, previousExpiresAt: Schema.Date, secretEncrypted: Schema.String, at: Schema.Date }),
      Result: WebhookRow,
      execute: ({ at, id, previousExpiresAt, secretEncrypted }) => sql`
          UPDATE webhooks SET
            previous_secret_encrypted = secret_encrypted,
            previous_secret_expires_at = ${previousExpiresAt},
            secret_encrypted = ${secretEncrypted},
            secret_version = secret_version + 1,
            updated_at = ${at}
          WHERE id = ${id} RETURNING *`
    })

    const rotateSecret = Effect.fn("Webhooks.rotateSecret")(function*(accountId: number, id: number) {
      const at = yield* now
      const secret = Redacted.make(generateEndpointSecret())
      const row = yield* sql.withTransaction(Effect.gen(function*() {
        yield* owned(accountId, id, true)
        return yield* rotate({
          id,
          previousExpiresAt: new Date(at.getTime() + SecretOverlapMs),
          secretEncrypted: encryptEndpointSecret(secret, config.secret),
          at
        }).pipe(Effect.orDie)
      })).pipe(Effect.catchTag("SqlError", Effect.die))
      return { webhook: toWebhook(row), secret }
    })

    const deliveryLog = SqlSchema.findAll({
      Request: Schema.Struct({ accountId: Schema.Int, since: Schema.Date, webhookId: Schema.NullOr(Schema.Int), limit: Schema.Int }),
      Result: DeliveryRow,
      execute: ({ accountId, limit, since, webhookId }) => sql`
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
          AND d.created_at > ${since}
          ${webhookId === null ? sql`` : sql`AND d.webhook_id = ${webhookId}`}
        ORDER BY d.id DESC LIMIT ${limit}`
    })

    const deliveries = Effect.fn("Webhooks.deliveries")(function*(accountId: number, webhookId: number | null, limit: number) {
      if (webhookId !== null) yield* owned(accountId, webhookId)
      const at = yield* now
      const rows = yield* deliveryLog({ accountId, since: new Date(at.getTime() - DeliveryRetentionMs), webhookId, limit }).pipe(Effect.orDie)
      return rows.map(toDelivery)
    })

    const insertDelivery = SqlSchema.findOne({
      Request: Schema.Struct({
        webhookId: Schema.Int,
        accountId: Schema.Int,
        eventId: Schema.String,
        eventType: DeliveryEventType,
        payload: Schema.Uint8Array,
        at: Schema.Date
      }),
      Result: ReceiptRow,
      execute: (delivery) => sql`
          INSERT INTO webhook_deliveries (webhook_id, account_id, event_id, event_type, payload, next_attempt_at, created_at)
          VALUES (${delivery.webhookId}, ${delivery.accountId}, ${delivery.eventId}, ${delivery.eventType}, ${delivery.payload}, ${delivery.at}, ${delivery.at})
          RETURNING *`
    })

    const queueTest = Effect.fn("Webhooks.queueTest")(function*(accountId: number, id: number) {
      const at = yield* now
      return yield* sql.withTransaction(Effect.gen(function*() {
        const row = yield* owned(accountId, id, true)
        yield* refuseInactive(row, "test")
        const event = { id: eventId(at.getTime()), type: "webhook.test" as const, time: at, data: { endpoint_id: id, message: WebhookTestMessage } }
        yield* sql`
          INSERT INTO events (id, account_id, alias_id, type, time, data, dispatched_at)
          VALUES (${event.id}, ${accountId}, NULL, ${event.type}, ${at}, ${pgJson(event.data)}::jsonb, ${at})`.pipe(Effect.orDie)
        return yield* insertDelivery({
          webhookId: id,
          accountId,
          eventId: event.id,
          eventType: event.type,
          payload: envelopeBytes(event),
          at
        }).pipe(Effect.orDie)
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    const redeliverable = SqlSchema.findOneOption({
      Request: Schema.Struct({ deliveryId: Schema.Int, accountId: Schema.Int }),
      Result: RedeliverableRow,
      execute: ({ accountId, deliveryId }) => sql`
          SELECT d.webhook_id, d.status, d.created_at, (d.purged_at IS NOT NULL OR d.payload IS NULL) AS purged
          FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
          WHERE d.id = ${deliveryId} AND d.account_id = ${accountId} AND w.deleted_at IS NULL
          FOR UPDATE OF d`
    })
    const restart = SqlSchema.findOne({
      Request: Schema.Struct({ deliveryId: Schema.Int, at: Schema.Date }),
      Result: ReceiptRow,
      execute: ({ at, deliveryId }) => sql`
          UPDATE webhook_deliveries SET status = 'pending', cycle_attempt_count = 0, next_attempt_at = ${at}, claimed_at = NULL
          WHERE id = ${deliveryId} RETURNING *`
    })

    const redeliver = Effect.fn("Webhooks.redeliver")(function*(accountId: number, deliveryId: number) {
      const at = yield* now
      return yield* sql.withTransaction(Effect.gen(function*() {
        const found = Option.getOrUndefined(yield* redeliverable({ deliveryId, accountId }).pipe(Effect.orDie))
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
        return yield* restart({ deliveryId, at }).pipe(Effect.orDie)
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    const listWithLimit = Effect.fn("Webhooks.listWithLimit")(function*(accountId: number) {
      const [items, plan] = yield* Effect.all([list(accountId), entitlements.of(accountId)], { concurrency: 2 })
      return { items, limit: plan.webhookCount }
    })

    return Webhooks.of({ list, listWithLimit, create, update, remove, rotateSecret, deliveries, queueTest, redeliver })
  }))
}
