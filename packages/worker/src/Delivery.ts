/**
 * Webhook delivery (spec 6.4, 6.5; decisions.md "Webhook subscriptions").
 *
 * 1. Dispatch: undispatched outbox events are claimed with FOR UPDATE SKIP LOCKED; each
 *    becomes one `webhook_deliveries` row per matching active endpoint, holding the exact
 *    body bytes, in the same transaction that marks the event dispatched.
 * 2. Delivery: due rows are claimed (`delivering`, with a lease); a row whose lease ran out
 *    belongs to a worker that died and is claimed again, so a crash loses no event (the
 *    receiver may see it twice under the same webhook-id, which it deduplicates).
 *    Each attempt re-checks the URL, resolves DNS once, checks every address, and connects
 *    to the checked address (no second lookup, so no DNS rebinding); TLS is verified against
 *    the host name, and a set SPKI pin must match. Redirects are not followed.
 * 3. Outcome: 2xx succeeds; connection errors, timeouts, 429 and 5xx retry on the schedule
 *    (eight attempts in a cycle); anything else is terminal. An endpoint with only failures
 *    for three days is disabled, its queue abandoned and its owner notified (account_notices).
 * 4. Retention: after 30 days a delivery's payload and log are purged (redelivery answers 410).
 */
import {
  DeliveryRetentionMs,
  DeliveryTimeoutMs,
  DisableAfterFailingMs,
  envelopeBytes,
  type EventType,
  isRetryableStatus,
  payloadTextBody,
  retryDelayMs,
  selectsEvent,
  type WebhookSubscription
} from "@burnbox/domain"
import { messageText } from "@burnbox/domain/mail/index"
import { type BatchSigner, ConnectionsPerTarget, now, OutboundHttp, OutboxChannel, Signer, type TargetCheck } from "@burnbox/store"
import { Effect, Layer, Queue } from "effect"
import { SqlClient } from "effect/sql"
import { PgClient } from "@effect/sql-pg"

/** Deliveries claimed at a time, and attempted concurrently within a claim. */
const BatchSize = 256
const Concurrency = ConnectionsPerTarget
/**
 * A claim older than this belongs to a worker that died. A claim's outcomes are recorded when
 * all its attempts are done: up to BatchSize / Concurrency attempts one after another, each at
 * most DeliveryTimeoutMs, with 30 s more for the target checks and the recording, so a living
 * worker's claim is never taken (and sent twice) while it is still at work.
 */
export const DeliveryLeaseMs = Math.ceil(BatchSize / Concurrency) * DeliveryTimeoutMs + 30_000
/** Outbox events turned into deliveries per transaction. */
const DispatchBatchSize = 500

// ---------------------------------------------------------------------------------------------
// The engine

interface EventRow {
  id: string
  account_id: number
  alias_id: number | null
  type: EventType
  time: Date
  data: Record<string, unknown>
}

const messageIdOf = (event: EventRow): number | null =>
  typeof event.data["message_id"] === "number" ? event.data["message_id"] : null

interface EndpointRow {
  id: number
  account_id: number
  subscription: WebhookSubscription
  include_text_body: boolean
  include_message_restored: boolean
  created_at: Date
}

interface DeliveryJob {
  id: string
  webhook_id: number
  event_id: string
  payload: Uint8Array | null
  attempt_count: number
  cycle_attempt_count: number
  claimed_at: Date
  url: string
  spki_pin: string | null
  webhook_status: string
  deleted: boolean
  secret_encrypted: string
  previous_secret_encrypted: string | null
  previous_secret_expires_at: Date | null
}

type Outcome =
  | { readonly ok: true; readonly status: number; readonly snippet: string | null; readonly latencyMs: number }
  | {
    readonly ok: false
    readonly retryable: boolean
    readonly status: number | null
    readonly errorCode: string
    readonly snippet: string | null
    readonly latencyMs: number
  }

/** The engine: dispatch, delivery and purge, each a pass over what is due at the clock's time. */
export const makeDelivery = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const signer = yield* Signer
  const http = yield* OutboundHttp

  // -- dispatch -------------------------------------------------------------------------------

  /**
   * One delivery row per (event, selected endpoint), for a batch of events: the endpoints of
   * every account in the batch, the tags of every message and (for endpoints that asked for it)
   * the text bodies are each read with one query, and the rows written with one insert.
   */
  const dispatchEvents = (events: ReadonlyArray<EventRow>) =>
    Effect.gen(function*() {
      const accountIds = [...new Set(events.map((e) => e.account_id))]
      if (accountIds.length === 0) return 0
      const endpoints = yield* sql<EndpointRow>`
        SELECT id, account_id, subscription, include_text_body, include_message_restored, created_at FROM webhooks
        WHERE account_id IN ${sql.in(accountIds)} AND status = 'active' AND deleted_at IS NULL
        ORDER BY id`
      if (endpoints.length === 0) return 0
      const byAccount = new Map<number, Array<EndpointRow>>()
      for (const endpoint of endpoints) {
        const list = byAccount.get(endpoint.account_id)
        if (list === undefined) byAccount.set(endpoint.account_id, [endpoint])
        else list.push(endpoint)
      }
      const relevant = events.filter((e) => byAccount.has(e.account_id))
      const messageIds = [...new Set(relevant.flatMap((e) => {
        const id = messageIdOf(e)
        return id === null ? [] : [id]
      }))]
      const tags = new Map<string, Array<number>>()
      const byTag = relevant.some((e) => byAccount.get(e.account_id)!.some((endpoint) => endpoint.subscription.mode === "tag"))
      if (byTag && messageIds.length > 0) {
        const rows = yield* sql<{ message_id: number; account_id: number; tag_id: number }>`
          SELECT message_id, account_id, tag_id FROM message_tags WHERE message_id IN ${sql.in(messageIds)}`
        for (const row of rows) {
          const key = `${row.message_id}:${row.account_id}`
          const list = tags.get(key)
          if (list === undefined) tags.set(key, [row.tag_id])
          else list.push(row.tag_id)
        }
      }
      const selections = relevant.map((event) => {
        const messageId = messageIdOf(event)
        const alias = event.data["alias"] as { label?: unknown } | undefined
        const selected = (byAccount.get(event.account_id) ?? []).filter((endpoint) =>
          endpoint.created_at <= event.time &&
          selectsEvent(
            { subscription: endpoint.subscription, includeMessageRestored: endpoint.include_message_restored },
            {
              type: event.type,
              aliasId: event.alias_id,
              aliasLabel: typeof alias?.label === "string" ? alias.label : null,
              messageTagIds: messageId === null ? [] : tags.get(`${messageId}:${event.account_id}`) ?? []
            }
          )
        )
        return { event, messageId, selected }
      })
      const textIds = [...new Set(selections.flatMap(({ event, messageId, selected }) =>
        messageId !== null && event.type === "message.received" && selected.some((e) => e.include_text_body) ? [messageId] : []
      ))]
      const texts = new Map<number, string>()
      if (textIds.length > 0) {
        const rows = yield* sql<{ id: number; text_body: string | null; html_original: string | null }>`
          SELECT id, text_body, html_original FROM messages WHERE id IN ${sql.in(textIds)}`
        for (const row of rows) texts.set(row.id, payloadTextBody(messageText(row.text_body, row.html_original)))
      }
      const rows: Array<{
        webhook_id: number
        account_id: number
        event_id: string
        event_type: string
        payload: Uint8Array
        next_attempt_at: Date
        created_at: Date
      }> = []
      for (const { event, messageId, selected } of selections) {
        if (selected.length === 0) continue
        const plain = envelopeBytes(event)
        let withText: Uint8Array | undefined
        for (const endpoint of selected) {
          let payload = plain
          if (endpoint.include_text_body && event.type === "message.received" && messageId !== null) {
            withText ??= envelopeBytes({ ...event, data: { ...event.data, text_body: texts.get(messageId) ?? payloadTextBody("") } })
            payload = withText
          }
          rows.push({
            webhook_id: endpoint.id,
            account_id: event.account_id,
            event_id: event.id,
            event_type: event.type,
            payload,
            next_attempt_at: event.time,
            created_at: event.time
          })
        }
      }
      // At most 7 parameters a row: well under PostgreSQL's 32767 for a batch of 500 events x a few endpoints.
      for (let i = 0; i < rows.length; i += 4_000) {
        const [first, ...rest] = rows.slice(i, i + 4_000)
        yield* sql`INSERT INTO webhook_deliveries ${sql.insert([first!, ...rest])} ON CONFLICT (webhook_id, event_id) DO NOTHING`
      }
      return rows.length
    })

  /** Turns a batch of outbox events into deliveries; answers how many events it took. */
  const dispatchBatch = Effect.gen(function*() {
    const at = yield* now
    return yield* sql.withTransaction(Effect.gen(function*() {
      // Taken and marked in one statement; dispatched in outbox order.
      const taken = yield* sql<EventRow>`
        UPDATE events SET dispatched_at = ${at}
        WHERE id IN (
          SELECT id FROM events WHERE dispatched_at IS NULL ORDER BY time, id LIMIT ${DispatchBatchSize} FOR UPDATE SKIP LOCKED)
        RETURNING id, account_id, alias_id, type, time, data`
      const events = [...taken].sort((a, b) => a.time.getTime() - b.time.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      yield* dispatchEvents(events.filter((event) => event.type !== "webhook.test"))
      return events.length
    }))
  }).pipe(Effect.orDie, Effect.withSpan("Delivery.dispatch"))

  const dispatch = Effect.gen(function*() {
    let total = 0
    for (;;) {
      const n = yield* dispatchBatch
      total += n
      if (n < DispatchBatchSize) return total
    }
  })

  // -- delivery -------------------------------------------------------------------------------

  /** Claims due deliveries, with what an attempt needs, in one statement. */
  const claim = Effect.gen(function*() {
    const at = yield* now
    return yield* sql<DeliveryJob>`
      WITH claimed AS (
        UPDATE webhook_deliveries SET status = 'delivering', claimed_at = ${at}
        WHERE id IN (
          SELECT id FROM webhook_deliveries
          WHERE (status = 'pending' AND next_attempt_at <= ${at})
             OR (status = 'delivering' AND claimed_at < ${new Date(at.getTime() - DeliveryLeaseMs)})
          ORDER BY next_attempt_at, id LIMIT ${BatchSize} FOR UPDATE SKIP LOCKED)
        RETURNING id, webhook_id, event_id, payload, attempt_count, cycle_attempt_count, claimed_at, next_attempt_at)
      SELECT c.id, c.webhook_id, c.event_id, c.payload, c.attempt_count, c.cycle_attempt_count, c.claimed_at,
             w.url, w.spki_pin, w.status AS webhook_status, (w.deleted_at IS NOT NULL) AS deleted,
             w.secret_encrypted, w.previous_secret_encrypted, w.previous_secret_expires_at
      FROM claimed c JOIN webhooks w ON w.id = c.webhook_id
      ORDER BY c.next_attempt_at, c.id`.pipe(Effect.orDie)
  })

  const attempt = (job: DeliveryJob, signing: BatchSigner, targets: ReadonlyMap<string, TargetCheck>): Effect.Effect<Outcome> =>
    Effect.gen(function*() {
      if (job.payload === null) return { ok: false, retryable: false, status: null, errorCode: "payload_expired", snippet: null, latencyMs: 0 } as const
      const payload = job.payload
      const target = targets.get(job.url) ?? (yield* http.check(job.url))
      if (!target.ok) {
        // A URL that breaks the rules is final; a name that resolves badly now may not later.
        const retryable = target.reason === "private_address" || target.reason === "unresolvable"
        return { ok: false, retryable, status: null, errorCode: target.reason, snippet: null, latencyMs: 0 } as const
      }
      const at = yield* now
      const timestamp = Math.floor(at.getTime() / 1000)
      const signature = yield* signing.sign(
        { current: job.secret_encrypted, previous: job.previous_secret_encrypted, previousExpiresAt: job.previous_secret_expires_at },
        { id: job.event_id, timestamp, body: payload },
        at
      )
      const result = yield* http.post(target, payload, {
        "content-type": "application/json",
        "user-agent": "burnbox-webhooks/2026-08-31",
        "webhook-id": job.event_id,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": signature
      }, { spkiPin: job.spki_pin, timeoutMs: DeliveryTimeoutMs })
      if (result.kind === "error") {
        return { ok: false, retryable: true, status: null, errorCode: result.errorCode, snippet: null, latencyMs: result.latencyMs } as const
      }
      if (result.status >= 200 && result.status <= 299) {
        return { ok: true, status: result.status, snippet: result.snippet, latencyMs: result.latencyMs } as const
      }
      const errorCode = result.status >= 300 && result.status <= 399 ? "redirect_refused" : `http_${result.status}`
      return {
        ok: false,
        retryable: isRetryableStatus(result.status),
        status: result.status,
        errorCode,
        snippet: result.snippet,
        latencyMs: result.latencyMs
      } as const
    })

  /**
   * Records the outcomes of a batch in one transaction, in the order the attempts finished:
   * the deliveries and their attempt history with one statement each, then each endpoint's
   * success and failure counters as if the outcomes had been applied one by one.
   */
  const record = (done: ReadonlyArray<{ readonly job: DeliveryJob; readonly outcome: Outcome }>) =>
    sql.withTransaction(Effect.gen(function*() {
      if (done.length === 0) return
      const at = yield* now
      const rows = done.map(({ job, outcome }) => {
        const cycle = job.cycle_attempt_count + 1
        const delay = outcome.ok || !outcome.retryable ? null : retryDelayMs(cycle, Math.random())
        return {
          job,
          outcome,
          attempt: job.attempt_count + 1,
          cycle,
          status: outcome.ok ? "succeeded" : delay === null ? "failed" : "pending",
          nextAttemptAt: delay === null ? at : new Date(at.getTime() + delay)
        }
      })
      // Endpoints first, in id order, then their deliveries: the order every writer of both
      // takes, so two batches (or a PATCH meanwhile) cannot deadlock.
      const webhookIds = [...new Set(rows.map((r) => r.job.webhook_id))].sort((a, b) => a - b)
      yield* sql`SELECT id FROM webhooks WHERE id IN ${sql.in(webhookIds)} ORDER BY id FOR UPDATE`
      // Rows go in as one JSON document: the driver cannot type an array that holds only nulls.
      const updated = yield* sql<{ id: string }>`
        UPDATE webhook_deliveries d SET
          status = u.status, attempt_count = u.attempt, cycle_attempt_count = u.cycle,
          last_http_status = u.http_status, last_error = u.error, latency_ms = u.latency_ms, response_snippet = u.snippet,
          next_attempt_at = u.next_attempt_at, last_attempt_at = ${at},
          delivered_at = CASE WHEN u.status = 'succeeded' THEN ${at}::timestamptz END, claimed_at = NULL
        FROM json_to_recordset(${JSON.stringify(rows.map((r) => ({
          id: String(r.job.id),
          status: r.status,
          attempt: r.attempt,
          cycle: r.cycle,
          http_status: r.outcome.status,
          error: r.outcome.ok ? null : r.outcome.errorCode,
          latency_ms: r.outcome.latencyMs,
          snippet: r.outcome.snippet,
          next_attempt_at: r.nextAttemptAt.toISOString(),
          claimed_at: r.job.claimed_at.toISOString()
        })))}::json) AS u(id bigint, status text, attempt int, cycle int, http_status int, error text, latency_ms int,
                            snippet text, next_attempt_at timestamptz, claimed_at timestamptz)
        WHERE d.id = u.id AND d.status = 'delivering' AND d.claimed_at = u.claimed_at
        RETURNING d.id`
      // Rows not updated were abandoned (endpoint paused or deleted) or taken over by another worker meanwhile.
      const kept = new Set(updated.map((r) => String(r.id)))
      const recorded = rows.filter((r) => kept.has(String(r.job.id)))
      if (recorded.length === 0) return
      yield* sql`
        INSERT INTO webhook_attempts (delivery_id, attempt, status, http_status, error_code, latency_ms, response_snippet, attempted_at)
        SELECT u.id, u.attempt, u.status, u.http_status, u.error, u.latency_ms, u.snippet, ${at}
        FROM json_to_recordset(${JSON.stringify(recorded.map((r) => ({
          id: String(r.job.id),
          attempt: r.attempt,
          status: r.outcome.ok ? "succeeded" : "failed",
          http_status: r.outcome.status,
          error: r.outcome.ok ? null : r.outcome.errorCode,
          latency_ms: r.outcome.latencyMs,
          snippet: r.outcome.snippet
        })))}::json) AS u(id bigint, attempt int, status text, http_status int, error text, latency_ms int, snippet text)
        ON CONFLICT DO NOTHING`
      // Per endpoint: did any attempt succeed, and how many failures came after the last success.
      const perEndpoint = new Map<number, { succeeded: boolean; trailing: number; failed: boolean }>()
      for (const r of recorded) {
        const e = perEndpoint.get(r.job.webhook_id) ?? { succeeded: false, trailing: 0, failed: false }
        if (r.outcome.ok) {
          e.succeeded = true
          e.trailing = 0
        } else {
          e.failed = true
          e.trailing++
        }
        perEndpoint.set(r.job.webhook_id, e)
      }
      const endpoints = [...perEndpoint].sort((a, b) => a[0] - b[0])
      const counted = yield* sql<{ id: number; account_id: number; name: string; status: string; failure_since: Date | null }>`
        UPDATE webhooks w SET
          last_success_at = CASE WHEN u.succeeded THEN ${at}::timestamptz ELSE w.last_success_at END,
          failure_count = CASE WHEN u.succeeded THEN u.failures_after ELSE w.failure_count + u.failures_after END,
          failure_since = CASE WHEN u.failures_after = 0 THEN NULL WHEN u.succeeded THEN ${at}::timestamptz
                               ELSE COALESCE(w.failure_since, ${at}::timestamptz) END,
          last_failure_at = CASE WHEN u.failed THEN ${at}::timestamptz ELSE w.last_failure_at END
        FROM json_to_recordset(${JSON.stringify(endpoints.map(([id, e]) => ({ id, succeeded: e.succeeded, failures_after: e.trailing, failed: e.failed })))}::json)
          AS u(id int, succeeded boolean, failures_after int, failed boolean)
        WHERE w.id = u.id
        RETURNING w.id, w.account_id, w.name, w.status, w.failure_since`
      for (const webhook of [...counted].sort((a, b) => a.id - b.id)) {
        if (webhook.status !== "active" || webhook.failure_since === null) continue
        if (at.getTime() - webhook.failure_since.getTime() < DisableAfterFailingMs) continue
        yield* sql`UPDATE webhooks SET status = 'disabled', disabled_at = ${at}, updated_at = ${at} WHERE id = ${webhook.id}`
        yield* sql`UPDATE webhook_deliveries SET status = 'abandoned', claimed_at = NULL
                   WHERE webhook_id = ${webhook.id} AND status IN ('pending', 'delivering')`
        yield* sql`
          INSERT INTO account_notices (account_id, kind, data, created_at)
          VALUES (${webhook.account_id}, 'webhook.disabled',
                  ${JSON.stringify({ webhookId: webhook.id, name: webhook.name, failureSince: webhook.failure_since.toISOString() })}::jsonb,
                  ${at})`
        yield* Effect.logWarning(`webhook ${webhook.id} disabled after three days of failures`)
      }
    })).pipe(Effect.orDie)

  /** Attempts one claimed batch concurrently and records the outcomes together. */
  const deliverBatch = (jobs: ReadonlyArray<DeliveryJob>) =>
    Effect.gen(function*() {
      const inactive = jobs.filter((job) => job.webhook_status !== "active" || job.deleted)
      if (inactive.length > 0) {
        yield* sql`UPDATE webhook_deliveries SET status = 'abandoned', claimed_at = NULL
                   WHERE id IN ${sql.in(inactive.map((job) => job.id))} AND status = 'delivering'`.pipe(Effect.orDie)
      }
      const active = jobs.filter((job) => job.webhook_status === "active" && !job.deleted)
      if (active.length === 0) return
      const signing = yield* signer.forBatch
      // Each URL of the batch is checked (rules, DNS, every address) once, just before its attempts.
      const urls = [...new Set(active.flatMap((job) => (job.payload === null ? [] : [job.url])))]
      const targets = new Map(yield* Effect.forEach(urls, (url) =>
        Effect.map(http.check(url), (check) => [url, check] as const), { concurrency: 16 }))
      const done: Array<{ job: DeliveryJob; outcome: Outcome }> = []
      yield* Effect.forEach(active, (job) =>
        attempt(job, signing, targets).pipe(
          Effect.tap((outcome) => Effect.sync(() => done.push({ job, outcome }))),
          Effect.catchCause((cause) => Effect.logError(`webhook delivery ${job.id} failed`, cause))
        ), { concurrency: Concurrency, discard: true })
      yield* record(done)
    }).pipe(Effect.catchCause((cause) => Effect.logError(`webhook delivery batch failed`, cause)))

  /** Delivers everything due now (not retries that fall due meanwhile); answers how many attempts ran. */
  const deliverDue = Effect.gen(function*() {
    let total = 0
    for (;;) {
      const batch = yield* claim
      if (batch.length === 0) return total
      yield* deliverBatch(batch)
      total += batch.length
    }
  }).pipe(Effect.withSpan("Delivery.deliverDue"))

  // -- retention ------------------------------------------------------------------------------

  const purge = Effect.gen(function*() {
    const at = yield* now
    const cutoff = new Date(at.getTime() - DeliveryRetentionMs)
    return yield* sql.withTransaction(Effect.gen(function*() {
      const purged = yield* sql<{ id: string }>`
        UPDATE webhook_deliveries SET payload = NULL, response_snippet = NULL, last_error = NULL, purged_at = ${at},
               status = CASE WHEN status IN ('pending', 'delivering') THEN 'abandoned' ELSE status END
        WHERE created_at <= ${cutoff} AND purged_at IS NULL RETURNING id`
      if (purged.length > 0) yield* sql`DELETE FROM webhook_attempts WHERE delivery_id IN ${sql.in(purged.map((r) => r.id))}`
      // The stripped rows answer 410 for another 30 days, then go; so do long-deleted endpoints.
      yield* sql`DELETE FROM webhook_deliveries WHERE purged_at <= ${cutoff}`
      yield* sql`DELETE FROM webhooks WHERE deleted_at <= ${cutoff}`
      return purged.length
    }))
  }).pipe(Effect.orDie, Effect.withSpan("Delivery.purge"))

  /** One pass: dispatch the outbox, then attempt every due delivery. */
  const runOnce = Effect.gen(function*() {
    const dispatched = yield* dispatch
    const attempted = yield* deliverDue
    return { dispatched, attempted }
  })

  return { dispatch, claim, deliverBatch, deliverDue, purge, runOnce }
})

/**
 * Delivery as a background fiber of the worker role: a pass as soon as an event is appended
 * (LISTEN on the outbox channel), and every second anyway for retries; a purge every hour.
 */
export const DeliveryLive = Layer.effectDiscard(Effect.gen(function*() {
  const delivery = yield* makeDelivery
  const pg = yield* PgClient.PgClient
  const wakeups = yield* pg.listen(OutboxChannel).pipe(Effect.orDie)
  let lastPurge = 0
  const pass = Effect.gen(function*() {
    yield* delivery.runOnce
    const at = yield* now
    if (at.getTime() - lastPurge >= 60 * 60 * 1000) {
      lastPurge = at.getTime()
      yield* delivery.purge
    }
  })
  yield* pass.pipe(
    Effect.catchCause((cause) => Effect.logError("webhook delivery loop", cause)),
    Effect.andThen(Effect.race(Queue.take(wakeups).pipe(Effect.ignore), Effect.sleep("1 second"))),
    Effect.forever,
    Effect.forkScoped
  )
})).pipe(Layer.provide(Layer.mergeAll(Signer.layer, OutboundHttp.layer)))
