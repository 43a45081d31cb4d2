/**
 * Exports: mailbox exports (spec 2.18, 3.4, 4.7; issue #33), the `exports` table (migration 0021).
 *
 * The API side: queue one (Pro only, one at a time per account), list, read with its progress,
 * and open a ready one for download. The worker side (worker/src/exports): take the next export
 * due (`claim`: pending, or processing with a lapsed lease, so a worker killed mid-build leaves
 * it to the next), read its messages a page at a time (what `MailboxAccess.mailboxes(account,
 * "read")` selects, trashed mail left out), record progress (which also renews the lease), and
 * finish, fail or give it back. The ZIP's bytes are the BlobStore's (`createArchive`...).
 *
 * Plan: every call of the API requires `bulkExport`. A downgrade suspends the account's exports
 * (held, neither built nor expired) and an upgrade resumes them, the download window moved on
 * by the time they were held (registered with `Entitlements.onPlanChange`).
 */
import { AliasNotFound, type ExportDetail, type ExportListItem, type ExportProgress, ExportDownloadWindowMs, type FeatureNotInPlan, ExportInProgress, ExportNotFound, databaseTimestamp, exportFileName, planIncludes, type QueuedExport } from "@burnbox/domain"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { senderAddressOf } from "../messages/Messages.ts"
import { Entitlements } from "../plans/Entitlements.ts"
import { BlobStore } from "../platform/BlobStore.ts"
import { JobQueue } from "../platform/JobQueue.ts"
import { rowsDecoder } from "../platform/Rows.ts"
import { now } from "../platform/Time.ts"
import { MailboxAccess } from "../sharing/MailboxAccess.ts"

/** The JobQueue queue whose jobs build exports (each job builds every export due). */
export const ExportsQueue = "exports"
/** The JobQueue queue of the sweep: expire exports past their window, take up lapsed ones. */
export const ExportsSweepQueue = "exports-sweep"

/** How long a worker holds an export without recording progress before another may take it. */
export const ExportLeaseMs = 30 * 1000
/** A build is tried this many times (worker deaths included) before the export is `failed`. */
export const ExportAttempts = 3

const ExportRow = Schema.Struct({
  id: Schema.Int,
  account_id: Schema.Int,
  alias_id: Schema.NullOr(Schema.Int),
  alias: Schema.NullOr(Schema.String),
  status: Schema.Literals(["pending", "processing", "ready", "failed", "expired"]),
  error: Schema.NullOr(Schema.String),
  messages_done: Schema.Int,
  messages_total: Schema.NullOr(Schema.Int),
  attempts: Schema.Int,
  blob_oid: Schema.NullOr(Schema.Number),
  size_bytes: Schema.NullOr(Schema.BigInt),
  sha256: Schema.NullOr(Schema.String),
  created_at: Schema.Date,
  ready_at: Schema.NullOr(Schema.Date),
  expires_at: Schema.NullOr(Schema.Date),
  suspended_at: Schema.NullOr(Schema.Date)
})
type ExportRow = typeof ExportRow.Type
const exportRows = rowsDecoder(ExportRow)

const listItem = (row: ExportRow): ExportListItem => ({
  id: row.id,
  purpose: "mailbox",
  status: row.status,
  alias_id: row.alias_id,
  alias: row.alias,
  error: row.error,
  ready_at: row.ready_at === null ? null : databaseTimestamp(row.ready_at),
  expires_at: row.expires_at === null ? null : databaseTimestamp(row.expires_at),
  created_at: databaseTimestamp(row.created_at)
})

/** Whether a ready export can be downloaded at `at` (its window not over; a held one is not served). */
const downloadable = (row: ExportRow, at: Date) =>
  row.status === "ready" && row.suspended_at === null && row.blob_oid !== null && row.expires_at !== null && row.expires_at > at

/** An export a worker holds: what to build. */
export interface ClaimedExport {
  readonly id: number
  readonly accountId: number
  readonly aliasId: number | null
  readonly alias: string | null
  readonly attempt: number
  /** The large object an earlier attempt left, to delete before starting again. */
  readonly staleArchive: number | null
}

/** A message to write into the ZIP (its bytes are read with `BlobStore.readRaws`). */
export interface ExportMessage {
  readonly id: number
  readonly alias: string
  readonly from: string
  readonly subject: string
  readonly receivedAt: Date
  readonly size: number
}

/** What a download serves: the ZIP's large object, its size and file name. */
export interface ExportArchive {
  readonly oid: number
  readonly size: number
  readonly sha256: string
  readonly fileName: string
}

const MessageRow = Schema.Struct({
  id: Schema.Int,
  alias: Schema.String,
  sender_address: Schema.String,
  envelope_from: Schema.NullOr(Schema.String),
  subject: Schema.String,
  received_at: Schema.Date,
  size: Schema.Int
})
const messageRows = rowsDecoder(MessageRow)

export class Exports extends Context.Service<Exports, {
  /** POST /exports: queue an export of one mailbox the account reads, or of all of them. */
  readonly create: (accountId: number, aliasId: number | null) => Effect.Effect<QueuedExport, ExportInProgress | AliasNotFound | FeatureNotInPlan>
  readonly list: (accountId: number) => Effect.Effect<ReadonlyArray<ExportListItem>, FeatureNotInPlan>
  /** GET /exports/{id}: the detail form and how far it is. */
  readonly detail: (accountId: number, exportId: number, baseUrl: string) => Effect.Effect<
    { readonly detail: ExportDetail; readonly progress: ExportProgress },
    ExportNotFound | FeatureNotInPlan
  >
  /** The ZIP of a ready export within its window. */
  readonly archive: (accountId: number, exportId: number) => Effect.Effect<ExportArchive, ExportNotFound | FeatureNotInPlan>

  /** The next export due, now held by the caller (status processing, leased); none when none is due. */
  readonly claim: Effect.Effect<Option.Option<ClaimedExport>>
  /** The number of messages the export holds, recorded as its total; messages after `upTo` (the newest id now) are left out. */
  readonly begin: (claimed: ClaimedExport, archiveOid: number) => Effect.Effect<{ readonly total: number; readonly upTo: number }>
  /** The export's messages after `afterId` up to `upTo`, oldest first, at most `limit`. */
  readonly messages: (claimed: ClaimedExport, afterId: number, upTo: number, limit: number) => Effect.Effect<ReadonlyArray<ExportMessage>>
  /** Records progress and renews the lease; false when the export is no longer this worker's to build (suspended, taken over). */
  readonly progress: (claimed: ClaimedExport, done: number) => Effect.Effect<boolean>
  readonly finish: (claimed: ClaimedExport, archive: { readonly size: number; readonly sha256: string }) => Effect.Effect<void>
  readonly fail: (claimed: ClaimedExport, error: string) => Effect.Effect<void>
  /** Gives the export back (pending) for another run: the worker is stopping, or the account's plan held it. */
  readonly release: (claimed: ClaimedExport) => Effect.Effect<void>
  /** Expires ready exports past their window (bytes deleted) and fails those out of attempts; answers how many expired. */
  readonly sweep: Effect.Effect<{ readonly expired: number; readonly due: number }>
}>()("burnbox/Exports") {
  static readonly layerNoDeps = Layer.effect(Exports, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const entitlements = yield* Entitlements
    const access = yield* MailboxAccess
    const blobs = yield* BlobStore
    const jobs = yield* JobQueue

    const rowOf = (accountId: number, exportId: number) =>
      sql`SELECT * FROM exports WHERE id = ${exportId} AND account_id = ${accountId}`.pipe(
        Effect.flatMap(exportRows),
        Effect.orDie,
        Effect.flatMap((rows) => rows[0] === undefined ? Effect.fail(new ExportNotFound({ exportId })) : Effect.succeed(rows[0]))
      )

    const create = Effect.fn("Exports.create")(function*(accountId: number, aliasId: number | null) {
      yield* entitlements.require(accountId, "bulkExport")
      let address: string | null = null
      if (aliasId !== null) {
        if (Option.isNone(yield* access.role(accountId, aliasId))) return yield* new AliasNotFound({ aliasId })
        const rows = yield* sql`SELECT al.local_part || '@' || d.name AS address FROM aliases al JOIN domains d ON d.id = al.domain_id WHERE al.id = ${aliasId}`.pipe(
          Effect.flatMap(rowsDecoder(Schema.Struct({ address: Schema.String }))),
          Effect.orDie
        )
        address = rows[0]?.address ?? null
      }
      const at = yield* now
      const inserted = yield* sql`
        INSERT INTO exports (account_id, alias_id, alias, created_at) VALUES (${accountId}, ${aliasId}, ${address}, ${at})
        ON CONFLICT (account_id) WHERE status IN ('pending', 'processing') DO NOTHING
        RETURNING *`.pipe(Effect.flatMap(exportRows), Effect.orDie)
      const row = inserted[0]
      if (row === undefined) {
        const running = yield* sql`SELECT id FROM exports WHERE account_id = ${accountId} AND status IN ('pending', 'processing')`.pipe(
          Effect.flatMap(rowsDecoder(Schema.Struct({ id: Schema.Int }))),
          Effect.orDie
        )
        return yield* new ExportInProgress({ exportId: running[0]?.id ?? 0 })
      }
      // Wakes a worker; the sweep takes it up anyway within a minute, so a wake-up lost is only later.
      yield* jobs.send(ExportsQueue).pipe(Effect.catchCause((cause) => Effect.logWarning("exports: the worker's wake-up was not sent", cause)))
      const { alias_id, ...item } = listItem(row)
      return { ...item, aliasId: alias_id } satisfies QueuedExport
    })

    const list = Effect.fn("Exports.list")(function*(accountId: number) {
      yield* entitlements.require(accountId, "bulkExport")
      const rows = yield* sql`SELECT * FROM exports WHERE account_id = ${accountId} ORDER BY id DESC`.pipe(Effect.flatMap(exportRows), Effect.orDie)
      return rows.map(listItem)
    })

    const detail = Effect.fn("Exports.detail")(function*(accountId: number, exportId: number, baseUrl: string) {
      yield* entitlements.require(accountId, "bulkExport")
      const row = yield* rowOf(accountId, exportId)
      const at = yield* now
      return {
        detail: { ...listItem(row), downloadUrl: downloadable(row, at) ? `${baseUrl}/exports/${row.id}/download` : null } satisfies ExportDetail,
        progress: { done: row.messages_done, total: row.messages_total }
      }
    })

    const archive = Effect.fn("Exports.archive")(function*(accountId: number, exportId: number) {
      yield* entitlements.require(accountId, "bulkExport")
      const row = yield* rowOf(accountId, exportId)
      if (!downloadable(row, yield* now)) return yield* new ExportNotFound({ exportId })
      return { oid: row.blob_oid!, size: Number(row.size_bytes ?? 0n), sha256: row.sha256 ?? "", fileName: exportFileName(row.id, row.created_at) }
    })

    const claim = Effect.gen(function*() {
      const at = yield* now
      const rows = yield* sql`
        UPDATE exports e SET status = 'processing', attempts = e.attempts + 1,
          lease_until = ${new Date(at.getTime() + ExportLeaseMs)}, messages_done = 0, error = NULL
        WHERE e.id = (
          SELECT id FROM exports
          WHERE suspended_at IS NULL AND attempts < ${ExportAttempts}
            AND (status = 'pending' OR (status = 'processing' AND lease_until < ${at}))
          ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING *`.pipe(Effect.flatMap(exportRows), Effect.orDie)
      const row = rows[0]
      if (row === undefined) return Option.none<ClaimedExport>()
      return Option.some<ClaimedExport>({
        id: row.id,
        accountId: row.account_id,
        aliasId: row.alias_id,
        alias: row.alias,
        attempt: row.attempts,
        staleArchive: row.blob_oid
      })
    }).pipe(Effect.withSpan("Exports.claim"))

    /**
     * The condition on `m` of the messages an export holds, not in the trash: the whole export is
     * the account's own mailboxes (spec 4.7: "every own mailbox"); one mailbox asked for by id is
     * any it reads now, a live share included (MailboxAccess decides).
     */
    const selection = (claimed: ClaimedExport) =>
      Effect.map(access.mailboxes(claimed.accountId, "read", "m", { excludeShared: claimed.aliasId === null }), (reachable) =>
        sql`${reachable} AND m.trashed_at IS NULL
          AND ${claimed.aliasId === null ? sql`true` : sql`m.alias_id = ${claimed.aliasId}`}`)

    const begin = Effect.fn("Exports.begin")(function*(claimed: ClaimedExport, archiveOid: number) {
      const condition = yield* selection(claimed)
      const [counted] = yield* sql`
        SELECT count(*)::int AS total, coalesce(max(m.id), 0)::int AS up_to FROM messages m
        WHERE ${condition} AND EXISTS (SELECT 1 FROM message_raw r WHERE r.message_id = m.id)`.pipe(
        Effect.flatMap(rowsDecoder(Schema.Struct({ total: Schema.Int, up_to: Schema.Int }))),
        Effect.orDie
      )
      yield* sql`UPDATE exports SET messages_total = ${counted!.total}, blob_oid = ${archiveOid} WHERE id = ${claimed.id}`.pipe(Effect.orDie)
      return { total: counted!.total, upTo: counted!.up_to }
    })

    const messages = Effect.fn("Exports.messages")(function*(claimed: ClaimedExport, afterId: number, upTo: number, limit: number) {
      const condition = yield* selection(claimed)
      const rows = yield* sql`
        SELECT m.id, al.local_part || '@' || d.name AS alias, m.sender_address, m.envelope_from, m.subject, m.received_at,
               m.size_bytes AS size
        FROM messages m JOIN message_raw r ON r.message_id = m.id
        JOIN aliases al ON al.id = m.alias_id JOIN domains d ON d.id = al.domain_id
        WHERE ${condition} AND m.id > ${afterId} AND m.id <= ${upTo}
        ORDER BY m.id LIMIT ${limit}`.pipe(Effect.flatMap(messageRows), Effect.orDie)
      return rows.map((row): ExportMessage => ({
        id: row.id,
        alias: row.alias,
        from: senderAddressOf(row),
        subject: row.subject,
        receivedAt: row.received_at,
        size: row.size
      }))
    })

    const progress = Effect.fn("Exports.progress")(function*(claimed: ClaimedExport, done: number) {
      const at = yield* now
      const rows = yield* sql`
        UPDATE exports SET messages_done = ${done}, lease_until = ${new Date(at.getTime() + ExportLeaseMs)}
        WHERE id = ${claimed.id} AND status = 'processing' AND attempts = ${claimed.attempt} AND suspended_at IS NULL
        RETURNING id`.pipe(Effect.orDie)
      return rows.length === 1
    })

    const finish = Effect.fn("Exports.finish")(function*(claimed: ClaimedExport, done: { readonly size: number; readonly sha256: string }) {
      const at = yield* now
      yield* sql`
        UPDATE exports SET status = 'ready', messages_done = coalesce(messages_total, messages_done), lease_until = NULL,
          size_bytes = ${done.size}, sha256 = ${done.sha256}, ready_at = ${at}, expires_at = ${new Date(at.getTime() + ExportDownloadWindowMs)}
        WHERE id = ${claimed.id} AND status = 'processing' AND attempts = ${claimed.attempt}`.pipe(Effect.orDie)
    })

    /** Deletes an export's bytes, if it has any. */
    const dropArchive = (oid: number | null) => (oid === null ? Effect.void : blobs.removeArchive(oid))

    const fail = Effect.fn("Exports.fail")(function*(claimed: ClaimedExport, error: string) {
      const rows = yield* sql`
        UPDATE exports e SET status = 'failed', error = ${error}, lease_until = NULL, blob_oid = NULL
        FROM (SELECT id, blob_oid FROM exports WHERE id = ${claimed.id} AND status = 'processing' AND attempts = ${claimed.attempt} FOR UPDATE) old
        WHERE e.id = old.id RETURNING old.blob_oid`.pipe(Effect.flatMap(rowsDecoder(Schema.Struct({ blob_oid: Schema.NullOr(Schema.Number) }))), Effect.orDie)
      yield* dropArchive(rows[0]?.blob_oid ?? null)
    })

    const release = Effect.fn("Exports.release")(function*(claimed: ClaimedExport) {
      // The attempt does not count: the worker stopped or the plan held it, the export did not fail.
      yield* sql`
        UPDATE exports SET status = 'pending', lease_until = NULL, attempts = greatest(attempts - 1, 0)
        WHERE id = ${claimed.id} AND status = 'processing' AND attempts = ${claimed.attempt}`.pipe(Effect.orDie)
    })

    const sweep = Effect.gen(function*() {
      const at = yield* now
      const expired = yield* sql`
        UPDATE exports e SET status = 'expired', blob_oid = NULL
        FROM (SELECT id, blob_oid FROM exports WHERE status = 'ready' AND suspended_at IS NULL AND expires_at <= ${at} FOR UPDATE SKIP LOCKED) old
        WHERE e.id = old.id RETURNING old.blob_oid`.pipe(Effect.flatMap(rowsDecoder(Schema.Struct({ blob_oid: Schema.NullOr(Schema.Number) }))), Effect.orDie)
      for (const row of expired) yield* dropArchive(row.blob_oid)
      // A build that lapsed on its last attempt (its worker died each time) is failed, its bytes gone.
      const exhausted = yield* sql`
        UPDATE exports e SET status = 'failed', lease_until = NULL, blob_oid = NULL,
          error = ${`The export could not be finished after ${ExportAttempts} attempts (its worker stopped each time); request a new one.`}
        FROM (SELECT id, blob_oid FROM exports WHERE status = 'processing' AND lease_until < ${at} AND attempts >= ${ExportAttempts} FOR UPDATE SKIP LOCKED) old
        WHERE e.id = old.id RETURNING old.blob_oid`.pipe(Effect.flatMap(rowsDecoder(Schema.Struct({ blob_oid: Schema.NullOr(Schema.Number) }))), Effect.orDie)
      for (const row of exhausted) yield* dropArchive(row.blob_oid)
      const [due] = yield* sql`
        SELECT count(*)::int AS n FROM exports
        WHERE suspended_at IS NULL AND (status = 'pending' OR (status = 'processing' AND lease_until < ${at}))`.pipe(
        Effect.flatMap(rowsDecoder(Schema.Struct({ n: Schema.Int }))),
        Effect.orDie
      )
      return { expired: expired.length, due: due!.n }
    }).pipe(Effect.withSpan("Exports.sweep"))

    /** Held without `bulkExport`: neither built, served nor expired; resumed with it, the window moved on by the time held. */
    const followPlan = (accountId: number, included: boolean) =>
      Effect.gen(function*() {
        const at = yield* now
        if (!included) {
          yield* sql`
            UPDATE exports SET suspended_at = ${at}
            WHERE account_id = ${accountId} AND suspended_at IS NULL AND status IN ('pending', 'processing', 'ready')`
          return
        }
        yield* sql`
          UPDATE exports SET suspended_at = NULL,
            expires_at = CASE WHEN status = 'ready' THEN expires_at + (${at}::timestamptz - suspended_at) ELSE expires_at END
          WHERE account_id = ${accountId} AND suspended_at IS NOT NULL`
      }).pipe(Effect.orDie)
    yield* entitlements.onPlanChange({ feature: "exports", apply: ({ accountId, after }) => followPlan(accountId, planIncludes(after, "bulkExport")) })

    return Exports.of({ create, list, detail, archive, claim, begin, messages, progress, finish, fail, release, sweep })
  }))
}

