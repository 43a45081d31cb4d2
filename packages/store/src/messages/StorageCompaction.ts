/**
 * The background conversion of mail stored before migration 0028 (issue #36 item 7): its raw
 * bytes compressed (BlobStore.compressStoredRaws), each webhook text_body that its text part
 * makes again on read dropped (`storedWebhookTextBody`, as the pipeline now stores it), and the
 * HTML as received dropped where neither the view nor a webhook falls back to it. It walks
 * the messages that existed at the migration in id order, one small batch per transaction, and
 * records where it stopped with the batch (`storage_compaction`), so it resumes there after a
 * stop or a crash and never converts a row twice. The service keeps running meanwhile: a batch
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
    const copyRows = rowsDecoder(Schema.Struct({
      id: Schema.Int,
      text_body: Schema.NullOr(Schema.String),
      webhook_text_body: Schema.NullOr(Schema.String),
      has_html_original: Schema.Boolean,
      rendered: Schema.Boolean
    }))

    const columns = sql`up_to, after_id, raws_compressed::float8, raw_bytes_before::float8, raw_bytes_after::float8,
      texts_dropped::float8, html_originals_dropped::float8, started_at, finished_at`

    const status = Effect.gen(function*() {
      const [state] = yield* sql`SELECT ${columns} FROM storage_compaction`.pipe(Effect.flatMap(stateRows))
      const [remaining] = yield* sql`
        SELECT count(*)::float8 AS n FROM message_raw WHERE message_id > ${state!.after_id} AND message_id <= ${state!.up_to} AND NOT zstd`.pipe(
        Effect.flatMap(remainingRows)
      )
      return {
        upTo: state!.up_to,
        afterId: state!.after_id,
        done: state!.after_id >= state!.up_to,
        rawsRemaining: remaining!.n,
        rawsCompressed: state!.raws_compressed,
        rawBytesBefore: state!.raw_bytes_before,
        rawBytesAfter: state!.raw_bytes_after,
        textsDropped: state!.texts_dropped,
        htmlOriginalsDropped: state!.html_originals_dropped,
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
        if (state!.after_id >= state!.up_to) return
        const ids = yield* sql`
          SELECT id FROM messages WHERE id > ${state!.after_id} AND id <= ${state!.up_to} ORDER BY id LIMIT ${batchSize}`.pipe(
          Effect.flatMap(idRows)
        )
        // The batch ends at its last message; with fewer than a batch left, at the walk's end.
        const end = ids.length < batchSize ? state!.up_to : ids[ids.length - 1]!.id
        const raws = yield* blobs.compressStoredRaws(state!.after_id, end)
        const copies = yield* dropCopies(state!.after_id, end)
        const at = yield* now
        yield* sql`
          UPDATE storage_compaction SET after_id = ${end}, raws_compressed = raws_compressed + ${raws.count},
                 raw_bytes_before = raw_bytes_before + ${raws.bytesBefore}, raw_bytes_after = raw_bytes_after + ${raws.bytesAfter},
                 texts_dropped = texts_dropped + ${copies.texts}, html_originals_dropped = html_originals_dropped + ${copies.htmls}, started_at = coalesce(started_at, ${at}), updated_at = ${at},
                 finished_at = CASE WHEN ${end} >= up_to THEN ${at} END`
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
