/**
 * The message pipeline: parse -> rules -> index -> realtime -> webhook, then `processed`.
 * Workers claim `stub` rows (and `processing` rows whose worker vanished), 32 at a time and 16
 * processed concurrently so DNS waits overlap, with FOR UPDATE SKIP LOCKED, woken by LISTEN/NOTIFY from the accepting transaction and by a
 * one-second poll as a floor. All of one message's results, its events and its status are
 * written in one transaction, so a crash mid-way repeats nothing twice: the message is simply
 * claimed again. Mail that cannot be parsed becomes `failed` with its raw bytes kept.
 */
import { PgClient } from "@effect/sql-pg"
import { type EventAlias } from "@burnbox/domain"
import { analyzeMessage, parseMessage, type ParsedMessage } from "@burnbox/domain/mail/index"
import { appendEvent, BurnboxConfig, now, PipelineChannel } from "@burnbox/store"
import { Effect, Layer, Queue } from "effect"
import { type AuthResults, authenticateMail, noAuth } from "./MailAuth.ts"
import { SqlClient } from "effect/sql"

/** A claim older than this belongs to a worker that died; the message is taken again. */
export const ClaimTimeoutMs = 60_000
/** After this many claims a message that keeps killing its worker is marked failed. */
export const MaxAttempts = 3
const BatchSize = 32

export const RealtimeChannel = "burnbox_realtime"

interface Claimed {
  id: number
  processing_attempts: number
}

export class Pipeline {
  static readonly make = Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* BurnboxConfig

    const claim = Effect.gen(function*() {
      const at = yield* now
      return yield* sql<Claimed>`
        UPDATE messages SET processing_status = 'processing', processing_started_at = ${at},
               processing_attempts = processing_attempts + 1
        WHERE id IN (
          SELECT id FROM messages
          WHERE processing_status = 'stub'
             OR (processing_status = 'processing' AND processing_started_at < ${new Date(at.getTime() - ClaimTimeoutMs)})
          ORDER BY id LIMIT ${BatchSize} FOR UPDATE SKIP LOCKED)
        RETURNING id, processing_attempts`.pipe(Effect.orDie)
    })

    const fail = (id: number, reason: string) =>
      Effect.flatMap(now, (at) =>
        sql`UPDATE messages SET processing_status = 'failed', failure_reason = ${reason}, processed_at = ${at} WHERE id = ${id}`)
        .pipe(Effect.orDie, Effect.asVoid)

    const store = (id: number, parsed: ParsedMessage, auth: AuthResults) =>
      Effect.gen(function*() {
        const analysis = analyzeMessage(parsed)
        const at = yield* now
        yield* sql.withTransaction(Effect.gen(function*() {
          const rows = yield* sql<{
            account_id: number
            alias_id: number
            local_part: string
            domain: string
            label: string | null
            source: "smtp" | "test"
            received_at: Date
            size_bytes: number
          }>`
            SELECT m.account_id, m.alias_id, al.local_part, d.name AS domain, al.label, m.source, m.received_at, m.size_bytes
            FROM messages m JOIN aliases al ON al.id = m.alias_id JOIN domains d ON d.id = al.domain_id
            WHERE m.id = ${id} AND m.processing_status = 'processing' FOR UPDATE OF m`
          const message = rows[0]
          if (message === undefined) return
          // parse
          yield* sql`DELETE FROM attachments WHERE message_id = ${id}`
          for (const [position, attachment] of parsed.attachments.entries()) {
            yield* sql`
              INSERT INTO attachments (message_id, position, filename, mime_type, size_bytes, dangerous, previewable, content_id, content)
              VALUES (${id}, ${position}, ${attachment.filename}, ${attachment.mimeType}, ${attachment.content.byteLength},
                      ${attachment.dangerous}, ${attachment.previewable}, ${attachment.contentId}, ${attachment.content})`
          }
          // rules: the account's mail rules run here once they exist (mailRuleCount); none yet.
          // index
          yield* sql`
            UPDATE messages SET
              sender_name = ${parsed.sender.name}, sender_address = ${parsed.sender.address}, subject = ${parsed.subject},
              snippet = ${analysis.snippet}, text_body = ${parsed.text}, html_original = ${parsed.html},
              html_sanitized = ${analysis.sanitizedHtml}, remote_image_count = ${analysis.remoteImageCount},
              headers = ${JSON.stringify(parsed.headers)}::jsonb, otp_codes = ${JSON.stringify(analysis.otpCodes)}::jsonb,
              verification_links = ${JSON.stringify(analysis.verificationLinks)}::jsonb,
              auth = ${JSON.stringify(auth)}::jsonb,
              has_attachments = ${parsed.attachments.length > 0},
              search = setweight(to_tsvector('simple', ${parsed.subject}), 'A')
                    || setweight(to_tsvector('simple', ${`${parsed.sender.name ?? ""} ${parsed.sender.address}`}), 'B')
                    || to_tsvector('simple', ${analysis.searchText.slice(0, 500_000)}),
              processing_status = 'processed', processed_at = ${at}, failure_reason = NULL
            WHERE id = ${id}`
          // realtime
          yield* sql`SELECT pg_notify(${RealtimeChannel}, ${JSON.stringify({ accountId: message.account_id, messageId: id })})`
          // webhook
          const alias: EventAlias = { id: message.alias_id, address: `${message.local_part}@${message.domain}`, label: message.label }
          const otp = { code: analysis.otpCodes[0] ?? null, links: analysis.verificationLinks }
          const common = {
            alias,
            message_id: id,
            otp,
            source: message.source,
            received_at: message.received_at.toISOString(),
            url: `${config.baseUrl}/messages/${id}`
          }
          yield* appendEvent(sql, {
            accountId: message.account_id,
            alias,
            type: "message.received",
            time: at,
            data: {
              ...common,
              from: { address: parsed.sender.address, name: parsed.sender.name },
              subject: parsed.subject,
              snippet: analysis.snippet,
              auth,
              spam_score: null,
              size: message.size_bytes,
              has_attachments: parsed.attachments.length > 0
            }
          })
          if (otp.code !== null) {
            yield* appendEvent(sql, { accountId: message.account_id, alias, type: "message.otp_extracted", time: at, data: common })
          }
        })).pipe(Effect.orDie)
      })

    const processOne = (claimed: Claimed) =>
      Effect.gen(function*() {
        if (claimed.processing_attempts > MaxAttempts) return yield* fail(claimed.id, "gave_up_after_repeated_worker_failures")
        const rows = yield* sql<{ raw: Uint8Array; source: string; client_address: string | null; client_helo: string | null; envelope_from: string | null }>`
          SELECT r.raw, m.source, m.client_address, m.client_helo, m.envelope_from
          FROM message_raw r JOIN messages m ON m.id = r.message_id WHERE r.message_id = ${claimed.id}`.pipe(Effect.orDie)
        const row = rows[0]
        if (row === undefined) return yield* fail(claimed.id, "raw_missing")
        const result = yield* Effect.promise(() => parseMessage(row.raw))
        if (!result.ok) return yield* fail(claimed.id, `unparsable: ${result.reason}`)
        // Injected test mail has no sending server to check.
        const auth = row.source === "smtp"
          ? yield* authenticateMail(row.raw, { ip: row.client_address, helo: row.client_helo, sender: row.envelope_from })
          : noAuth
        yield* store(claimed.id, result.message, auth)
      }).pipe(
        Effect.catchCause((cause) =>
          Effect.logError(`pipeline: message ${claimed.id} failed`, cause).pipe(
            Effect.andThen(claimed.processing_attempts >= MaxAttempts ? fail(claimed.id, "processing_error") : Effect.void)
          ))
      )

    /** Claims and processes until no work is left; answers how many it processed. */
    const drain = Effect.gen(function*() {
      let total = 0
      for (;;) {
        const batch = yield* claim
        if (batch.length === 0) return total
        yield* Effect.forEach(batch, processOne, { concurrency: 16, discard: true })
        total += batch.length
      }
    })

    return { claim, processOne, drain }
  })
}

/** The pipeline as a background fiber of the worker role (needs a DnsResolver). */
export const PipelineLive = Layer.effectDiscard(Effect.gen(function*() {
  const pg = yield* PgClient.PgClient
  const pipeline = yield* Pipeline.make
  const wakeups = yield* pg.listen(PipelineChannel).pipe(Effect.orDie)
  const waitForWork = Effect.race(Queue.take(wakeups).pipe(Effect.ignore), Effect.sleep("1 second"))
  yield* pipeline.drain.pipe(
    Effect.andThen(waitForWork),
    Effect.catchCause((cause) => Effect.logError("pipeline loop", cause).pipe(Effect.andThen(Effect.sleep("1 second")))),
    Effect.forever,
    Effect.forkScoped
  )
}))

