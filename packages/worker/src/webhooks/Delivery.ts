/**
 * Webhook delivery (spec 6.4, 6.5; decisions.md "Webhook subscriptions").
 *
 * The engine: its loops, batches, concurrency and retry decisions. The queue's statements are
 * the store's (`WebhookDeliveries`), requests go out through `OutboundHttp`, and `Signer` signs.
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
import { DeliveryTimeoutMs, isRetryableStatus, retryDelayMs } from "@burnbox/domain"
import {
  type AttemptOutcome,
  type BatchSigner,
  ConnectionsPerTarget,
  type DeliveryJob,
  type FinishedAttempt,
  now,
  OutboundHttp,
  Signer,
  type TargetCheck,
  WebhookDeliveries
} from "@burnbox/store"
import { Effect, Layer, Queue } from "effect"

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

/**
 * The retry decision: a retryable failure waits for the next step of the schedule (eight
 * attempts in a cycle), with jitter; anything else, or a spent cycle, is final.
 */
const finished = (job: DeliveryJob, outcome: AttemptOutcome): FinishedAttempt => ({
  job,
  outcome,
  retryInMs: outcome.ok || !outcome.retryable ? null : retryDelayMs(job.cycleAttemptCount + 1, Math.random())
})

/**
 * The engine: dispatch, delivery and purge, each a pass over what is due at the clock's time.
 * It needs the queue's storage (WebhookDeliveries), the way out (OutboundHttp) and the
 * signatures (Signer), all from StoreLive.
 */
export const makeDelivery = Effect.gen(function*() {
  const deliveries = yield* WebhookDeliveries
  const http = yield* OutboundHttp
  const signer = yield* Signer

  // -- dispatch -------------------------------------------------------------------------------

  const dispatch = Effect.gen(function*() {
    let total = 0
    for (;;) {
      const n = yield* deliveries.dispatchBatch(DispatchBatchSize)
      total += n
      if (n < DispatchBatchSize) return total
    }
  }).pipe(Effect.withSpan("Delivery.dispatch"))

  // -- delivery -------------------------------------------------------------------------------

  /** Claims due deliveries, with what an attempt needs. */
  const claim = deliveries.claim({ limit: BatchSize, leaseMs: DeliveryLeaseMs })

  const attempt = (job: DeliveryJob, signing: BatchSigner, targets: ReadonlyMap<string, TargetCheck>): Effect.Effect<AttemptOutcome> =>
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
      const signature = yield* signing.sign(job.secrets, { id: job.eventId, timestamp, body: payload }, at)
      const result = yield* http.post(target, payload, {
        "content-type": "application/json",
        "user-agent": "burnbox-webhooks/2026-08-31",
        "webhook-id": job.eventId,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": signature
      }, { spkiPin: job.spkiPin, timeoutMs: DeliveryTimeoutMs })
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

  /** Attempts one claimed batch concurrently and records the outcomes together. */
  const deliverBatch = (jobs: ReadonlyArray<DeliveryJob>) =>
    Effect.gen(function*() {
      yield* deliveries.abandon(jobs.filter((job) => job.webhookStatus !== "active" || job.deleted).map((job) => job.id))
      const active = jobs.filter((job) => job.webhookStatus === "active" && !job.deleted)
      if (active.length === 0) return
      const signing = yield* signer.forBatch
      // Each URL of the batch is checked (rules, DNS, every address) once, just before its attempts.
      const urls = [...new Set(active.flatMap((job) => (job.payload === null ? [] : [job.url])))]
      const targets = new Map(yield* Effect.forEach(urls, (url) =>
        Effect.map(http.check(url), (check) => [url, check] as const), { concurrency: 16 }))
      const done: Array<FinishedAttempt> = []
      yield* Effect.forEach(active, (job) =>
        attempt(job, signing, targets).pipe(
          Effect.tap((outcome) => Effect.sync(() => done.push(finished(job, outcome)))),
          Effect.catchCause((cause) => Effect.logError(`webhook delivery ${job.id} failed`, cause))
        ), { concurrency: Concurrency, discard: true })
      yield* deliveries.record(done)
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

  const purge = deliveries.purge.pipe(Effect.withSpan("Delivery.purge"))

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
 * (LISTEN on the outbox channel; the notifications that came during a pass wake one pass), and
 * every second anyway for retries; a purge every hour.
 */
export const DeliveryLive = Layer.effectDiscard(Effect.gen(function*() {
  const delivery = yield* makeDelivery
  const wakeups = yield* (yield* WebhookDeliveries).wakeups
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
    // Every wake-up that arrived during the pass is answered by the next one: a burst of commits
    // (a CI fleet's claims, mail and burns) costs one pass, not one per notification.
    Effect.andThen(Effect.race(Queue.takeAll(wakeups).pipe(Effect.ignore), Effect.sleep("1 second"))),
    Effect.forever,
    Effect.forkScoped
  )
}))
