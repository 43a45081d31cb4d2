/** The rules of protected operator desks (spec 4.6, decisions.md "Protected operator desks"). */
import { Schema } from "effect"

/** The alias is not an active protected desk the caller owns (not a desk, revoked, burned, another's, missing). */
export class DeskNotFound extends Schema.TaggedError<DeskNotFound>()("DeskNotFound", {
  aliasId: Schema.Int
}) {}

/**
 * The reply target is not a message of this desk's mailbox that can be answered (another mailbox,
 * missing, in the trash, not parsed, no address to reply to). `input` names the request's field.
 */
export class ReplyTargetUnavailable extends Schema.TaggedError<ReplyTargetUnavailable>()("ReplyTargetUnavailable", {
  messageId: Schema.Int,
  input: Schema.Literals(["message_id", "messageId"])
}) {}

/** 10 sends an hour per account, or 60 an hour in all, are used up; one frees in `retryAfter` seconds. */
export class DeskSendLimitReached extends Schema.TaggedError<DeskSendLimitReached>()("DeskSendLimitReached", {
  scope: Schema.Literals(["account", "service"]),
  limit: Schema.Int,
  retryAfter: Schema.Int
}) {}

/**
 * The mail could not be handed to the relay: none is configured (`not_configured`, nothing
 * recorded), or it refused or could not be reached (`relay_failed`: the Sent record `sentId` is
 * `failed`). The sender checks Sent before retrying.
 */
export class DeskSendingUnavailable extends Schema.TaggedError<DeskSendingUnavailable>()("DeskSendingUnavailable", {
  reason: Schema.Literals(["not_configured", "relay_failed"]),
  sentId: Schema.NullOr(Schema.Int)
}) {}

export type DeskError = DeskNotFound | ReplyTargetUnavailable | DeskSendLimitReached | DeskSendingUnavailable
