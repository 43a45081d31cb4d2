/**
 * MailQueue: the pipeline's claims on stored mail (architecture.md, "MailQueue"). A message row
 * in `stub` state is the durable job the accepting transaction wrote; workers claim rows with
 * FOR UPDATE SKIP LOCKED, woken after that transaction's commit (PipelineWakeups: in memory in
 * the accepting process, by a NOTIFY in the others, and a poll as the floor), and a claim names the claiming
 * process (`application_name`), so the claims of a process that died are given back within a
 * second. Kept apart from pg-boss because a NOTIFY-woken claim answers in milliseconds where
 * pg-boss polls (`packages/bench/src/bench-queue.ts` measures both).
 *
 * `store` writes a batch of results with one statement composed from the owners' fragments: the
 * message rows (messages), the search index (SearchIndex), the outbox (Outbox) and the realtime
 * notification (Realtime); attachments (BlobStore) join it in one transaction when there are any.
 * The raw bytes come with the claim, or from BlobStore for a large message.
 */
import { PgTypes } from "@effect/sql-pg"
import type { WorkedMail } from "@burnbox/domain/mail/index"
import { Context, Effect, Layer, Option, Queue, Schema, type Scope } from "effect"
import { SqlClient, SqlSchema, type Statement } from "effect/sql"
import { claimerName } from "./PipelineHandoff.ts"
import { PipelineWakeups } from "./PipelineWakeups.ts"
import { eventRecord, insertEventRecords, type NewEvent, OutboxChannel } from "../webhooks/Outbox.ts"
import { BlobStore, inflateRaw, InlineZstdBytes, RawPieceBytes, type StoredRaw } from "../platform/BlobStore.ts"
import { publishFragment } from "../realtime/Realtime.ts"
import { Entitlements } from "../plans/Entitlements.ts"
import { ruleMarks, ruleReturning, ruleTrashSet, ruleWalk, walkedColumns } from "../rules/RuleWalk.ts"
import { SearchIndex } from "../search/SearchIndex.ts"
import { stampPhase } from "../platform/PhaseStamps.ts"
import { now } from "../platform/Time.ts"

/**
 * A claim older than this is taken again whoever holds it. A claim by a process that has no
 * connection left to PostgreSQL (it died) is taken again within about a second (`takeOver`).
 */
export const ClaimTimeoutMs = 60_000
/** Messages one claim takes. */
export const ClaimBatchSize = 8
/** Raw bytes up to this size come with the claim; larger messages are read one by one (`readRaw`). */
const InlineRawBytes = 256 * 1024

const ClaimedRow = Schema.Struct({
  id: Schema.Int,
  processing_attempts: Schema.Int,
  account_id: Schema.Int,
  alias_id: Schema.Int,
  local_part: Schema.String,
  domain: Schema.String,
  label: Schema.NullOr(Schema.String),
  source: Schema.Literals(["smtp", "test"]),
  received_at: Schema.Date,
  size_bytes: Schema.Int,
  client_address: Schema.NullOr(Schema.String),
  client_helo: Schema.NullOr(Schema.String),
  envelope_from: Schema.NullOr(Schema.String),
  has_raw: Schema.Boolean,
  raw: Schema.NullOr(Schema.Uint8Array),
  raw_zstd: Schema.NullOr(Schema.Boolean)
})

/** A claimed message with what its processing needs. */
export interface ClaimedMessage {
  readonly id: number
  /** This claim included: more than MaxAttempts means it keeps killing its worker. */
  readonly attempts: number
  readonly accountId: number
  readonly aliasId: number
  readonly alias: { readonly id: number; readonly address: string; readonly label: string | null }
  readonly source: "smtp" | "test"
  readonly receivedAt: Date
  readonly sizeBytes: number
  readonly clientAddress: string | null
  readonly clientHelo: string | null
  readonly envelopeFrom: string | null
  readonly hasRaw: boolean
  /**
   * The raw bytes of a small message; null for a large one: read it with `readRaw`, or use
   * `rawZstd` when the claim brought it.
   */
  readonly raw: Uint8Array | null
  /**
   * The zstd-compressed raw bytes of a message over InlineZstdBytes whose compressed bytes came
   * with the claim (at most InlineRawBytes): inflated where the message is worked (a mail thread),
   * not here. Null otherwise.
   */
  readonly rawZstd: Uint8Array | null
}

const toClaimed = (row: typeof ClaimedRow.Type): ClaimedMessage => ({
  id: row.id,
  attempts: row.processing_attempts,
  accountId: row.account_id,
  aliasId: row.alias_id,
  alias: { id: row.alias_id, address: `${row.local_part}@${row.domain}`, label: row.label },
  source: row.source,
  receivedAt: row.received_at,
  sizeBytes: row.size_bytes,
  clientAddress: row.client_address,
  clientHelo: row.client_helo,
  envelopeFrom: row.envelope_from,
  hasRaw: row.has_raw,
  raw: row.raw,
  rawZstd: null
})

/** What the pipeline made of one message, ready to store. */
export interface ProcessedMessage {
  readonly message: ClaimedMessage
  /** Its digest, attachments and encoded columns (domain mail/worked.ts). */
  readonly mail: WorkedMail
  readonly auth: { readonly spf: string | null; readonly dkim: string | null; readonly dmarc: string | null }
  readonly events: ReadonlyArray<NewEvent>
}

const utf8 = new TextEncoder()

/**
 * The batch's recordset as one UTF-8 JSON array, its rows' column bytes joined as they came from
 * the thread that worked each message (each row an object to which the id, the owner, alias and
 * address the rules step reads, and the authentication results are prefixed): no message's text is decoded or encoded again here.
 */
const recordsetParts = (batch: ReadonlyArray<ProcessedMessage>): Array<Uint8Array> => {
  const parts: Array<Uint8Array> = [utf8.encode("[")]
  batch.forEach(({ auth, mail, message }, i) => {
    // `columns` is a non-empty JSON object: `{"id":…,"auth":…,` takes the place of its `{`.
    parts.push(
      utf8.encode(
        `${i === 0 ? "" : ","}{"id":${message.id},"account_id":${message.accountId},"alias_id":${message.aliasId},` +
          `"alias_address":${JSON.stringify(message.alias.address)},"auth":${JSON.stringify(auth)},`
      ),
      mail.columns.subarray(1)
    )
  })
  parts.push(utf8.encode("]"))
  return parts
}

export class MailQueue extends Context.Service<MailQueue, {
  /** Claims up to ClaimBatchSize stub messages (and claims past ClaimTimeoutMs), oldest first. */
  readonly claim: Effect.Effect<ReadonlyArray<ClaimedMessage>>
  /** The same, up to `limit` (at least one) messages. */
  readonly claimUpTo: (limit: number) => Effect.Effect<ReadonlyArray<ClaimedMessage>>
  /** The raw bytes of a message too large to come with its claim. */
  readonly readRaw: (id: number) => Effect.Effect<Uint8Array | undefined>
  /** The same, as stored (compressed or not), for the place that works it to inflate. */
  readonly readStoredRaw: (id: number) => Effect.Effect<StoredRaw | undefined>
  /** Marks a message failed with a reason; its raw bytes stay. */
  readonly fail: (id: number, reason: string) => Effect.Effect<void>
  /** Stores a batch of results atomically; a message another process took over meanwhile is left alone. */
  readonly store: (batch: ReadonlyArray<ProcessedMessage>) => Effect.Effect<void>
  /** Gives the claims of processes that are gone back to the queue; answers how many. */
  readonly takeOver: Effect.Effect<number>
  /** A wake-up each time mail is queued (after the accepting commit: PipelineWakeups). */
  readonly wakeups: Effect.Effect<Queue.Dequeue<unknown, unknown>, never, Scope.Scope>
}>()("burnbox/MailQueue") {
  /** Needs BlobStore, SearchIndex, Entitlements and PipelineWakeups besides the SQL client. */
  static readonly layerNoDeps = Layer.effect(MailQueue, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const pipelineWakeups = yield* PipelineWakeups
    const blobs = yield* BlobStore
    const search = yield* SearchIndex
    const entitlements = yield* Entitlements
    const inlineRaw = blobs.inlineRaw("c.id", InlineRawBytes)

    // This process's name on its connections (Database.ts processApplicationName), recorded with
    // each claim; another name (a pool configured elsewhere) claims for the timeout alone.
    const worker = yield* claimerName(sql)

    /**
     * A claim commits without waiting for its WAL to reach the disk (`synchronous_commit` off for
     * its own transaction): a claim a crash loses leaves its messages `stub` (claimed again, as
     * the takeover would have given them back), and whatever the claimer then commits durably (its
     * store, a failure) flushes the claim's WAL before its own. The flush was one fsync on every
     * message's way from its 250 to `processed`.
     */
    const claimRows = SqlSchema.findAll({
      Request: Schema.Struct({ at: Schema.Date, limit: Schema.Int }),
      Result: ClaimedRow,
      execute: ({ at, limit }) => sql`
        WITH claimed AS (
          UPDATE messages SET processing_status = 'processing', processing_started_at = ${at},
                 processing_attempts = processing_attempts + 1, processing_worker = ${worker}
          WHERE id IN (
            SELECT id FROM messages
            WHERE processing_status = 'stub'
               OR (processing_status = 'processing' AND processing_started_at < ${new Date(at.getTime() - ClaimTimeoutMs)})
            ORDER BY id LIMIT ${limit} FOR UPDATE SKIP LOCKED)
            -- The claim's commit does not wait for its WAL flush (see claimRows).
            AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
          RETURNING id, processing_attempts, account_id, alias_id, source, received_at, size_bytes,
                    client_address, client_helo, envelope_from)
        SELECT c.id, c.processing_attempts, c.account_id, c.alias_id, al.local_part, d.name AS domain, al.label,
               c.source, c.received_at, c.size_bytes, c.client_address, c.client_helo, c.envelope_from,
               ${inlineRaw.columns}
        FROM claimed c
        JOIN aliases al ON al.id = c.alias_id JOIN domains d ON d.id = al.domain_id
        ${inlineRaw.join}
        ORDER BY c.id`
    })
    const claimUpTo = (limit: number) =>
      Effect.flatMap(now, (at) => claimRows({ at, limit: Math.max(1, Math.floor(limit)) })).pipe(
        Effect.flatMap((rows) =>
          Effect.forEach(rows, (row) =>
            row.raw === null
              ? Effect.succeed(toClaimed(row))
              : row.raw_zstd === true && row.size_bytes > InlineZstdBytes
              ? Effect.succeed({ ...toClaimed({ ...row, raw: null }), rawZstd: row.raw })
              : Effect.map(inflateRaw(row.raw, row.raw_zstd === true, row.size_bytes), (raw) => toClaimed({ ...row, raw })))
        ),
        Effect.orDie
      )
    const claim = claimUpTo(ClaimBatchSize)

    const readRaw = (id: number) => blobs.readRaw(id).pipe(Effect.map(Option.getOrUndefined))
    const readStoredRaw = (id: number) => blobs.readStoredRaw(id).pipe(Effect.map(Option.getOrUndefined))

    const fail = (id: number, reason: string) =>
      Effect.flatMap(now, (at) =>
        sql`
          WITH failed AS (
            UPDATE messages SET processing_status = 'failed', failure_reason = ${reason}, processed_at = ${at}
            WHERE id = ${id} RETURNING id, account_id, alias_id)
          SELECT ${publishFragment(sql, "failed", "failed")} FROM failed`
      ).pipe(Effect.orDie, Effect.asVoid)

    /**
     * parse + index, realtime and webhook of `batch` in one statement: the UPDATE takes every
     * message still ours (the others were taken over), and only those get their events and
     * their realtime notification. The rules step runs in it too (rules/RuleWalk.ts): the walk
     * joins each recordset row, the UPDATE takes a rule's trash, and the marks' steps write the
     * owner's marks, tags and unread count before the index step and the events' commit.
     * Answers the ids it stored.
     */
    const storeStatement = (batch: ReadonlyArray<ProcessedMessage>, at: Date) => {
      // A recordset over RawPieceBytes (a big message's text, renderings and search words: tens of
      // MB for a 15 MB text mail) goes to PostgreSQL staged in a large object a piece at a time,
      // in this statement's transaction, rather than as one parameter the driver would copy twice
      // more (its bind message, grown by doubling, and the frame around it).
      const parts = recordsetParts(batch)
      const size = parts.reduce((n, part) => n + part.byteLength, 0)
      if (size <= RawPieceBytes) return storeStatementWith(batch, at, sql`${Buffer.concat(parts, size)}`)
      return sql.withTransaction(Effect.gen(function*() {
        const oid = yield* blobs.stage(parts)
        const stored = yield* storeStatementWith(batch, at, sql`lo_get(${PgTypes.oid(oid)})`)
        yield* blobs.unstage([oid])
        return stored
      }))
    }
    const storeStatementWith = (batch: ReadonlyArray<ProcessedMessage>, at: Date, recordset: Statement.Fragment) =>
      SqlSchema.findAll({
        Request: Schema.Void,
        Result: Schema.Struct({ id: Schema.Int }),
        execute: () =>
          sql`
            WITH stored AS (
              UPDATE messages m SET
                sender_name = u.sender_name, sender_address = u.sender_address, subject = u.subject,
                snippet = u.snippet, text_body = u.text_body, html_original = u.html_original,
                html_sanitized = u.html_sanitized, html_sanitized_remote = u.html_sanitized_remote,
                remote_image_count = u.remote_image_count, webhook_text_body = u.webhook_text_body,
                headers = u.headers, otp_codes = u.otp_codes, verification_links = u.verification_links,
                auth = u.auth, has_attachments = u.has_attachments,
                processing_status = 'processed', processed_at = ${at}, failure_reason = NULL,
                ${ruleTrashSet(sql, at)}
              FROM json_to_recordset(convert_from(${recordset}, 'UTF8')::json) AS u(
                id int, ${sql.literal(walkedColumns)}, sender_name text, sender_address text, subject text, snippet text, text_body text,
                html_original text, html_sanitized text, html_sanitized_remote text, remote_image_count int,
                webhook_text_body text, headers jsonb, otp_codes jsonb, verification_links jsonb, auth jsonb,
                has_attachments boolean, sender_text text, search_text text)
              ${ruleWalk(sql, entitlements.column)}
              -- The ids as an array too: they are looked up by key, not found by scanning every
              -- message in the pipeline (the whole backlog) for the recordset's ids.
              WHERE m.id = ANY(${`{${batch.map((ready) => ready.message.id).join(",")}}`}::int[])
                AND m.id = u.id AND m.processing_status = 'processing'
              RETURNING m.id, m.account_id, m.alias_id, m.received_at, m.has_attachments, m.trashed_at,
                        m.subject, u.sender_text, u.search_text, ${ruleReturning(sql, at)}),
            ${ruleMarks(sql, "stored")},
            indexed AS (${search.indexFragment("stored")}),
            appended AS (${insertEventRecords(
              sql,
              batch.flatMap((ready) => ready.events.map((event) => ({ message_id: ready.message.id, ...eventRecord(event) }))),
              sql`e.message_id IN (SELECT id FROM stored)`
            )})
            -- Notifications go out at commit; the outbox's repeated one is sent once (same payload).
            SELECT s.id, ${publishFragment(sql, "processed", "s")}, pg_notify(${OutboxChannel}, '')
            FROM stored s ORDER BY s.id`
      })(undefined)

    /** The store statement and the batch's attachments, in one transaction. */
    const storeWithAttachments = (batch: ReadonlyArray<ProcessedMessage>, at: Date) =>
      sql.withTransaction(Effect.gen(function*() {
        const stored = yield* storeStatement(batch, at)
        const ours = new Set(stored.map((row) => row.id))
        const done = batch.filter((ready) => ours.has(ready.message.id))
        // Attachments: a message claimed for the first time has none stored yet.
        yield* blobs.removeAttachments(done.filter((ready) => ready.message.attempts > 1).map((ready) => ready.message.id))
        yield* blobs.writeAttachments(done.flatMap(({ mail, message }) =>
          mail.attachments.map((attachment, position) => ({
            message_id: message.id,
            position,
            filename: attachment.filename,
            mime_type: attachment.mimeType,
            size_bytes: attachment.content.byteLength,
            dangerous: attachment.dangerous,
            previewable: attachment.previewable,
            content_id: attachment.contentId,
            content: attachment.content
          }))
        ))
        return stored
      }))

    /**
     * The archive marks of stored messages are read again after their commits (SearchIndex:
     * a mark committed while the store statement ran), by one fiber of its own, off the stores'
     * path: a store's writer and its messages' places in the pipeline do not wait for that round
     * trip (bench:wait, issue #36 item 4), and the stores that commit meanwhile share one statement.
     */
    const toRefresh: Array<number> = []
    const refreshWanted = yield* Queue.sliding<void>(1)
    const refreshMarks = Effect.suspend(() => search.refreshArchiveMarks(toRefresh.splice(0)))
    yield* Queue.take(refreshWanted).pipe(
      Effect.andThen(refreshMarks),
      Effect.catchCause((cause) => Effect.logWarning("pipeline: reading the stored messages' archive marks again failed", cause)),
      Effect.forever,
      Effect.forkScoped
    )
    yield* Effect.addFinalizer(() => refreshMarks.pipe(Effect.ignore))
    const refreshLater = (ids: ReadonlyArray<number>) =>
      ids.length === 0 ? Effect.void : Effect.suspend(() => {
        toRefresh.push(...ids)
        return Queue.offer(refreshWanted, undefined)
      })

    /**
     * Writes the results of `batch`, atomically: one statement, in a transaction of its own only
     * when attachments are written too (or a retried message's earlier ones removed).
     */
    const store = (batch: ReadonlyArray<ProcessedMessage>) =>
      Effect.gen(function*() {
        const at = yield* now
        const ids = batch.map((ready) => ready.message.id)
        stampPhase("store.sent", ids)
        const withAttachments = batch.some((ready) => ready.mail.attachments.length > 0 || ready.message.attempts > 1)
        const stored = withAttachments ? yield* storeWithAttachments(batch, at) : yield* storeStatement(batch, at)
        stampPhase("store.committed", ids)
        yield* refreshLater(stored.map((row) => row.id))
      }).pipe(Effect.asVoid, Effect.orDie)

    /**
     * A claim names its process, and a living process keeps at least one connection (its LISTEN)
     * open, so a name no connection shows any more is a process that died with messages in hand.
     * They count as attempts (MaxAttempts still stops a message that keeps killing its worker).
     */
    const takeOver = Effect.gen(function*() {
      const rows = yield* SqlSchema.findAll({
        Request: Schema.Void,
        Result: Schema.Struct({ n: Schema.Int }),
        execute: () => sql`
          WITH orphaned AS (
            UPDATE messages m SET processing_status = 'stub'
            WHERE m.processing_status = 'processing' AND m.processing_worker IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.application_name = m.processing_worker)
            RETURNING m.id
          )
          SELECT count(*)::int AS n FROM orphaned`
      })(undefined)
      const n = rows[0]?.n ?? 0
      if (n > 0) yield* pipelineWakeups.queued
      return n
    }).pipe(Effect.orDie)

    const wakeups = pipelineWakeups.wakeups

    return MailQueue.of({ claim, claimUpTo, readRaw, readStoredRaw, fail, store, takeOver, wakeups })
  }))

  /** With its own BlobStore, SearchIndex and Entitlements, and the process's PipelineWakeups. */
  static readonly layer = MailQueue.layerNoDeps.pipe(Layer.provide([BlobStore.layer, SearchIndex.layer, Entitlements.layer, PipelineWakeups.layer]))
}
