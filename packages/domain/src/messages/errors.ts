/** The rules of reading and changing mail (spec 3.2, 4.5). */
import { Schema } from "effect"
import { BulkAction } from "./Message.ts"

/** No message of the caller's has this id (for many ids: the first that is not theirs). */
export class MessageNotFound extends Schema.TaggedError<MessageNotFound>()("MessageNotFound", {
  messageId: Schema.Int
}) {}

/** The plan keeps at most `limit` messages pinned at once. */
export class PinLimitReached extends Schema.TaggedError<PinLimitReached>()("PinLimitReached", {
  limit: Schema.Int
}) {}

/** Adding or removing a tag in bulk names the tag. */
export class BulkTagActionWithoutTag extends Schema.TaggedError<BulkTagActionWithoutTag>()("BulkTagActionWithoutTag", {
  action: BulkAction
}) {}

/** A list cursor is one the same list gave out, for the same filters. */
export class InvalidCursor extends Schema.TaggedError<InvalidCursor>()("InvalidCursor", {}) {}

export type MessageError = MessageNotFound | PinLimitReached | BulkTagActionWithoutTag | InvalidCursor
