import { Schema } from "effect"
import { Id } from "../platform/Common.ts"

/** Spec 2.20. Timestamps here are database timestamp text, not RFC 3339. */
export const PushSettings = Schema.Struct({
  enabled: Schema.Boolean,
  nudgeDismissed: Schema.Boolean,
  publicKey: Schema.NullOr(Schema.String),
  subscriptions: Schema.Array(Schema.Struct({
    id: Id,
    endpointHash: Schema.String.check(Schema.isPattern(/^[0-9a-f]{64}$/u)),
    createdAt: Schema.String,
    lastSuccessAt: Schema.NullOr(Schema.String)
  }))
}).annotate({ identifier: "PushSettings" })
export type PushSettings = typeof PushSettings.Type

/** Spec 2.20. */
export const PushSubscription = Schema.Struct({ id: Id, enabled: Schema.Boolean }).annotate({ identifier: "PushSubscription" })
export type PushSubscription = typeof PushSubscription.Type

/** The content encodings a subscription may ask for (RFC 8291 aes128gcm, the older aesgcm). */
export const PushContentEncoding = Schema.Literals(["aes128gcm", "aesgcm"])
export type PushContentEncoding = typeof PushContentEncoding.Type

/** POST /push/subscriptions (spec 4.1): what the browser's PushSubscription.toJSON() gives. */
export const CreatePushSubscription = Schema.Struct({
  endpoint: Schema.String.check(Schema.isPattern(/^https:\/\//u)),
  contentEncoding: Schema.optionalKey(PushContentEncoding),
  keys: Schema.Struct({ p256dh: Schema.String, auth: Schema.String })
}).annotate({ identifier: "CreatePushSubscription" })
export type CreatePushSubscription = typeof CreatePushSubscription.Type

/** PUT /push/settings and PUT /push/aliases/{id}. */
export const PushEnabledInput = Schema.Struct({ enabled: Schema.Boolean }).annotate({ identifier: "PushEnabledInput" })

/** POST /push/subscriptions/{id}/test: queued, never sent in the request (`sent` is a deprecated compatibility flag). */
export const PushTestQueued = Schema.Struct({ queued: Schema.Literal(true), sent: Schema.Literal(true) }).annotate({ identifier: "PushTestQueued" })

/** What a push carries (decisions.md "Browser push"): never the body. */
export interface PushPayload {
  readonly type: "message" | "test"
  readonly messageId: number | null
  readonly alias: string | null
  readonly from: string | null
  readonly subject: string | null
  readonly otp: string | null
}
