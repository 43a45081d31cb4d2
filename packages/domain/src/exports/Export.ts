/**
 * Spec 2.18, 3.4, 4.7: a mailbox export, a ZIP of every retained raw `.eml` with `manifest.json`,
 * built in the background and downloadable for 24 hours once ready. Its three forms differ on
 * purpose (the interface's mixed casing): the queue form (POST) has camelCase `aliasId`, the list
 * and detail forms snake_case `alias_id`, and only the detail `downloadUrl`. Times are database
 * timestamp text (`YYYY-MM-DD HH:MM:SS+00`), not RFC 3339.
 */
import { Schema } from "effect"
import { Id, NonNegativeInt } from "../platform/Common.ts"

export const ExportStatus = Schema.Literals(["pending", "processing", "ready", "failed", "expired"])
export type ExportStatus = typeof ExportStatus.Type

/** How long a ready export can be downloaded (spec 8). */
export const ExportDownloadWindowMs = 24 * 60 * 60 * 1000

/** A timestamp as PostgreSQL writes a `timestamptz` in UTC, to the second: `2026-11-27 02:17:32+00`. */
export const DatabaseTimestamp = Schema.String.annotate({ description: "database timestamp text, YYYY-MM-DD HH:MM:SS+00" })

/** `date` as database timestamp text (UTC, whole seconds). */
export const databaseTimestamp = (date: Date): string => `${date.toISOString().slice(0, 19).replace("T", " ")}+00`

const common = {
  id: Id,
  purpose: Schema.Literal("mailbox"),
  status: ExportStatus,
  alias: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  ready_at: Schema.NullOr(DatabaseTimestamp),
  expires_at: Schema.NullOr(DatabaseTimestamp),
  created_at: DatabaseTimestamp
}

/** The answer of POST /exports (202): camelCase `aliasId`. */
export const QueuedExport = Schema.Struct({ ...common, aliasId: Schema.NullOr(Id) }).annotate({ identifier: "QueuedMailboxExport" })
export type QueuedExport = typeof QueuedExport.Type

/** An item of GET /exports: snake_case `alias_id`, no download URL. */
export const ExportListItem = Schema.Struct({ ...common, alias_id: Schema.NullOr(Id) }).annotate({ identifier: "MailboxExportListItem" })
export type ExportListItem = typeof ExportListItem.Type

/** GET /exports/{id}: the list form and `downloadUrl`, set once ready. */
export const ExportDetail = Schema.Struct({ ...common, alias_id: Schema.NullOr(Id), downloadUrl: Schema.NullOr(Schema.String) })
  .annotate({ identifier: "MailboxExport" })
export type ExportDetail = typeof ExportDetail.Type

export const ExportList = Schema.Struct({ items: Schema.Array(ExportListItem) })
export type ExportList = typeof ExportList.Type

/** POST /exports: one mailbox (`aliasId`), or every mailbox the caller reads (empty body, `{}` or null). */
export const CreateExportInput = Schema.Struct({ aliasId: Schema.optionalKey(Schema.NullOr(Id)) })
export type CreateExportInput = typeof CreateExportInput.Type

/**
 * How far a running export is: messages written of the messages it holds (`total` null until it
 * starts). The detail answer carries it in the `Export-Progress` header (`done/total`), since the
 * resource itself has no extra properties.
 */
export interface ExportProgress {
  readonly done: number
  readonly total: number | null
}
export const ExportProgressHeader = "export-progress"
export const formatProgress = (progress: ExportProgress): string => `${progress.done}/${progress.total ?? "?"}`
export const parseProgress = (header: string | null | undefined): ExportProgress | undefined => {
  const match = /^(\d+)\/(\d+|\?)$/.exec(header ?? "")
  if (match === null) return undefined
  return { done: Number(match[1]), total: match[2] === "?" ? null : Number(match[2]) }
}

/** One message in `manifest.json`. */
export const ManifestMessage = Schema.Struct({
  id: Id,
  alias: Schema.String,
  from: Schema.String,
  subject: Schema.String,
  receivedAt: Schema.String,
  size: NonNegativeInt,
  sha256: Schema.String,
  file: Schema.String
})
export type ManifestMessage = typeof ManifestMessage.Type

/** `manifest.json` of an export ZIP. */
export const ExportManifest = Schema.Struct({
  exportId: Id,
  alias: Schema.NullOr(Schema.String),
  exportedAt: Schema.String,
  counts: Schema.Struct({ messages: NonNegativeInt, bytes: NonNegativeInt }),
  messages: Schema.Array(ManifestMessage)
})
export type ExportManifest = typeof ExportManifest.Type

/** The `.eml` file name of a message in the ZIP: its id, so names are unique and safe everywhere. */
export const emlFileName = (messageId: number): string => `messages/${messageId}.eml`

/** The download's file name (`Content-Disposition`): ASCII, no path, no quotes. */
export const exportFileName = (exportId: number, createdAt: Date): string =>
  `burnbox-export-${exportId}-${createdAt.toISOString().slice(0, 10)}.zip`
