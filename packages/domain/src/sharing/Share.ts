/**
 * Sharing a mailbox (spec 2.7, 2.17, 4.4; decisions.md, "Sharing a mailbox"): the owner invites an
 * existing account by email with a role, the guest accepts or declines, and only an accepted
 * share reaches the mailbox. The other side only ever sees an account's pseudonymous handle.
 */
import { Schema } from "effect"
import { DateTimeString, Email, Id, IdFromPath } from "../platform/Common.ts"
import type { WebhookSubscription } from "../webhooks/Webhook.ts"

/** How a guest reaches a shared mailbox: `viewer` reads it; `collaborator` may also delete, restore and empty the trash. */
export const ShareRole = Schema.Literals(["collaborator", "viewer"])
export type ShareRole = typeof ShareRole.Type

/** A share as its owner sees it: invited (pending), live (active) or held by the owner's plan (suspended). */
export const ShareStatus = Schema.Literals(["pending", "active", "suspended"])
export type ShareStatus = typeof ShareStatus.Type

/** Decisions.md: the owner's view of one share. The guest's email never appears in it. */
export const Share = Schema.Struct({
  id: Id,
  guestHandle: Schema.String,
  role: ShareRole,
  status: ShareStatus,
  createdAt: DateTimeString,
  acceptedAt: Schema.NullOr(DateTimeString)
}).annotate({ identifier: "Share" })
export type Share = typeof Share.Type

/** Decisions.md: a pending invitation as the invited account sees it. */
export const ShareInvitation = Schema.Struct({
  id: Id,
  aliasAddress: Schema.String,
  ownerHandle: Schema.String,
  role: ShareRole,
  createdAt: DateTimeString
}).annotate({ identifier: "ShareInvitation" })
export type ShareInvitation = typeof ShareInvitation.Type

export const CreateShare = Schema.Struct({ email: Email, role: ShareRole })
export const UpdateShare = Schema.Struct({ role: ShareRole })

export const ShareParams = { id: IdFromPath, shareId: IdFromPath }

/** Spec 2.17: the owner's view of one guest webhook or guest API token reaching its mailbox. */
export const ShareGrant = Schema.Struct({
  kind: Schema.Literals(["webhook", "api_token"]),
  webhookId: Schema.NullOr(Id),
  apiTokenId: Schema.NullOr(Id),
  guestHandle: Schema.NullOr(Schema.String),
  endpointHost: Schema.NullOr(Schema.String),
  createdAt: DateTimeString,
  revokedAt: Schema.NullOr(DateTimeString),
  revokedBy: Schema.NullOr(Schema.Literals(["owner", "guest", "system"])),
  isNewToOwner: Schema.Boolean,
  deliveryStatus: Schema.NullOr(Schema.Literals(["active", "paused", "disabled"])),
  lastSuccessAt: Schema.NullOr(DateTimeString),
  lastFailureAt: Schema.NullOr(DateTimeString),
  lastUsedAt: Schema.NullOr(DateTimeString)
}).annotate({ identifier: "ShareGrant" })
export type ShareGrant = typeof ShareGrant.Type

/** Spec 2.17: why a guest's access stopped. */
export const RevokedReason = Schema.Literals(["owner_revoked", "share_suspended", "share_ended", "guest_left"])
export type RevokedReason = typeof RevokedReason.Type

/** Spec 2.17: the guest's view of access that stopped. */
export const RevokedShareGrant = Schema.Struct({
  aliasId: Id,
  aliasAddress: Schema.NullOr(Schema.String),
  ownerHandle: Schema.NullOr(Schema.String),
  reason: RevokedReason,
  reversible: Schema.Boolean,
  kind: Schema.Literals(["webhook", "api_token", "share"]),
  webhookId: Schema.NullOr(Id),
  apiTokenId: Schema.NullOr(Id),
  endpointHost: Schema.NullOr(Schema.String),
  endedAt: Schema.NullOr(DateTimeString),
  revokedAt: Schema.NullOr(DateTimeString),
  revokedBy: Schema.NullOr(Schema.Literals(["owner", "guest", "system"]))
}).annotate({ identifier: "RevokedShareGrant" })
export type RevokedShareGrant = typeof RevokedShareGrant.Type

/** At most five guests (pending or accepted) per mailbox. */
export const MaxGuestsPerMailbox = 5

/** A handle: `word-word-NNNN`, lowercase words of the alias word list and four digits. */
export const HandlePattern = /^[a-z]{3,8}-[a-z]{3,8}-\d{4}$/u

/** A handle from two words and a number below 10000 (the store draws them and keeps handles unique). */
export const makeHandle = (first: string, second: string, number: number): string =>
  `${first}-${second}-${String(number % 10_000).padStart(4, "0")}`

/** The path's name of a grant's kind (spec 4.4): `webhooks` or `api-tokens`. */
export const ShareGrantKindPath = Schema.Literals(["webhooks", "api-tokens"])
export type ShareGrantKindPath = typeof ShareGrantKindPath.Type
export const ShareGrantParams = { id: IdFromPath, kind: ShareGrantKindPath, subjectId: IdFromPath }

/**
 * Whether a guest's endpoint reaches a shared mailbox: it can select the mailbox's events as the
 * guest sees them. `label` never does (a guest sees no label on a mailbox it does not own).
 */
export const subscriptionReaches = (subscription: WebhookSubscription, aliasId: number): boolean => {
  switch (subscription.mode) {
    case "all":
    case "tag":
    case "otp":
      return true
    case "aliases":
      return subscription.alias_ids.includes(aliasId)
    case "label":
      return false
  }
}

/** The host of an endpoint URL, never its path (which can carry a secret); null when it is not a URL. */
export const endpointHostOf = (url: string): string | null => {
  try {
    return new URL(url).host
  } catch {
    return null
  }
}
