import { Schema } from "effect"
import { DateTimeString, Id, NonNegativeInt } from "./Common.ts"
import { DomainTier } from "./MailDomain.ts"

export const AliasStyle = Schema.Literals(["words", "pronounceable", "numeric"])
export const AliasStatus = Schema.Literals(["active", "paused", "burned"])
export const AliasRole = Schema.Literals(["owner", "collaborator", "viewer"])

/** Spec 2.7. */
export const Alias = Schema.Struct({
  canSend: Schema.optionalKey(Schema.Boolean),
  id: Id,
  address: Schema.String,
  localPart: Schema.String,
  domain: Schema.Struct({
    id: Id,
    name: Schema.String,
    state: Schema.Literals(["active", "closed", "draining", "retired"])
  }),
  style: AliasStyle,
  status: AliasStatus,
  label: Schema.NullOr(Schema.String),
  note: Schema.NullOr(Schema.String),
  receivedCount: NonNegativeInt,
  rejectedCount: NonNegativeInt,
  unreadCount: NonNegativeInt,
  storageUsedBytes: NonNegativeInt,
  pushEnabled: Schema.Boolean,
  lastReceivedAt: Schema.NullOr(DateTimeString),
  claimedAt: Schema.NullOr(DateTimeString),
  pausedAt: Schema.NullOr(DateTimeString),
  burnedAt: Schema.NullOr(DateTimeString),
  planPaused: Schema.Boolean,
  selfDestructAt: Schema.NullOr(DateTimeString),
  selfDestructSuspended: Schema.Boolean,
  expiringNotifiedAt: Schema.NullOr(DateTimeString),
  domainTier: DomainTier,
  role: AliasRole,
  shared: Schema.Boolean,
  ownerHandle: Schema.NullOr(Schema.String),
  guestCount: NonNegativeInt,
  trash: Schema.Struct({ enabled: Schema.Boolean, retentionDays: NonNegativeInt })
}).annotate({ identifier: "Alias" })
export type Alias = typeof Alias.Type
