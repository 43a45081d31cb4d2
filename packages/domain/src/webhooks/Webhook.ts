/**
 * Webhook resources (spec 2.21, 4.9) and the pure rules of delivery (spec 6, decisions.md
 * "Webhook subscriptions"): which endpoint an event goes to, the envelope, the retry schedule.
 * Request bodies are snake_case (spki_pin, include_text_body, ...); the Webhook resource is
 * camelCase, exactly as the spec writes them.
 */
import { Schema } from "effect"
import { DateTimeString, Id, NonNegativeInt, PageLimit } from "../platform/Common.ts"
import { ApiVersion, type EventType } from "./Events.ts"

export { payloadTextBody, TextBodyMaxChars } from "./textBody.ts"

// ---------------------------------------------------------------------------------------------
// Subscription: exactly one of five modes, each with its own fields

export const WebhookSubscription = Schema.Union([
  Schema.Struct({ mode: Schema.Literal("all") }),
  Schema.Struct({
    mode: Schema.Literal("aliases"),
    alias_ids: Schema.Array(Id).check(Schema.isMinLength(1), Schema.isMaxLength(100), Schema.isUnique())
  }),
  Schema.Struct({ mode: Schema.Literal("label"), label: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(160)) }),
  Schema.Struct({ mode: Schema.Literal("tag"), tag_id: Id }),
  Schema.Struct({ mode: Schema.Literal("otp") })
]).annotate({ identifier: "WebhookSubscription" })
export type WebhookSubscription = typeof WebhookSubscription.Type

export const SpkiPinPattern = /^sha256\/[A-Za-z0-9+/]{43}=$/
export const SpkiPin = Schema.String.check(Schema.isPattern(SpkiPinPattern, { message: "invalid_spki_pin" }))

export const WebhookStatus = Schema.Literals(["active", "paused", "disabled"])
export type WebhookStatus = typeof WebhookStatus.Type

const WebhookName = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(80))
/** The URL's rules (https, port 443, no credentials, public address) are checked by the service. */
const WebhookUrl = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(2048)).annotate({ format: "uri" })

/** Spec 2.21. */
export const Webhook = Schema.Struct({
  id: Id,
  name: Schema.String,
  url: Schema.String.annotate({ format: "uri" }),
  subscription: WebhookSubscription,
  spkiPin: Schema.NullOr(Schema.String),
  includeTextBody: Schema.Boolean,
  includeMessageRestored: Schema.Boolean,
  status: WebhookStatus,
  failureCount: NonNegativeInt,
  secretVersion: Id,
  lastSuccessAt: Schema.NullOr(DateTimeString),
  lastFailureAt: Schema.NullOr(DateTimeString),
  failureSince: Schema.NullOr(DateTimeString),
  disabledAt: Schema.NullOr(DateTimeString),
  createdAt: DateTimeString,
  updatedAt: DateTimeString
}).annotate({ identifier: "Webhook" })
export type Webhook = typeof Webhook.Type

export const WebhookList = Schema.Struct({ items: Schema.Array(Webhook), limit: NonNegativeInt }).annotate({ identifier: "WebhookList" })

export const WebhookWithSecret = Schema.Struct({
  webhook: Webhook,
  secret: Schema.String,
  secretShownOnce: Schema.Literal(true)
}).annotate({ identifier: "WebhookWithSecret" })
export type WebhookWithSecret = typeof WebhookWithSecret.Type

export const CreateWebhook = Schema.Struct({
  name: WebhookName,
  url: WebhookUrl,
  subscription: WebhookSubscription,
  spki_pin: Schema.optionalKey(Schema.NullOr(SpkiPin)),
  include_text_body: Schema.optionalKey(Schema.Boolean),
  include_message_restored: Schema.optionalKey(Schema.Boolean)
})
export type CreateWebhook = typeof CreateWebhook.Type

export const UpdateWebhook = Schema.Struct({
  name: Schema.optionalKey(WebhookName),
  url: Schema.optionalKey(WebhookUrl),
  subscription: Schema.optionalKey(WebhookSubscription),
  spki_pin: Schema.optionalKey(Schema.NullOr(SpkiPin)),
  include_text_body: Schema.optionalKey(Schema.Boolean),
  include_message_restored: Schema.optionalKey(Schema.Boolean),
  status: Schema.optionalKey(Schema.Literals(["active", "paused"]))
})
export type UpdateWebhook = typeof UpdateWebhook.Type

// ---------------------------------------------------------------------------------------------
// Deliveries

export const EventIdString = Schema.String.check(Schema.isPattern(/^evt_[0-9A-HJKMNP-TV-Z]{26}$/u))

/** The logged event types; `message.restored` is the additive value of decisions.md. */
export const DeliveryEventType = Schema.Literals([
  "message.received",
  "message.otp_extracted",
  "alias.claimed",
  "alias.paused",
  "alias.burned",
  "alias.expiring",
  "webhook.test",
  "message.restored"
])

export const DeliveryStatus = Schema.Literals(["pending", "delivering", "succeeded", "failed", "abandoned"])
export type DeliveryStatus = typeof DeliveryStatus.Type

export const DeliveryAttempt = Schema.Struct({
  attempt: Id,
  status: Schema.Literals(["succeeded", "failed"]),
  httpStatus: Schema.NullOr(Schema.Int),
  errorCode: Schema.NullOr(Schema.String),
  latencyMs: NonNegativeInt,
  responseSnippet: Schema.NullOr(Schema.String),
  attemptedAt: DateTimeString
}).annotate({ identifier: "WebhookDeliveryAttempt" })
export type DeliveryAttempt = typeof DeliveryAttempt.Type

/** Spec 2.21: the four log timestamps are database timestamp text, not RFC 3339. */
export const WebhookDelivery = Schema.Struct({
  id: Id,
  webhookId: Id,
  webhookName: Schema.String,
  eventId: EventIdString,
  eventType: DeliveryEventType,
  status: DeliveryStatus,
  attemptCount: NonNegativeInt,
  cycleAttemptCount: NonNegativeInt,
  lastHttpStatus: Schema.NullOr(Schema.Int),
  lastError: Schema.NullOr(Schema.String),
  latencyMs: Schema.NullOr(Schema.Int),
  responseSnippet: Schema.NullOr(Schema.String),
  nextAttemptAt: Schema.String,
  lastAttemptAt: Schema.NullOr(Schema.String),
  deliveredAt: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  attempts: Schema.Array(DeliveryAttempt)
}).annotate({ identifier: "WebhookDelivery" })
export type WebhookDelivery = typeof WebhookDelivery.Type

export const WebhookDeliveryPage = Schema.Struct({ items: Schema.Array(WebhookDelivery) }).annotate({ identifier: "WebhookDeliveryPage" })

export const WebhookDeliveryReceipt = Schema.Struct({
  id: Id,
  webhookId: Id,
  eventId: EventIdString,
  eventType: DeliveryEventType,
  status: DeliveryStatus,
  attemptCount: NonNegativeInt,
  cycleAttemptCount: NonNegativeInt,
  nextAttemptAt: DateTimeString,
  createdAt: DateTimeString
}).annotate({ identifier: "WebhookDeliveryReceipt" })
export type WebhookDeliveryReceipt = typeof WebhookDeliveryReceipt.Type

export const WebhookDeliveryQueued = Schema.Struct({ delivery: WebhookDeliveryReceipt }).annotate({ identifier: "WebhookDeliveryQueued" })

export const DeliveriesQuery = {
  limit: Schema.optionalKey(PageLimit)
}

// ---------------------------------------------------------------------------------------------
// Delivery rules

/** Spec 6.5.2: the wait before each retry, in seconds; eight attempts in all. */
export const RetryScheduleSeconds: ReadonlyArray<number> = [60, 300, 1800, 7200, 21600, 43200, 86400]
export const MaxDeliveryAttempts = RetryScheduleSeconds.length + 1
/** The spread of a retry around its scheduled wait (plus or minus). */
export const RetryJitter = 0.1
/** Spec 6.5.3: an endpoint with only failures for this long is disabled. */
export const DisableAfterFailingMs = 3 * 24 * 60 * 60 * 1000
/** Spec 6.5.5. */
export const DeliveryRetentionMs = 30 * 24 * 60 * 60 * 1000
/** After a secret rotation, the old secret keeps signing this long. */
export const SecretOverlapMs = 24 * 60 * 60 * 1000
export const DeliveryTimeoutMs = 15_000

/**
 * The wait before the next attempt after `cycleAttempts` failed attempts in this cycle, or
 * null when the cycle is spent. `random` in [0, 1) places it within the jitter.
 */
export const retryDelayMs = (cycleAttempts: number, random: number): number | null => {
  const base = RetryScheduleSeconds[cycleAttempts - 1]
  if (base === undefined || cycleAttempts < 1) return null
  return Math.round(base * 1000 * (1 - RetryJitter + 2 * RetryJitter * random))
}

/** Spec 6.5.2: which failures are worth another attempt. */
export const isRetryableStatus = (status: number): boolean => status === 429 || (status >= 500 && status <= 599)

/** What a stored endpoint needs for event selection. */
export interface SubscriptionTarget {
  readonly subscription: WebhookSubscription
  readonly includeMessageRestored: boolean
}

/** What selection needs to know of an event. */
export interface SelectableEvent {
  readonly type: EventType
  readonly aliasId: number | null
  /** The alias label at event time (from the event's data). */
  readonly aliasLabel: string | null
  /** Tags the event's message carries (message events only). */
  readonly messageTagIds: ReadonlyArray<number>
}

const standardTypes: ReadonlySet<EventType> = new Set([
  "message.received",
  "message.otp_extracted",
  "alias.claimed",
  "alias.paused",
  "alias.burned",
  "alias.expiring"
])
const messageTypes: ReadonlySet<EventType> = new Set(["message.received", "message.otp_extracted"])

const foldCase = (text: string): string => text.toLocaleLowerCase("und")

/** decisions.md "Webhook subscriptions: which events each mode selects". `webhook.test` is never selected here. */
export const selectsEvent = (target: SubscriptionTarget, event: SelectableEvent): boolean => {
  const restored = event.type === "message.restored"
  if (restored && !target.includeMessageRestored) return false
  const sub = target.subscription
  switch (sub.mode) {
    case "all":
      return restored || standardTypes.has(event.type)
    case "aliases":
      return (restored || standardTypes.has(event.type)) && event.aliasId !== null && sub.alias_ids.includes(event.aliasId)
    case "label":
      return (restored || standardTypes.has(event.type)) && event.aliasLabel !== null &&
        foldCase(event.aliasLabel) === foldCase(sub.label)
    case "tag":
      return (restored || messageTypes.has(event.type)) && event.messageTagIds.includes(sub.tag_id)
    case "otp":
      return restored || event.type === "message.otp_extracted"
  }
}

/**
 * Spec 6.2: the envelope, serialized once; these exact bytes are what every attempt sends. `shared`
 * for a guest's endpoint on a mailbox another account shared with it (spec 6.5, rule 6).
 */
export const envelopeBytes = (event: {
  readonly id: string
  readonly type: EventType
  readonly time: Date
  readonly data: Record<string, unknown>
}, shared?: { readonly ownerHandle: string }): Uint8Array =>
  new TextEncoder().encode(JSON.stringify({
    id: event.id,
    type: event.type,
    time: event.time.toISOString(),
    api_version: ApiVersion,
    shared_mailbox: shared !== undefined,
    owner_handle: shared?.ownerHandle ?? null,
    data: event.data
  }))
