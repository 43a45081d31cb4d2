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

/** A bearer token changes only isRead on a message; the other fields need a browser session. */
export class StateFieldsNeedSession extends Schema.TaggedError<StateFieldsNeedSession>()("StateFieldsNeedSession", {
  fields: Schema.Array(Schema.String)
}) {}

/** No attachment of this id on a message of the caller's. */
export class AttachmentNotFound extends Schema.TaggedError<AttachmentNotFound>()("AttachmentNotFound", {
  messageId: Schema.Int,
  attachmentId: Schema.Int
}) {}

/** A dangerous attachment is served only when the request confirms it (confirm=1). */
export class DangerousAttachmentUnconfirmed extends Schema.TaggedError<DangerousAttachmentUnconfirmed>()("DangerousAttachmentUnconfirmed", {
  attachmentId: Schema.Int
}) {}

/** The attachment has no preview: it is missing, dangerous, or of a type that is not previewed (spec 4.5, 7). */
export class AttachmentPreviewUnavailable extends Schema.TaggedError<AttachmentPreviewUnavailable>()("AttachmentPreviewUnavailable", {
  attachmentId: Schema.Int
}) {}

export type MessageError =
  | MessageNotFound
  | PinLimitReached
  | BulkTagActionWithoutTag
  | InvalidCursor
  | StateFieldsNeedSession
  | AttachmentNotFound
  | DangerousAttachmentUnconfirmed
  | AttachmentPreviewUnavailable
