import { Schema } from "effect"
import { DateTimeInput, DateTimeString, Id, IdFromPath, intFromDigits, NonNegativeInt, PageLimit } from "../platform/Common.ts"
import { parseMailbox } from "../mail/Mailbox.ts"
import { Tag } from "../tags/Tag.ts"

export const ProcessingStatus = Schema.Literals(["stub", "processing", "processed", "failed"])
export const MessageSource = Schema.Literals(["smtp", "test"])

const AuthResults = Schema.Struct({
  spf: Schema.NullOr(Schema.String),
  dkim: Schema.NullOr(Schema.String),
  dmarc: Schema.NullOr(Schema.String)
})

const summaryFields = {
  id: Id,
  source: MessageSource,
  alias: Schema.Struct({ id: Id, address: Schema.String, label: Schema.NullOr(Schema.String), domain: Schema.String }),
  sender: Schema.Struct({ name: Schema.NullOr(Schema.String), address: Schema.String }),
  subject: Schema.String,
  snippet: Schema.String,
  receivedAt: DateTimeString,
  expiresAt: DateTimeString,
  sizeBytes: NonNegativeInt,
  isRead: Schema.Boolean,
  unread: Schema.Boolean,
  starred: Schema.Boolean,
  pinned: Schema.Boolean,
  archived: Schema.Boolean,
  trashed: Schema.Boolean,
  trashedAt: Schema.NullOr(DateTimeString),
  trashPurgeAt: Schema.NullOr(DateTimeString),
  hasAttachments: Schema.Boolean,
  spamScore: Schema.NullOr(Schema.Finite),
  auth: AuthResults,
  otpCodes: Schema.Array(Schema.String).check(Schema.isMaxLength(3)),
  tags: Schema.Array(Tag),
  processingStatus: ProcessingStatus
}

/** Spec 2.10 (additional properties allowed). */
export const MessageSummary = Schema.Struct(summaryFields).annotate({ identifier: "MessageSummary" })
export type MessageSummary = typeof MessageSummary.Type

export const MessageAttachment = Schema.Struct({
  id: Id,
  filename: Schema.String,
  mimeType: Schema.String,
  sizeBytes: NonNegativeInt,
  dangerous: Schema.Boolean,
  downloadUrl: Schema.String,
  previewUrl: Schema.NullOr(Schema.String)
})

/** Spec 2.11. */
export const MessageDetail = Schema.Struct({
  ...summaryFields,
  headers: Schema.Record(Schema.String, Schema.Union([Schema.String, Schema.Array(Schema.String)])),
  textBody: Schema.NullOr(Schema.String),
  htmlUrl: Schema.NullOr(Schema.String),
  remoteImages: Schema.NullOr(Schema.Struct({ blockedUrl: Schema.String, loadUrl: Schema.String, alwaysLoadFromSender: Schema.Boolean })),
  rawUrl: Schema.String,
  verificationLinks: Schema.Array(Schema.String).check(Schema.isMaxLength(3)),
  attachments: Schema.Array(MessageAttachment)
}).annotate({ identifier: "MessageDetail" })
export type MessageDetail = typeof MessageDetail.Type

/** Spec 2.19 limits. */
export const TestMessageLimits = {
  subject: 998,
  body: 2_097_152,
  otp: 128,
  attachments: 10,
  filename: 255,
  attachmentBytes: 1024 * 1024,
  rawBytes: 15_728_640
} as const

export const TestMessageInput = Schema.Struct({
  aliasId: Id,
  from: Schema.String.check(
    Schema.isMaxLength(998),
    Schema.makeFilter((value: string) => parseMailbox(value) !== undefined, { message: "invalid_mailbox" })
  ),
  subject: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(TestMessageLimits.subject)),
  text: Schema.optionalKey(Schema.NullOr(Schema.String.check(Schema.isMaxLength(TestMessageLimits.body)))),
  html: Schema.optionalKey(Schema.NullOr(Schema.String.check(Schema.isMaxLength(TestMessageLimits.body)))),
  otp: Schema.optionalKey(Schema.NullOr(Schema.String.check(Schema.isMaxLength(TestMessageLimits.otp)))),
  attachments: Schema.optionalKey(Schema.Array(Schema.Struct({
    filename: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(TestMessageLimits.filename)),
    contentType: Schema.optionalKey(Schema.String.check(Schema.isPattern(/^[\w.+-]+\/[\w.+-]+$/u, { message: "invalid_content_type" }))),
    contentBase64: Schema.String
  })).check(Schema.isMaxLength(TestMessageLimits.attachments)))
}).annotate({ identifier: "TestMessageInput" })
export type TestMessageInput = typeof TestMessageInput.Type

/** Spec 2.19. */
export const InjectedTestMessage = Schema.Struct({
  id: Id,
  aliasId: Id,
  alias: Schema.String,
  source: Schema.Literal("test"),
  processingStatus: Schema.Literal("stub"),
  receivedAt: DateTimeString,
  expiresAt: DateTimeString
}).annotate({ identifier: "InjectedTestMessage" })

/** Spec 2.12. */
export const MessagePage = Schema.Struct({
  items: Schema.Array(MessageSummary),
  nextCursor: Schema.NullOr(Schema.String),
  total: NonNegativeInt
}).annotate({ identifier: "MessagePage" })
export type MessagePage = typeof MessagePage.Type

const BooleanParam = Schema.Literals(["true", "false"])

/**
 * Waiting for mail (decisions.md): how long, in whole seconds (1..120), GET /messages holds an
 * empty page, or GET /messages/{id} a message still in the pipeline, before it answers.
 */
const waitSeconds = (description: string) => intFromDigits(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 120 })), description)

/** GET /messages/{id}'s query: `wait`. */
export const GetMessageQuery = {
  wait: Schema.optionalKey(waitSeconds(
    "Wait for mail: whole seconds, 1 to 120. While the message is still in the pipeline (processingStatus stub or processing), hold the request until it is processed or failed, or the time runs out; then answer the message as it is."
  ))
}

/** Spec 4.5 query parameters of GET /messages; out-of-range values are 422, never clamped. */
export const ListMessagesQuery = {
  q: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(512))),
  alias: Schema.optionalKey(IdFromPath),
  domain: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(253))),
  unread: Schema.optionalKey(BooleanParam),
  hasAttachment: Schema.optionalKey(BooleanParam),
  starred: Schema.optionalKey(BooleanParam),
  pinned: Schema.optionalKey(BooleanParam),
  tag: Schema.optionalKey(IdFromPath),
  archived: Schema.optionalKey(BooleanParam),
  trashed: Schema.optionalKey(BooleanParam),
  excludeShared: Schema.optionalKey(BooleanParam),
  dateFrom: Schema.optionalKey(DateTimeInput),
  dateTo: Schema.optionalKey(DateTimeInput),
  cursor: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(1024))),
  limit: Schema.optionalKey(PageLimit),
  sort: Schema.optionalKey(Schema.Literals(["newest", "oldest"])),
  wait: Schema.optionalKey(waitSeconds(
    "Wait for mail: whole seconds, 1 to 120. While no message of the page is processed or failed, hold the request until one is, or the time runs out; then answer the page as it is (an empty page when none came). With sort=oldest, nextCursor is set even on the last page, so following it waits for the next message."
  ))
}

/** Spec 2.13: the caller's own reader state of a message, answered by PATCH /messages/{id}. */
export const MessageState = Schema.Struct({
  isRead: Schema.Boolean,
  starred: Schema.Boolean,
  pinned: Schema.Boolean,
  archived: Schema.Boolean,
  tags: Schema.Array(Tag)
}).annotate({ identifier: "MessageState" })
export type MessageState = typeof MessageState.Type

/** Spec 8: at most 50 tagIds on a message PATCH, and 1..100 ids on a bulk action. */
export const MessageLimits = { tagIds: 50, bulkIds: 100 } as const

const uniqueIds = Schema.makeFilter((ids: ReadonlyArray<number>) => new Set(ids).size === ids.length, {
  message: "duplicate_ids"
})

/** The fields a bearer token may send on PATCH /messages/{id}; sessions may send them all. */
export const BearerStateFields: ReadonlyArray<string> = ["isRead"]

/** The fields of a PATCH /messages/{id} a caller of this kind may not change (spec 4.5): for a bearer, all but isRead. */
export const stateFieldsRefused = (caller: "bearer" | "session", patch: object): ReadonlyArray<string> =>
  caller === "session" ? [] : Object.keys(patch).filter((field) => !BearerStateFields.includes(field))

/** Spec 4.5, PATCH /messages/{id}. */
export const UpdateMessageState = Schema.Struct({
  isRead: Schema.optionalKey(Schema.Boolean),
  starred: Schema.optionalKey(Schema.Boolean),
  pinned: Schema.optionalKey(Schema.Boolean),
  archived: Schema.optionalKey(Schema.Boolean),
  tagIds: Schema.optionalKey(Schema.Array(Id).check(Schema.isMaxLength(MessageLimits.tagIds), uniqueIds))
}).annotate({ identifier: "UpdateMessageState" })
export type UpdateMessageState = typeof UpdateMessageState.Type

export const BulkAction = Schema.Literals([
  "mark_read",
  "mark_unread",
  "star",
  "unstar",
  "pin",
  "unpin",
  "archive",
  "unarchive",
  "add_tag",
  "remove_tag",
  "delete",
  "restore",
  "delete_forever"
])
export type BulkAction = typeof BulkAction.Type

/** Spec 4.5, POST /messages/bulk. */
export const BulkMessageInput = Schema.Struct({
  ids: Schema.Array(Id).check(Schema.isMinLength(1), Schema.isMaxLength(MessageLimits.bulkIds), uniqueIds),
  action: BulkAction,
  tagId: Schema.optionalKey(Id)
}).annotate({ identifier: "BulkMessageInput" })
export type BulkMessageInput = typeof BulkMessageInput.Type

/** Spec 2.14: where a message is after a delete, delete_forever or restore. */
export const MessageOutcome = Schema.Struct({
  id: Id,
  outcome: Schema.Literals(["trashed", "deleted", "restored"]),
  trashPurgeAt: Schema.NullOr(DateTimeString)
}).annotate({ identifier: "MessageOutcome" })
export type MessageOutcome = typeof MessageOutcome.Type

/** Spec 2.14. */
export const BulkMessageResult = Schema.Struct({
  updated: NonNegativeInt,
  deleted: NonNegativeInt,
  trashed: NonNegativeInt,
  restored: NonNegativeInt,
  outcomes: Schema.Array(MessageOutcome)
}).annotate({ identifier: "BulkMessageResult" })
export type BulkMessageResult = typeof BulkMessageResult.Type

/** Spec 2.15. */
export const EmptyTrashResult = Schema.Struct({
  deleted: NonNegativeInt,
  remaining: NonNegativeInt
}).annotate({ identifier: "EmptyTrashResult" })
export type EmptyTrashResult = typeof EmptyTrashResult.Type

/** Spec 2.16. */
export const RemoteImagePreference = Schema.Struct({
  sender: Schema.String,
  alwaysLoad: Schema.Boolean
}).annotate({ identifier: "RemoteImagePreference" })
export type RemoteImagePreference = typeof RemoteImagePreference.Type

export const RemoteImagePreferenceInput = Schema.Struct({ alwaysLoad: Schema.Boolean })
  .annotate({ identifier: "RemoteImagePreferenceInput" })

/** Spec 4.5 query of DELETE /messages/{id}: `permanent=1` (or `true`) destroys at once. */
export const DeleteMessageQuery = {
  permanent: Schema.optionalKey(Schema.Literals(["0", "1", "true", "false"]))
}

/** Spec 4.5 query of POST /messages/trash/empty. */
export const EmptyTrashQuery = { alias: Schema.optionalKey(IdFromPath) }

/** Spec 4.5 query of GET /messages/{id}/html: `remote=1` loads remote images. */
export const MessageHtmlQuery = { remote: Schema.optionalKey(Schema.Literals(["0", "1"])) }

/** Spec 4.5 query of an attachment download: `confirm=1` is needed for a dangerous file. */
export const AttachmentQuery = { confirm: Schema.optionalKey(Schema.Literal("1")) }

export const AttachmentParams = {
  messageId: IdFromPath,
  attachmentId: IdFromPath
}
