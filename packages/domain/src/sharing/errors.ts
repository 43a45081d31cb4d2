/** The rules of sharing a mailbox (decisions.md, "Sharing a mailbox"; spec 4.4). */
import { Schema } from "effect"

/**
 * No mailbox the caller owns has this id, or no account has the invited email: answered alike,
 * so that emails cannot be probed.
 */
export class ShareTargetNotFound extends Schema.TaggedError<ShareTargetNotFound>()("ShareTargetNotFound", {
  aliasId: Schema.Int
}) {}

/** No share of the caller's mailbox has this id. */
export class ShareNotFound extends Schema.TaggedError<ShareNotFound>()("ShareNotFound", {
  shareId: Schema.Int
}) {}

/** No pending invitation to the caller has this id. */
export class InvitationNotFound extends Schema.TaggedError<InvitationNotFound>()("InvitationNotFound", {
  invitationId: Schema.Int
}) {}

/** The mailbox is already shared with (or offered to) that account, or it is the owner's own. */
export class AlreadyShared extends Schema.TaggedError<AlreadyShared>()("AlreadyShared", {
  aliasId: Schema.Int
}) {}

/** A mailbox has at most `limit` guests, invited or accepted. */
export class GuestLimitReached extends Schema.TaggedError<GuestLimitReached>()("GuestLimitReached", {
  limit: Schema.Int
}) {}

/** No guest endpoint or guest token reaching the caller's mailbox has this id. */
export class ShareGrantNotFound extends Schema.TaggedError<ShareGrantNotFound>()("ShareGrantNotFound", {
  aliasId: Schema.Int,
  subjectId: Schema.Int
}) {}

export type SharingError = ShareTargetNotFound | ShareNotFound | InvitationNotFound | AlreadyShared | GuestLimitReached | ShareGrantNotFound
