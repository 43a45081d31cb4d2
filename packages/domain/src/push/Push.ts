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
