/**
 * The background conversion of mail stored before migration 0028 (issue #36 item 7): its raw
 * bytes compressed (BlobStore.compressStoredRaws), each webhook text_body that its text part
 * makes again on read dropped (`storedWebhookTextBody`, as the pipeline now stores it), and the
 * HTML as received dropped where neither the view nor a webhook falls back to it. It walks
 * the messages that existed at the migration in id order, one small batch per transaction, and
 * records where it stopped with the batch (`storage_compaction`), so it resumes there after a
 * stop or a crash and never converts a row twice. Beside it, in the same batches, it deletes the
 * events dispatched before migration 0035 that no endpoint received (dispatch now deletes those
 * at once), walking the events that existed then in id order. The service keeps running meanwhile: a batch
 * locks only its own rows (readers never wait on them), and every reader reads old and new rows.
 */
import { storedWebhookTextBody, TextPartPayloadMaxChars, textPartPayload } from "@burnbox/domain/mail/index"
import { Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { BlobStore } from "../platform/BlobStore.ts"
import { rowsDecoder } from "../platform/Rows.ts"
import { now } from "../platform/Time.ts"

/** Messages one batch (one transaction) walks, by default. */
export const CompactionBatch = 200

/** Where the conversion stands (`burnbox admin storage status`). */
export interface CompactionStatus {
  /** Messages with ids up to this were stored before the migration: the walk's end. */
  readonly upTo: number
  /** The walk has converted every message with an id up to this. */
  readonly afterId: number
  readonly done: boolean
  /** Old raw rows still to compress (ids after `afterId`). */
  readonly rawsRemaining: number
  readonly rawsCompressed: number
  readonly rawBytesBefore: number
  readonly rawBytesAfter: number
  readonly textsDropped: number
  readonly htmlOriginalsDropped: number
  /** The walk of the events that existed at migration 0035 has passed every event id up to this ("": none yet). */
  readonly eventsAfterId: string
  readonly eventsDone: boolean
  /** Events dispatched before migration 0035 that no endpoint received, deleted. */
  readonly eventsDeleted: number
  readonly startedAt: string | null
  readonly finishedAt: string | null
}

const StateRow = Schema.Struct({
  up_to: Schema.Int,
  after_id: Schema.Int,
  raws_compressed: Schema.Number,
  raw_bytes_before: Schema.Number,
  raw_bytes_after: Schema.Number,
  texts_dropped: Schema.Number,
  html_originals_dropped: Schema.Number,
  events_up_to: Schema.String,
  events_after_id: Schema.String,
  events_deleted: Schema.Number,
  started_at: Schema.NullOr(Schema.Date),
  finished_at: Schema.NullOr(Schema.Date)
})

export class StorageCompaction extends Context.Service<StorageCompaction, {
  readonly status: Effect.Effect<CompactionStatus>
  /** One batch of up to `batchSize` messages, in its own transaction; answers the status after it. */
  readonly step: (batchSize: number) => Effect.Effect<CompactionStatus>
  /** Batches until the walk is done, or `maxBatches` of them; answers the status after them. */
  readonly run: (options: { readonly batchSize: number; readonly maxBatches?: number }) => Effect.Effect<CompactionStatus>
}>()("burnbox/StorageCompaction") {
  static readonly layerNoDeps = Layer.effect(StorageCompaction, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const blobs = yield* BlobStore
    const stateRows = rowsDecoder(StateRow)
    const remainingRows = rowsDecoder(Schema.Struct({ n: Schema.Number }))
    const idRows = rowsDecoder(Schema.Struct({ id: Schema.Int }))
    const eventIdRows = rowsDecoder(Schema.Struct({ id: Schema.String }))
    const copyRows = rowsDecoder(Schema.Struct({
      id: Schema.Int,
      text_body: Schema.NullOr(Schema.String),
      webhook_text_body: Schema.NullOr(Schema.String),
      has_html_original: Schema.Boolean,
      rendered: Schema.Boolean
    }))

    const columns = sql`up_to, after_id, raws_compressed::float8, raw_bytes_before::float8, raw_bytes_after::float8,
      texts_dropped::float8, html_originals_dropped::float8, events_up_to, events_after_id, events_deleted::float8, started_at, finished_at`

    /** Whether the walk of the events has passed the last one that existed at migration 0035. */
    const eventsWalked = (state: typeof StateRow.Type) => state.events_up_to === "" || state.events_after_id >= state.events_up_to

    /**
     * Deletes the events in (`afterId`, `end`] that were dispatched (no longer queued in
     * events_pending) without a delivery: what dispatch now deletes at once. Answers how many.
     */
    const deleteUndelivered = (afterId: string, end: string) =>
      Effect.gen(function*() {
        const deleted = yield* sql`
          DELETE FROM events e
          WHERE e.id > ${afterId} AND e.id <= ${end}
            AND NOT EXISTS (SELECT 1 FROM events_pending p WHERE p.time = e.time AND p.id = e.id)
            AND e.id NOT IN (SELECT d.event_id FROM webhook_deliveries d WHERE d.event_id > ${afterId} AND d.event_id <= ${end})
          RETURNING e.id`
        return deleted.length
      })

    const status = Effect.gen(function*() {
      const [state] = yield* sql`SELECT ${columns} FROM storage_compaction`.pipe(Effect.flatMap(stateRows))
      const [remaining] = yield* sql`
        SELECT count(*)::float8 AS n FROM message_raw WHERE message_id > ${state!.after_id} AND message_id <= ${state!.up_to} AND NOT zstd`.pipe(
        Effect.flatMap(remainingRows)
      )
      const eventsDone = eventsWalked(state!)
      return {
        upTo: state!.up_to,
        afterId: state!.after_id,
        done: state!.after_id >= state!.up_to && eventsDone,
        rawsRemaining: remaining!.n,
        rawsCompressed: state!.raws_compressed,
        rawBytesBefore: state!.raw_bytes_before,
        rawBytesAfter: state!.raw_bytes_after,
        textsDropped: state!.texts_dropped,
        htmlOriginalsDropped: state!.html_originals_dropped,
        eventsAfterId: state!.events_after_id,
        eventsDone,
        eventsDeleted: state!.events_deleted,
        startedAt: state!.started_at?.toISOString() ?? null,
        finishedAt: state!.finished_at?.toISOString() ?? null
      } satisfies CompactionStatus
    }).pipe(Effect.orDie)

    /**
     * Drops the copies the messages in (`afterId`, `end`] no longer need: a webhook text_body
     * that their text part makes again (`storedWebhookTextBody`), and the HTML as received when
     * both renderings are stored (or it has no remote image) and the webhook text does not come
     * from it. Answers how many of each.
     */
    const dropCopies = (afterId: number, end: number) =>
      Effect.gen(function*() {
        // Text parts are read up to what dispatch reads (PostgreSQL's length counts code points, at
        // most JavaScript's; storedWebhookTextBody decides exactly); a longer one keeps its copies.
        const rows = yield* sql`
          SELECT id, CASE WHEN length(text_body) <= ${TextPartPayloadMaxChars} THEN text_body END AS text_body, webhook_text_body,
                 html_original IS NOT NULL AS has_html_original, (html_sanitized_remote IS NOT NULL OR remote_image_count = 0) AS rendered
          FROM messages
          WHERE id > ${afterId} AND id <= ${end} AND processing_status = 'processed'
            AND (webhook_text_body IS NOT NULL OR html_original IS NOT NULL)
          ORDER BY id FOR UPDATE`.pipe(Effect.flatMap(copyRows))
        const texts: Array<number> = []
        const htmls: Array<number> = []
        for (const row of rows) {
          const dropText = row.webhook_text_body !== null && storedWebhookTextBody(row.text_body, row.webhook_text_body) === null
          const webhookText = dropText ? null : row.webhook_text_body
          if (dropText) texts.push(row.id)
          if (row.has_html_original && row.rendered && (webhookText !== null || textPartPayload(row.text_body) !== null)) htmls.push(row.id)
        }
        if (texts.length + htmls.length > 0) {
          yield* sql`
            UPDATE messages SET webhook_text_body = CASE WHEN id = ANY(${texts}::int4[]) THEN NULL ELSE webhook_text_body END,
                   html_original = CASE WHEN id = ANY(${htmls}::int4[]) THEN NULL ELSE html_original END
            WHERE id = ANY(${[...new Set([...texts, ...htmls])]}::int4[])`
        }
        return { texts: texts.length, htmls: htmls.length }
      })

    const step = (batchSize: number) =>
      sql.withTransaction(Effect.gen(function*() {
        // The state row locked first: two runners take turns, never the same batch.
        const [state] = yield* sql`SELECT ${columns} FROM storage_compaction FOR UPDATE`.pipe(Effect.flatMap(stateRows))
        const messagesWalked = state!.after_id >= state!.up_to
        if (messagesWalked && eventsWalked(state!)) return
        // A batch of messages, while some are left. The batch ends at its last message; with fewer
        // than a batch left, at the walk's end.
        const ids = messagesWalked ? [] : yield* sql`
          SELECT id FROM messages WHERE id > ${state!.after_id} AND id <= ${state!.up_to} ORDER BY id LIMIT ${batchSize}`.pipe(
          Effect.flatMap(idRows)
        )
        const end = messagesWalked ? state!.after_id : ids.length < batchSize ? state!.up_to : ids[ids.length - 1]!.id
        const raws = messagesWalked ? { count: 0, bytesBefore: 0, bytesAfter: 0 } : yield* blobs.compressStoredRaws(state!.after_id, end)
        const copies = messagesWalked ? { texts: 0, htmls: 0 } : yield* dropCopies(state!.after_id, end)
        // And a batch of events, while some are left, the same way.
        const eventIds = eventsWalked(state!) ? [] : yield* sql`
          SELECT id FROM events WHERE id > ${state!.events_after_id} AND id <= ${state!.events_up_to} ORDER BY id LIMIT ${batchSize}`.pipe(
          Effect.flatMap(eventIdRows)
        )
        const eventsEnd = eventsWalked(state!)
          ? state!.events_after_id
          : eventIds.length < batchSize ? state!.events_up_to : eventIds[eventIds.length - 1]!.id
        const eventsDeleted = eventsWalked(state!) ? 0 : yield* deleteUndelivered(state!.events_after_id, eventsEnd)
        const at = yield* now
        const finished = end >= state!.up_to && (state!.events_up_to === "" || eventsEnd >= state!.events_up_to)
        yield* sql`
          UPDATE storage_compaction SET after_id = ${end}, raws_compressed = raws_compressed + ${raws.count},
                 raw_bytes_before = raw_bytes_before + ${raws.bytesBefore}, raw_bytes_after = raw_bytes_after + ${raws.bytesAfter},
                 texts_dropped = texts_dropped + ${copies.texts}, html_originals_dropped = html_originals_dropped + ${copies.htmls},
                 events_after_id = ${eventsEnd}, events_deleted = events_deleted + ${eventsDeleted},
                 started_at = coalesce(started_at, ${at}), updated_at = ${at},
                 finished_at = CASE WHEN ${finished} THEN ${at} END`
      })).pipe(Effect.orDie, Effect.andThen(status))

    const run = Effect.fn("StorageCompaction.run")(function*(options: { readonly batchSize: number; readonly maxBatches?: number }) {
      let current = yield* status
      for (let batch = 0; !current.done && (options.maxBatches === undefined || batch < options.maxBatches); batch++) {
        current = yield* step(options.batchSize)
      }
      return current
    })

    return StorageCompaction.of({ status, step, run })
  }))

  /** With its own BlobStore. */
  static readonly layer = StorageCompaction.layerNoDeps.pipe(Layer.provide(BlobStore.layer))
}
