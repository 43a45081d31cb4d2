/**
 * The message pipeline: parse -> rules -> index -> realtime -> webhook, then `processed`.
 * Four loops per worker each claim `stub` rows (and `processing` rows whose worker vanished),
 * 8 at a time, processed concurrently so DNS waits overlap, with FOR UPDATE SKIP LOCKED, woken
 * by LISTEN/NOTIFY from the accepting transaction and by a one-second poll as a floor. Several
 * small claims rather than one large one: a new message waits for a free loop, not for the
 * slowest message of a large batch. The claim returns what the work needs (alias, envelope,
 * and the raw bytes of all but large messages).
 *
 * All of one message's results, its events and its status are written in one transaction, so
 * a crash mid-way repeats nothing twice: the message is simply claimed again. Results that are
 * ready together share that transaction (group commit: while one store commits, the next
 * results queue up and are written by one set of statements), which saves most of the
 * per-message round trips; a batch that fails is retried one message at a time, so one bad
 * message cannot hold back the others. Mail that cannot be parsed becomes `failed` with its
 * raw bytes kept.
 */
import { PgClient } from "@effect/sql-pg"
import { type EventAlias } from "@burnbox/domain"
import { analyzeMessage, type MessageAnalysis, parseMessage, type ParsedMessage } from "@burnbox/domain/mail/index"
import { BurnboxConfig, eventRecord, insertEventRecords, type NewEvent, now, OutboxChannel, pgText, PipelineChannel } from "@burnbox/store"
import { Deferred, Effect, Layer, Queue, Semaphore } from "effect"
import { type AuthResults, authenticateMail, noAuth } from "./MailAuth.ts"
import { SqlClient } from "effect/sql"

/**
 * A claim older than this is taken again whoever holds it. A claim by a process that has no
 * connection left to PostgreSQL (it died) is taken again within about a second (`takeOver`).
 */
export const ClaimTimeoutMs = 60_000
/** After this many claims a message that keeps killing its worker is marked failed. */
export const MaxAttempts = 3
/** Loops per worker process, each claiming this many messages at a time and working on them together. */
const Loops = 4
const BatchSize = 8
/** Raw bytes up to this size come with the claim; larger messages are read one by one. */
const InlineRawBytes = 256 * 1024
/**
 * Raw bytes being worked on at once, at most, in KiB: a message costs several times its size
 * while it is parsed and until its results are stored, so a burst of big messages waits for
 * room instead of piling up: four 15 MB messages at a time, where the 32 that four loops of 8 can
 * claim would hold about 3 GB (bench:bigmail: ~100 MiB for one). Small mail never waits for it; a message larger than the
 * whole budget takes all of it.
 */
export const WorkBudgetKiB = 64 * 1024
/** The permits a message of `sizeBytes` takes from a budget of `budgetKiB`. */
export const workPermits = (sizeBytes: number, budgetKiB: number = WorkBudgetKiB) =>
  Math.min(budgetKiB, Math.max(1, Math.ceil(sizeBytes / 1024)))
/** A store transaction takes at most this many messages, and this many raw bytes' worth of them. */
const StoreBatchMessages = 64
const StoreBatchBytes = 4 * 1024 * 1024

export const RealtimeChannel = "burnbox_realtime"

interface Claimed {
  id: number
  processing_attempts: number
  account_id: number
  alias_id: number
  local_part: string
  domain: string
  label: string | null
  source: "smtp" | "test"
  received_at: Date
  size_bytes: number
  client_address: string | null
  client_helo: string | null
  envelope_from: string | null
  has_raw: boolean
  raw: Uint8Array | null
}

interface Ready {
  readonly message: Claimed
  readonly parsed: ParsedMessage
  readonly analysis: MessageAnalysis
  readonly auth: AuthResults
}

const text = (value: string | null) => (value === null ? null : pgText(value))

export class Pipeline {
  static readonly make = Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* BurnboxConfig

    // This process's name on its connections (store's processApplicationName), recorded with
    // each claim; another name (a pool configured elsewhere) claims for the timeout alone.
    const [named] = yield* sql<{ name: string }>`SELECT current_setting('application_name') AS name`.pipe(Effect.orDie)
    const worker = named !== undefined && named.name.startsWith("burnbox/") ? named.name : null

    const claim = Effect.gen(function*() {
      const at = yield* now
      return yield* sql<Claimed>`
        WITH claimed AS (
          UPDATE messages SET processing_status = 'processing', processing_started_at = ${at},
                 processing_attempts = processing_attempts + 1, processing_worker = ${worker}
          WHERE id IN (
            SELECT id FROM messages
            WHERE processing_status = 'stub'
               OR (processing_status = 'processing' AND processing_started_at < ${new Date(at.getTime() - ClaimTimeoutMs)})
            ORDER BY id LIMIT ${BatchSize} FOR UPDATE SKIP LOCKED)
          RETURNING id, processing_attempts, account_id, alias_id, source, received_at, size_bytes,
                    client_address, client_helo, envelope_from)
        SELECT c.id, c.processing_attempts, c.account_id, c.alias_id, al.local_part, d.name AS domain, al.label,
               c.source, c.received_at, c.size_bytes, c.client_address, c.client_helo, c.envelope_from,
               (r.message_id IS NOT NULL) AS has_raw,
               CASE WHEN octet_length(r.raw) <= ${InlineRawBytes} THEN r.raw END AS raw
        FROM claimed c
        JOIN aliases al ON al.id = c.alias_id JOIN domains d ON d.id = al.domain_id
        LEFT JOIN message_raw r ON r.message_id = c.id
        ORDER BY c.id`.pipe(Effect.orDie)
    })

    const fail = (id: number, reason: string) =>
      Effect.flatMap(now, (at) =>
        sql`UPDATE messages SET processing_status = 'failed', failure_reason = ${reason}, processed_at = ${at} WHERE id = ${id}`)
        .pipe(Effect.orDie, Effect.asVoid)

    /** The events of one stored message (spec 6.3): message.received, and message.otp_extracted with a code. */
    const eventsOf = ({ analysis, auth, message, parsed }: Ready, at: Date): Array<NewEvent> => {
      const alias: EventAlias = { id: message.alias_id, address: `${message.local_part}@${message.domain}`, label: message.label }
      const otp = { code: analysis.otpCodes[0] ?? null, links: analysis.verificationLinks }
      const common = {
        alias,
        message_id: message.id,
        otp,
        source: message.source,
        received_at: message.received_at.toISOString(),
        url: `${config.baseUrl}/messages/${message.id}`
      }
      const received: NewEvent = {
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
      }
      return otp.code === null
        ? [received]
        : [received, { accountId: message.account_id, alias, type: "message.otp_extracted", time: at, data: common }]
    }

    /**
     * parse + index, realtime and webhook of `batch` in one statement: the UPDATE takes every
     * message still ours (the others were taken over), and only those get their events and
     * their realtime notification. Answers the ids it stored. (rules: the account's mail rules
     * run here once they exist, mailRuleCount; none yet.)
     */
    const storeStatement = (batch: ReadonlyArray<Ready>, at: Date) =>
      sql<{ id: number }>`
        WITH stored AS (
          UPDATE messages m SET
            sender_name = u.sender_name, sender_address = u.sender_address, subject = u.subject,
            snippet = u.snippet, text_body = u.text_body, html_original = u.html_original,
            html_sanitized = u.html_sanitized, remote_image_count = u.remote_image_count,
            headers = u.headers, otp_codes = u.otp_codes, verification_links = u.verification_links,
            auth = u.auth, has_attachments = u.has_attachments,
            processing_status = 'processed', processed_at = ${at}, failure_reason = NULL
          FROM json_to_recordset(${JSON.stringify(batch.map(({ analysis, auth, message, parsed }) => ({
            id: message.id,
            sender_name: text(parsed.sender.name),
            sender_address: text(parsed.sender.address),
            subject: text(parsed.subject),
            snippet: text(analysis.snippet),
            text_body: text(parsed.text),
            html_original: text(parsed.html),
            html_sanitized: text(analysis.sanitizedHtml),
            remote_image_count: analysis.remoteImageCount,
            headers: parsed.headers,
            otp_codes: analysis.otpCodes,
            verification_links: analysis.verificationLinks,
            auth,
            has_attachments: parsed.attachments.length > 0,
            sender_text: text(`${parsed.sender.name ?? ""} ${parsed.sender.address}`),
            search_text: text(analysis.searchText.slice(0, 500_000))
          })))}::json) AS u(
            id int, sender_name text, sender_address text, subject text, snippet text, text_body text,
            html_original text, html_sanitized text, remote_image_count int, headers jsonb, otp_codes jsonb,
            verification_links jsonb, auth jsonb, has_attachments boolean, sender_text text, search_text text)
          -- The ids as an array too: they are looked up by key, not found by scanning every
          -- message in the pipeline (the whole backlog) for the recordset's ids.
          WHERE m.id = ANY(${`{${batch.map((ready) => ready.message.id).join(",")}}`}::int[])
            AND m.id = u.id AND m.processing_status = 'processing'
          RETURNING m.id, m.account_id, m.alias_id, m.received_at, m.has_attachments, m.trashed_at,
                    m.subject, u.sender_text, u.search_text),
        -- index: the words, scoped to the account, written once into the search index (0012),
        -- with the owner's archive mark as this statement sees it (storeBatch reads it again).
        indexed AS (
          INSERT INTO message_search (id, account_id, alias_id, received_at, has_attachments, trashed_at, archived, search)
          SELECT s.id, s.account_id, s.alias_id, s.received_at, s.has_attachments, s.trashed_at,
                 EXISTS (SELECT 1 FROM message_states ms WHERE ms.message_id = s.id AND ms.account_id = s.account_id AND ms.archived),
                 account_lexemes(s.account_id, setweight(to_tsvector('simple', s.subject), 'A')
                   || setweight(to_tsvector('simple', s.sender_text), 'B')
                   || to_tsvector('simple', s.search_text))
          FROM stored s
          ON CONFLICT (id, account_id) DO UPDATE
          SET has_attachments = excluded.has_attachments, trashed_at = excluded.trashed_at,
              archived = excluded.archived, search = excluded.search),
        appended AS (${insertEventRecords(
          sql,
          batch.flatMap((ready) => eventsOf(ready, at).map((event) => ({ message_id: ready.message.id, ...eventRecord(event) }))),
          sql`e.message_id IN (SELECT id FROM stored)`
        )})
        -- Notifications go out at commit; the outbox's repeated one is sent once (same payload).
        SELECT s.id,
               pg_notify(${RealtimeChannel}, '{"accountId":' || s.account_id || ',"messageId":' || s.id || '}'),
               pg_notify(${OutboxChannel}, '')
        FROM stored s ORDER BY s.id`

    /**
     * Writes the results of `batch`, atomically: one statement, in a transaction of its own only
     * when attachments are written too (or a retried message's earlier ones removed).
     */
    const storeBatch = (batch: ReadonlyArray<Ready>) =>
      Effect.gen(function*() {
        const at = yield* now
        const withAttachments = batch.some((ready) => ready.parsed.attachments.length > 0 || ready.message.processing_attempts > 1)
        const stored = withAttachments ? yield* storeWithAttachments(batch, at) : yield* storeStatement(batch, at)
        // The owner's archive marks, read again once the rows exist (migration 0012): a mark
        // committed after the store statement took its snapshot is seen here, and a mark
        // committed after this reads the row itself (its trigger waits for the message's lock).
        if (stored.length > 0) {
          yield* sql`
            UPDATE message_search ms SET archived = true FROM message_states s
            WHERE s.message_id IN ${sql.in(stored.map((row) => row.id))} AND s.archived AND NOT ms.archived
              AND ms.id = s.message_id AND ms.account_id = s.account_id`
        }
      }).pipe(Effect.asVoid, Effect.orDie)

    /** The store statement and the batch's attachments, in one transaction. */
    const storeWithAttachments = (batch: ReadonlyArray<Ready>, at: Date) =>
      sql.withTransaction(Effect.gen(function*() {
        const stored = yield* storeStatement(batch, at)
        const ours = new Set(stored.map((row) => row.id))
        const done = batch.filter((ready) => ours.has(ready.message.id))
        // Attachments: a message claimed for the first time has none stored yet.
        const again = done.filter((ready) => ready.message.processing_attempts > 1).map((ready) => ready.message.id)
        if (again.length > 0) yield* sql`DELETE FROM attachments WHERE message_id IN ${sql.in(again)}`
        const attachments = done.flatMap(({ message, parsed }) =>
          parsed.attachments.map((attachment, position) => ({
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
        )
        for (let i = 0; i < attachments.length; i += 1_000) {
          const [first, ...rest] = attachments.slice(i, i + 1_000)
          yield* sql`INSERT INTO attachments ${sql.insert([first!, ...rest])}`
        }
        return stored
      }))

    // -- group commit ---------------------------------------------------------------------------
    // Whoever brings a result while no store runs writes it, and then whatever queued meanwhile.
    const queued: Array<{ readonly ready: Ready; readonly done: Deferred.Deferred<void> }> = []
    let writing = false
    const takeBatch = () => {
      let bytes = 0
      let n = 0
      while (n < queued.length && n < StoreBatchMessages) {
        bytes += queued[n]!.ready.message.size_bytes
        if (n > 0 && bytes > StoreBatchBytes) break
        n++
      }
      return queued.splice(0, n)
    }
    const writeQueued = Effect.gen(function*() {
      for (;;) {
        // Checked and released in one step, so nothing can be queued unseen in between.
        if (queued.length === 0) {
          writing = false
          return
        }
        const batch = takeBatch()
        const exit = yield* Effect.exit(storeBatch(batch.map((item) => item.ready)))
        if (exit._tag === "Success" || batch.length === 1) {
          for (const item of batch) Deferred.doneUnsafe(item.done, exit)
          continue
        }
        // One of them broke the batch: each on its own, so only that one fails.
        for (const item of batch) Deferred.doneUnsafe(item.done, yield* Effect.exit(storeBatch([item.ready])))
      }
    })
    const store = (ready: Ready) =>
      Effect.gen(function*() {
        const done = yield* Deferred.make<void>()
        queued.push({ ready, done })
        if (!writing) {
          writing = true
          // If the writer is interrupted, the next result to arrive writes what is left.
          yield* writeQueued.pipe(Effect.onInterrupt(() => Effect.sync(() => {
            writing = false
          })))
        }
        yield* Deferred.await(done)
      })

    const budget = yield* Semaphore.make(WorkBudgetKiB)
    const processOne = (claimed: Claimed) =>
      Effect.gen(function*() {
        if (claimed.processing_attempts > MaxAttempts) return yield* fail(claimed.id, "gave_up_after_repeated_worker_failures")
        if (!claimed.has_raw) return yield* fail(claimed.id, "raw_missing")
        const raw = claimed.raw ?? (yield* sql<{ raw: Uint8Array }>`SELECT raw FROM message_raw WHERE message_id = ${claimed.id}`.pipe(Effect.orDie))[0]?.raw
        if (raw === undefined) return yield* fail(claimed.id, "raw_missing")
        const result = yield* Effect.promise(() => parseMessage(raw))
        if (!result.ok) return yield* fail(claimed.id, `unparsable: ${result.reason}`)
        // Injected test mail has no sending server to check.
        const auth = claimed.source === "smtp"
          ? yield* authenticateMail(raw, { ip: claimed.client_address, helo: claimed.client_helo, sender: claimed.envelope_from })
          : noAuth
        const analysis = analyzeMessage(result.message)
        // The bytes are not needed any more while the message waits for its store.
        yield* store({ message: { ...claimed, raw: null }, parsed: result.message, analysis, auth })
      }).pipe(
        budget.withPermits(workPermits(claimed.size_bytes)),
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
        yield* Effect.forEach(batch, processOne, { concurrency: BatchSize, discard: true })
        total += batch.length
      }
    })

    /**
     * Gives the claims of processes that are gone back to the pipeline: a claim names its
     * process, and a living process keeps at least one connection (its LISTEN) open, so a name
     * no connection shows any more is a process that died with messages in hand. Answers how
     * many were given back; they count as attempts (MaxAttempts still stops a message that keeps
     * killing its worker).
     */
    const takeOver = Effect.gen(function*() {
      const [row] = yield* sql<{ n: number }>`
        WITH orphaned AS (
          UPDATE messages m SET processing_status = 'stub'
          WHERE m.processing_status = 'processing' AND m.processing_worker IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.application_name = m.processing_worker)
          RETURNING m.id
        )
        SELECT count(*)::int AS n FROM orphaned`
      const n = row?.n ?? 0
      if (n > 0) yield* sql`SELECT pg_notify(${PipelineChannel}, '')`
      return n
    }).pipe(Effect.orDie)

    return { claim, processOne, drain, takeOver }
  })
}

/** The pipeline as a background fiber of the worker role (needs a DnsResolver). */
export const PipelineLive = Layer.effectDiscard(Effect.gen(function*() {
  const pg = yield* PgClient.PgClient
  const pipeline = yield* Pipeline.make
  const wakeups = yield* pg.listen(PipelineChannel).pipe(Effect.orDie)
  const waitForWork = Effect.race(Queue.take(wakeups).pipe(Effect.ignore), Effect.sleep("1 second"))
  const loop = pipeline.drain.pipe(
    Effect.andThen(waitForWork),
    Effect.catchCause((cause) => Effect.logError("pipeline loop", cause).pipe(Effect.andThen(Effect.sleep("1 second")))),
    Effect.forever
  )
  for (let i = 0; i < Loops; i++) yield* Effect.forkScoped(loop)
  // What crashed processes left claimed, taken over about a second after they are gone.
  yield* pipeline.takeOver.pipe(
    Effect.tap((n) => n > 0 ? Effect.logWarning(`pipeline: took over ${n} message(s) claimed by a process that is gone`) : Effect.void),
    Effect.andThen(Effect.sleep("1 second")),
    Effect.catchCause((cause) => Effect.logError("pipeline takeover", cause).pipe(Effect.andThen(Effect.sleep("1 second")))),
    Effect.forever,
    Effect.forkScoped
  )
}))
