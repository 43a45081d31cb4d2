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
import { createHash, X509Certificate } from "node:crypto"
import { readFileSync } from "node:fs"
import { request as httpsRequest } from "node:https"
import { isIP } from "node:net"
import { checkServerIdentity, type PeerCertificate, rootCertificates } from "node:tls"
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
import { signatureHeader } from "@burnbox/domain/webhooks/index"
import { BurnboxConfig, checkTarget, decryptEndpointSecret, now, OutboxChannel, ServiceKeys } from "@burnbox/store"
import { Effect, Layer, Option, Queue, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { PgClient } from "@effect/sql-pg"

/** A claim older than this belongs to a worker that died (an attempt takes at most 15 s). */
export const DeliveryLeaseMs = 60_000
const BatchSize = 16
const SnippetChars = 512

// ---------------------------------------------------------------------------------------------
// One HTTPS POST

export interface PostTarget {
  readonly url: URL
  /** Host name for SNI and certificate checks (or the IP literal). */
  readonly host: string
  /** The address that passed the policy: the only one connected to. */
  readonly address: string
}

export type PostResult =
  | { readonly kind: "response"; readonly status: number; readonly snippet: string | null; readonly latencyMs: number }
  | { readonly kind: "error"; readonly errorCode: string; readonly latencyMs: number }

/**
 * `sha256/<base64 SHA-256 of the DER SubjectPublicKeyInfo>` of a certificate. Taken from the
 * certificate's DER, not `cert.pubkey`, which for EC keys is the bare point, not the SPKI.
 */
export const spkiPinOf = (cert: { readonly raw: Buffer }): string => {
  const spki = new X509Certificate(cert.raw).publicKey.export({ type: "spki", format: "der" })
  return `sha256/${createHash("sha256").update(spki).digest("base64")}`
}

const errorCodeOf = (error: unknown): string => {
  const code = (error as { code?: unknown }).code
  switch (code) {
    case "ERR_SPKI_PIN_MISMATCH":
      return "spki_pin_mismatch"
    case "ERR_DELIVERY_TIMEOUT":
      return "timeout"
    case "ECONNREFUSED":
      return "connection_refused"
    case "ECONNRESET":
    case "EPIPE":
      return "connection_reset"
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return "unreachable"
    default:
      if (typeof code === "string" && /CERT|TLS|SSL|SELF_SIGNED|UNABLE_TO/.test(code)) return "tls_error"
      return "connection_error"
  }
}

export const postOnce = (
  target: PostTarget,
  body: Uint8Array,
  headers: Record<string, string>,
  options: { readonly ca: ReadonlyArray<string> | undefined; readonly spkiPin: string | null; readonly timeoutMs: number }
): Promise<PostResult> =>
  new Promise((resolve) => {
    const started = performance.now()
    const elapsed = () => Math.max(0, Math.round(performance.now() - started))
    let settled = false
    const finish = (result: PostResult) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve(result)
    }
    const request = httpsRequest({
      host: target.address,
      port: target.url.port === "" ? 443 : Number(target.url.port),
      path: `${target.url.pathname}${target.url.search}`,
      method: "POST",
      ...(isIP(target.host) === 0 ? { servername: target.host } : {}),
      headers: { ...headers, host: target.url.host, "content-length": String(body.byteLength) },
      agent: false,
      ...(options.ca === undefined ? {} : { ca: [...options.ca] }),
      // Runs inside the handshake, before a byte of the body is sent.
      checkServerIdentity: (_host: string, cert: PeerCertificate) => {
        const identity = checkServerIdentity(target.host, cert)
        if (identity !== undefined) return identity
        if (options.spkiPin !== null && spkiPinOf(cert) !== options.spkiPin) {
          return Object.assign(new Error("The receiver's public key does not match the endpoint's spki_pin"), { code: "ERR_SPKI_PIN_MISMATCH" })
        }
        return undefined
      }
    }, (response) => {
      const status = response.statusCode ?? 0
      const chunks: Array<Buffer> = []
      let size = 0
      const done = () => {
        const text = Buffer.concat(chunks).toString("utf8").slice(0, SnippetChars)
        finish({ kind: "response", status, snippet: text === "" ? null : text, latencyMs: elapsed() })
        response.destroy()
      }
      response.on("data", (chunk: Buffer) => {
        chunks.push(chunk)
        size += chunk.length
        if (size >= SnippetChars * 4) done()
      })
      response.on("end", done)
      response.on("error", done)
    })
    const timer = setTimeout(() => {
      request.destroy(Object.assign(new Error("The receiver did not answer in time"), { code: "ERR_DELIVERY_TIMEOUT" }))
    }, options.timeoutMs)
    request.on("error", (error) => finish({ kind: "error", errorCode: errorCodeOf(error), latencyMs: elapsed() }))
    request.end(body)
  })

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
  subscription: WebhookSubscription
  include_text_body: boolean
  include_message_restored: boolean
}

interface ClaimedRow {
  id: string
  claimed_at: Date
}

interface DeliveryJob {
  id: string
  webhook_id: number
  event_id: string
  payload: Uint8Array | null
  attempt_count: number
  cycle_attempt_count: number
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
  const config = yield* BurnboxConfig
  const keys = yield* ServiceKeys
  const ca = Option.isSome(config.webhookCaFile)
    ? [...rootCertificates, readFileSync(config.webhookCaFile.value, "utf8")]
    : undefined

  // -- dispatch -------------------------------------------------------------------------------

  const dispatchOne = (event: EventRow) =>
    Effect.gen(function*() {
      const endpoints = yield* sql<EndpointRow>`
        SELECT id, subscription, include_text_body, include_message_restored FROM webhooks
        WHERE account_id = ${event.account_id} AND status = 'active' AND deleted_at IS NULL AND created_at <= ${event.time}
        ORDER BY id`
      if (endpoints.length === 0) return 0
      const messageId = messageIdOf(event)
      const tagIds = messageId === null ? [] : (yield* sql<{ tag_id: number }>`
        SELECT tag_id FROM message_tags WHERE message_id = ${messageId} AND account_id = ${event.account_id}`).map((r) => r.tag_id)
      const alias = event.data["alias"] as { label?: unknown } | undefined
      const selected = endpoints.filter((endpoint) =>
        selectsEvent(
          { subscription: endpoint.subscription, includeMessageRestored: endpoint.include_message_restored },
          { type: event.type, aliasId: event.alias_id, aliasLabel: typeof alias?.label === "string" ? alias.label : null, messageTagIds: tagIds }
        )
      )
      if (selected.length === 0) return 0
      let withText: Uint8Array | undefined
      const plain = envelopeBytes(event)
      for (const endpoint of selected) {
        let payload = plain
        if (endpoint.include_text_body && event.type === "message.received" && messageId !== null) {
          if (withText === undefined) {
            const [message] = yield* sql<{ text_body: string | null; html_original: string | null }>`
              SELECT text_body, html_original FROM messages WHERE id = ${messageId}`
            withText = envelopeBytes({
              ...event,
              data: { ...event.data, text_body: payloadTextBody(messageText(message?.text_body ?? null, message?.html_original ?? null)) }
            })
          }
          payload = withText
        }
        yield* sql`
          INSERT INTO webhook_deliveries (webhook_id, account_id, event_id, event_type, payload, next_attempt_at, created_at)
          VALUES (${endpoint.id}, ${event.account_id}, ${event.id}, ${event.type}, ${payload}, ${event.time}, ${event.time})
          ON CONFLICT (webhook_id, event_id) DO NOTHING`
      }
      return selected.length
    })

  /** Turns a batch of outbox events into deliveries; answers how many events it took. */
  const dispatchBatch = Effect.gen(function*() {
    const at = yield* now
    return yield* sql.withTransaction(Effect.gen(function*() {
      const events = yield* sql<EventRow>`
        SELECT id, account_id, alias_id, type, time, data FROM events
        WHERE dispatched_at IS NULL ORDER BY time, id LIMIT 100 FOR UPDATE SKIP LOCKED`
      for (const event of events) {
        if (event.type !== "webhook.test") yield* dispatchOne(event)
      }
      if (events.length > 0) yield* sql`UPDATE events SET dispatched_at = ${at} WHERE id IN ${sql.in(events.map((e) => e.id))}`
      return events.length
    }))
  }).pipe(Effect.orDie, Effect.withSpan("Delivery.dispatch"))

  const dispatch = Effect.gen(function*() {
    let total = 0
    for (;;) {
      const n = yield* dispatchBatch
      total += n
      if (n === 0) return total
    }
  })

  // -- delivery -------------------------------------------------------------------------------

  const claim = Effect.gen(function*() {
    const at = yield* now
    return yield* sql<ClaimedRow>`
      UPDATE webhook_deliveries SET status = 'delivering', claimed_at = ${at}
      WHERE id IN (
        SELECT id FROM webhook_deliveries
        WHERE (status = 'pending' AND next_attempt_at <= ${at})
           OR (status = 'delivering' AND claimed_at < ${new Date(at.getTime() - DeliveryLeaseMs)})
        ORDER BY next_attempt_at, id LIMIT ${BatchSize} FOR UPDATE SKIP LOCKED)
      RETURNING id, claimed_at`.pipe(Effect.orDie)
  })

  const attempt = (job: DeliveryJob, at: Date): Effect.Effect<Outcome> =>
    Effect.gen(function*() {
      if (job.payload === null) return { ok: false, retryable: false, status: null, errorCode: "payload_expired", snippet: null, latencyMs: 0 } as const
      const target = yield* checkTarget(job.url, config.webhookAllowPrivate)
      if (!target.ok) {
        // A URL that breaks the rules is final; a name that resolves badly now may not later.
        const retryable = target.reason === "private_address" || target.reason === "unresolvable"
        return { ok: false, retryable, status: null, errorCode: target.reason, snippet: null, latencyMs: 0 } as const
      }
      const secrets = [decryptEndpointSecret(job.secret_encrypted, config.secret)]
      if (job.previous_secret_encrypted !== null && job.previous_secret_expires_at !== null && job.previous_secret_expires_at > at) {
        secrets.push(decryptEndpointSecret(job.previous_secret_encrypted, config.secret))
      }
      const signing = yield* keys.signingKeys
      const timestamp = Math.floor(at.getTime() / 1000)
      const signature = signatureHeader({
        secrets: secrets.map(Redacted.value),
        ed25519Keys: signing.map((k) => k.privateKey),
        id: job.event_id,
        timestamp,
        body: job.payload
      })
      const result = yield* Effect.promise(() =>
        postOnce(target, job.payload!, {
          "content-type": "application/json",
          "user-agent": "burnbox-webhooks/2026-08-31",
          "webhook-id": job.event_id,
          "webhook-timestamp": String(timestamp),
          "webhook-signature": signature
        }, { ca, spkiPin: job.spki_pin, timeoutMs: DeliveryTimeoutMs })
      )
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

  const record = (job: DeliveryJob, claimedAt: Date, outcome: Outcome) =>
    sql.withTransaction(Effect.gen(function*() {
      const at = yield* now
      const attemptNo = job.attempt_count + 1
      const cycle = job.cycle_attempt_count + 1
      const delay = outcome.ok || !outcome.retryable ? null : retryDelayMs(cycle, Math.random())
      const status = outcome.ok ? "succeeded" : delay === null ? "failed" : "pending"
      // Endpoint first, then its deliveries: the order every writer of both takes, so two
      // outcomes of one endpoint recorded at once (or a PATCH meanwhile) cannot deadlock.
      yield* sql`SELECT id FROM webhooks WHERE id = ${job.webhook_id} FOR UPDATE`
      const updated = yield* sql`
        UPDATE webhook_deliveries SET
          status = ${status}, attempt_count = ${attemptNo}, cycle_attempt_count = ${cycle},
          last_http_status = ${outcome.status}, last_error = ${outcome.ok ? null : outcome.errorCode},
          latency_ms = ${outcome.latencyMs}, response_snippet = ${outcome.snippet},
          next_attempt_at = ${delay === null ? at : new Date(at.getTime() + delay)},
          last_attempt_at = ${at}, delivered_at = ${outcome.ok ? at : null}, claimed_at = NULL
        WHERE id = ${job.id} AND status = 'delivering' AND claimed_at = ${claimedAt}
        RETURNING id`
      // Abandoned (endpoint paused or deleted) or taken over by another worker meanwhile.
      if (updated.length === 0) return
      yield* sql`
        INSERT INTO webhook_attempts (delivery_id, attempt, status, http_status, error_code, latency_ms, response_snippet, attempted_at)
        VALUES (${job.id}, ${attemptNo}, ${outcome.ok ? "succeeded" : "failed"}, ${outcome.status},
                ${outcome.ok ? null : outcome.errorCode}, ${outcome.latencyMs}, ${outcome.snippet}, ${at})
        ON CONFLICT DO NOTHING`
      if (outcome.ok) {
        yield* sql`
          UPDATE webhooks SET last_success_at = ${at}, failure_count = 0, failure_since = NULL WHERE id = ${job.webhook_id}`
        return
      }
      const [webhook] = yield* sql<{ account_id: number; name: string; status: string; failure_since: Date }>`
        UPDATE webhooks SET failure_count = failure_count + 1, last_failure_at = ${at},
                            failure_since = COALESCE(failure_since, ${at})
        WHERE id = ${job.webhook_id} RETURNING account_id, name, status, failure_since`
      if (webhook !== undefined && webhook.status === "active" && at.getTime() - webhook.failure_since.getTime() >= DisableAfterFailingMs) {
        yield* sql`UPDATE webhooks SET status = 'disabled', disabled_at = ${at}, updated_at = ${at} WHERE id = ${job.webhook_id}`
        yield* sql`UPDATE webhook_deliveries SET status = 'abandoned', claimed_at = NULL
                   WHERE webhook_id = ${job.webhook_id} AND status IN ('pending', 'delivering')`
        yield* sql`
          INSERT INTO account_notices (account_id, kind, data, created_at)
          VALUES (${webhook.account_id}, 'webhook.disabled',
                  ${JSON.stringify({ webhookId: job.webhook_id, name: webhook.name, failureSince: webhook.failure_since.toISOString() })}::jsonb,
                  ${at})`
        yield* Effect.logWarning(`webhook ${job.webhook_id} disabled after three days of failures`)
      }
    })).pipe(Effect.orDie)

  const deliverOne = (claimed: ClaimedRow) =>
    Effect.gen(function*() {
      const at = yield* now
      const [job] = yield* sql<DeliveryJob>`
        SELECT d.id, d.webhook_id, d.event_id, d.payload, d.attempt_count, d.cycle_attempt_count,
               w.url, w.spki_pin, w.status AS webhook_status, (w.deleted_at IS NOT NULL) AS deleted,
               w.secret_encrypted, w.previous_secret_encrypted, w.previous_secret_expires_at
        FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
        WHERE d.id = ${claimed.id}`.pipe(Effect.orDie)
      if (job === undefined) return
      if (job.webhook_status !== "active" || job.deleted) {
        yield* sql`UPDATE webhook_deliveries SET status = 'abandoned', claimed_at = NULL WHERE id = ${job.id} AND status = 'delivering'`
          .pipe(Effect.orDie)
        return
      }
      const outcome = yield* attempt(job, at)
      yield* record(job, claimed.claimed_at, outcome)
    }).pipe(Effect.catchCause((cause) => Effect.logError(`webhook delivery ${claimed.id} failed`, cause)))

  /** Delivers everything due now (not retries that fall due meanwhile); answers how many attempts ran. */
  const deliverDue = Effect.gen(function*() {
    let total = 0
    for (;;) {
      const batch = yield* claim
      if (batch.length === 0) return total
      yield* Effect.forEach(batch, deliverOne, { concurrency: 8, discard: true })
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

  return { dispatch, claim, deliverOne, deliverDue, purge, runOnce }
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
})).pipe(Layer.provide(ServiceKeys.layer))
