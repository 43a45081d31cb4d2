/** The rules of mailbox exports (spec 4.7). */
import { Schema } from "effect"

/** No export of the caller has this id (or it is not downloadable: not ready, or expired). */
export class ExportNotFound extends Schema.TaggedError<ExportNotFound>()("ExportNotFound", {
  exportId: Schema.Int
}) {}

/** One export at a time: the account has one pending or processing. */
export class ExportInProgress extends Schema.TaggedError<ExportInProgress>()("ExportInProgress", {
  exportId: Schema.Int
}) {}

export type ExportError = ExportNotFound | ExportInProgress
