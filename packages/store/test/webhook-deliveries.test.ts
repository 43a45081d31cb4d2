/**
 * The webhook delivery queue's repository, on its own against the embedded PostgreSQL: what
 * dispatch writes, what a claim takes, what recording an outcome changes, what retention
 * strips. Time is the harness's injected clock; nothing here sleeps.
 */
import { type EventType, eventId } from "@burnbox/domain"
import { type AttemptOutcome, type DeliveryJob, type FinishedAttempt, WebhookDeliveries } from "@burnbox/store"
import { type Harness, type Session, startHarness } from "@burnbox/testkit"
import { assert, expect, layer } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Effect, Layer, Redacted } from "effect"

class TestHarness extends Context.Service<TestHarness, Harness>()("burnbox/test/Harness") {}

const HarnessLive = Layer.effect(
  TestHarness,
  Effect.acquireRelease(
    Effect.promise(() => startHarness({ webhookAllowPrivate: true })),
    (h) => Effect.promise(() => h.close())
  )
)

/** The repository on the harness's database and clock. */
const RepositoryLive = Layer.unwrap(Effect.gen(function*() {
  const h = yield* TestHarness
  return WebhookDeliveries.layer.pipe(
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(h.databaseUrl), maxConnections: 2 })),
    Layer.provideMerge(Layer.succeed(Clock.Clock, h.clock))
  )
})).pipe(Layer.provideMerge(HarnessLive))

const Start = Date.parse("2026-11-21T12:00:00.000Z")
const minutes = (n: number) => n * 60_000
const days = (n: number) => n * 24 * 60 * 60_000

const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

/** When the test accounts and endpoints are made: before every event of the tests (an endpoint gets no earlier event). */
const Registered = Start - days(90)

/** A pro account with the given endpoints (all https://127.0.0.1:9/hook/<n>), registered at `Registered`. */
const accountWith = (subscriptions: ReadonlyArray<Record<string, unknown>>) =>
  Effect.gen(function*() {
    const h = yield* TestHarness
    const at = h.clock.now()
    h.clock.set(Registered)
    yield* Effect.addFinalizer(() => Effect.sync(() => h.clock.set(at)))
    const session: Session = yield* promise(() => h.signup({ plan: "pro" }))
    const endpoints: Array<number> = []
    for (const [n, subscription] of subscriptions.entries()) {
      const answer = yield* promise(() =>
        h.request("/webhooks", { method: "POST", session, body: { name: `hook ${n}`, url: `https://127.0.0.1:9/hook/${n}`, subscription } })
      )
      assert.strictEqual(answer.status, 201, answer.text)
      endpoints.push(answer.body.webhook.id)
    }
    return { accountId: session.accountId, endpoints }
  }).pipe(Effect.scoped)

/** Appends an event to the outbox, as the features that report one do. */
const appendEvent = (accountId: number, type: EventType, time: Date, data: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const h = yield* TestHarness
    const id = eventId(time.getTime())
    yield* promise(() =>
      h.query("INSERT INTO events (id, account_id, type, time, data) VALUES ($1, $2, $3, $4, $5)", [id, accountId, type, time, JSON.stringify(data)])
    )
    return id
  })

const query = <R extends Record<string, any> = any>(text: string, params: ReadonlyArray<unknown> = []) =>
  Effect.gen(function*() {
    const h = yield* TestHarness
    return yield* promise(() => h.query<R>(text, params))
  })

/** Every test starts at the same time, with nothing left due and nothing in the outbox. */
const fresh = Effect.gen(function*() {
  const h = yield* TestHarness
  h.clock.set(Start)
  yield* query("UPDATE webhook_deliveries SET status = 'abandoned', claimed_at = NULL WHERE status IN ('pending', 'delivering')")
  yield* query("DELETE FROM events_pending")
  return h
})

const ok: AttemptOutcome = { ok: true, status: 204, snippet: null, latencyMs: 12 }
const busy: AttemptOutcome = { ok: false, retryable: true, status: 503, errorCode: "http_503", snippet: "busy", latencyMs: 30 }
const gone: AttemptOutcome = { ok: false, retryable: false, status: 410, errorCode: "http_410", snippet: null, latencyMs: 8 }
const finished = (job: DeliveryJob, outcome: AttemptOutcome, retryInMs: number | null = null): FinishedAttempt => ({ job, outcome, retryInMs })

layer(RepositoryLive, { excludeTestServices: true, timeout: 120_000 })("WebhookDeliveries", (it) => {
  it.effect("dispatch writes one delivery per selected active endpoint, with the envelope bytes, marks the events dispatched and deletes those no endpoint receives", () =>
    Effect.gen(function*() {
      const h = yield* fresh
      const deliveries = yield* WebhookDeliveries
      const { accountId, endpoints: [all, otp, paused] } = yield* accountWith([{ mode: "all" }, { mode: "otp" }, { mode: "all" }])
      yield* query("UPDATE webhooks SET status = 'paused' WHERE id = $1", [paused])
      const other = yield* accountWith([])
      const time = new Date(Start - minutes(1))
      const claimed = yield* appendEvent(accountId, "alias.claimed", time, { alias: { id: 1, address: "a@burnbox.test", label: null } })
      const code = yield* appendEvent(accountId, "message.otp_extracted", new Date(Start - minutes(1) + 1), { message_id: 1, otp: "123456" })
      const test = yield* appendEvent(accountId, "webhook.test", time, { message: "test" })
      const elsewhere = yield* appendEvent(other.accountId, "alias.claimed", time, {})

      h.clock.set(Start + 1_000)
      assert.strictEqual(yield* deliveries.dispatchBatch(500), 4)

      const rows = yield* query<{ webhook_id: number; event_id: string; event_type: string; payload: Buffer; status: string; next_attempt_at: Date; created_at: Date }>(
        "SELECT webhook_id, event_id, event_type, payload, status, next_attempt_at, created_at FROM webhook_deliveries WHERE account_id = ANY($1::int[]) ORDER BY id",
        [[accountId, other.accountId]]
      )
      expect(rows.map((r) => [r.webhook_id, r.event_id, r.event_type, r.status])).toEqual([
        [all, claimed, "alias.claimed", "pending"],
        [all, code, "message.otp_extracted", "pending"],
        [otp, code, "message.otp_extracted", "pending"]
      ])
      expect(rows.map((r) => r.next_attempt_at.getTime())).toEqual([time.getTime(), time.getTime() + 1, time.getTime() + 1])
      expect(rows.map((r) => r.created_at.getTime())).toEqual(rows.map((r) => r.next_attempt_at.getTime()))
      expect(JSON.parse(rows[1]!.payload.toString("utf8"))).toEqual({
        id: code,
        type: "message.otp_extracted",
        time: new Date(time.getTime() + 1).toISOString(),
        api_version: "2026-08-31",
        shared_mailbox: false,
        owner_handle: null,
        data: { message_id: 1, otp: "123456" }
      })
      expect(rows[2]!.payload.equals(rows[1]!.payload)).toBe(true)

      // Every event taken is marked (out of events_pending), those that make no delivery too. Those
      // with a delivery stay, unchanged; the others (no endpoint of their account, or not dispatchable) are gone.
      const pending = yield* query<{ id: string }>("SELECT id FROM events_pending WHERE id = ANY($1::text[])", [[claimed, code, test, elsewhere]])
      expect(pending).toEqual([])
      const events = yield* query<{ id: string; dispatched_at: Date | null; data: unknown }>(
        "SELECT id, dispatched_at, data FROM events WHERE id = ANY($1::text[]) ORDER BY id", [[claimed, code, test, elsewhere]])
      expect(events).toEqual([
        { id: claimed, dispatched_at: null, data: { alias: { id: 1, address: "a@burnbox.test", label: null } } },
        { id: code, dispatched_at: null, data: { message_id: 1, otp: "123456" } }
      ].sort((a, b) => a.id < b.id ? -1 : 1))
      assert.strictEqual(yield* deliveries.dispatchBatch(500), 0)
    }))

  it.effect("dispatch takes at most `limit` events a batch, in outbox order", () =>
    Effect.gen(function*() {
      yield* fresh
      const deliveries = yield* WebhookDeliveries
      const { accountId, endpoints: [endpoint] } = yield* accountWith([{ mode: "all" }])
      const late = yield* appendEvent(accountId, "alias.paused", new Date(Start - minutes(1)))
      const early = yield* appendEvent(accountId, "alias.claimed", new Date(Start - minutes(3)))
      const middle = yield* appendEvent(accountId, "alias.burned", new Date(Start - minutes(2)))

      assert.strictEqual(yield* deliveries.dispatchBatch(2), 2)
      const first = yield* query<{ event_id: string }>("SELECT event_id FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY id", [endpoint])
      expect(first.map((r) => r.event_id)).toEqual([early, middle])
      assert.strictEqual(yield* deliveries.dispatchBatch(2), 1)
      const all = yield* query<{ event_id: string }>("SELECT event_id FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY id", [endpoint])
      expect(all.map((r) => r.event_id)).toEqual([early, middle, late])
    }))

  it.effect("claim takes due deliveries with what an attempt needs, leaves later ones, and takes over an expired lease", () =>
    Effect.gen(function*() {
      const h = yield* fresh
      const deliveries = yield* WebhookDeliveries
      const { accountId, endpoints: [endpoint] } = yield* accountWith([{ mode: "all" }])
      const due = yield* appendEvent(accountId, "alias.claimed", new Date(Start - minutes(1)))
      yield* appendEvent(accountId, "alias.paused", new Date(Start + minutes(10)))
      yield* deliveries.dispatchBatch(500)
      const leaseMs = minutes(5)

      const [job, ...more] = yield* deliveries.claim({ limit: 10, leaseMs })
      assert.deepStrictEqual(more, [])
      assert.isDefined(job)
      expect(job).toMatchObject({
        webhookId: endpoint,
        eventId: due,
        attemptCount: 0,
        cycleAttemptCount: 0,
        claimedAt: new Date(Start),
        url: "https://127.0.0.1:9/hook/0",
        spkiPin: null,
        webhookStatus: "active",
        deleted: false,
        secrets: { previous: null, previousExpiresAt: null }
      })
      assert.strictEqual(typeof job.id, "bigint")
      assert.isTrue(job.secrets.current.length > 0)
      assert.instanceOf(job.payload, Uint8Array)
      expect(JSON.parse(new TextDecoder().decode(job.payload!)).id).toBe(due)
      const [row] = yield* query("SELECT status, claimed_at FROM webhook_deliveries WHERE id = $1", [String(job.id)])
      expect(row).toEqual({ status: "delivering", claimed_at: new Date(Start) })

      // Held by a living claim: not taken again until its lease runs out.
      assert.deepStrictEqual(yield* deliveries.claim({ limit: 10, leaseMs }), [])
      h.clock.advance(leaseMs)
      assert.deepStrictEqual(yield* deliveries.claim({ limit: 10, leaseMs }), [])
      h.clock.advance(1)
      const [takenOver, ...rest] = yield* deliveries.claim({ limit: 10, leaseMs })
      assert.deepStrictEqual(rest, [])
      expect(takenOver).toMatchObject({ id: job.id, claimedAt: new Date(Start + leaseMs + 1) })

      // The later one falls due at its time; `limit` caps a claim.
      h.clock.set(Start + minutes(10))
      const later = yield* deliveries.claim({ limit: 1, leaseMs })
      expect(later.map((j) => j.webhookId)).toEqual([endpoint])
    }))

  it.effect("abandon gives up claimed deliveries only", () =>
    Effect.gen(function*() {
      yield* fresh
      const deliveries = yield* WebhookDeliveries
      const { accountId } = yield* accountWith([{ mode: "all" }])
      yield* appendEvent(accountId, "alias.claimed", new Date(Start - minutes(1)))
      yield* deliveries.dispatchBatch(500)
      const [job] = yield* deliveries.claim({ limit: 10, leaseMs: minutes(5) })
      yield* deliveries.abandon([job!.id])
      yield* deliveries.abandon([])
      const [row] = yield* query("SELECT status, claimed_at FROM webhook_deliveries WHERE id = $1", [String(job!.id)])
      expect(row).toEqual({ status: "abandoned", claimed_at: null })
    }))

  it.effect("record writes each attempt, the next step of each delivery and the endpoint's counters, for claims still held", () =>
    Effect.gen(function*() {
      yield* fresh
      const deliveries = yield* WebhookDeliveries
      const { accountId, endpoints: [endpoint] } = yield* accountWith([{ mode: "all" }])
      for (const [i, type] of (["alias.claimed", "alias.paused", "alias.burned", "alias.expiring"] as const).entries()) {
        yield* appendEvent(accountId, type, new Date(Start - minutes(4 - i)))
      }
      yield* deliveries.dispatchBatch(500)
      const [succeeded, retried, failed, stale] = yield* deliveries.claim({ limit: 10, leaseMs: minutes(5) })
      // Another worker took this one over meanwhile: its outcome is not this claim's to record.
      yield* query("UPDATE webhook_deliveries SET claimed_at = claimed_at + interval '1 second' WHERE id = $1", [String(stale!.id)])

      yield* deliveries.record([
        finished(succeeded!, ok),
        finished(retried!, busy, 61_000),
        finished(failed!, gone),
        finished(stale!, busy, 61_000)
      ])

      const rows = yield* query(
        `SELECT status, attempt_count, cycle_attempt_count, last_http_status, last_error, latency_ms, response_snippet,
                next_attempt_at, last_attempt_at, delivered_at, claimed_at
         FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY id`,
        [endpoint]
      )
      const at = new Date(Start)
      const common = { attempt_count: 1, cycle_attempt_count: 1, last_attempt_at: at, claimed_at: null }
      expect(rows).toEqual([
        { ...common, status: "succeeded", last_http_status: 204, last_error: null, latency_ms: 12, response_snippet: null, next_attempt_at: at, delivered_at: at },
        { ...common, status: "pending", last_http_status: 503, last_error: "http_503", latency_ms: 30, response_snippet: "busy", next_attempt_at: new Date(Start + 61_000), delivered_at: null },
        { ...common, status: "failed", last_http_status: 410, last_error: "http_410", latency_ms: 8, response_snippet: null, next_attempt_at: at, delivered_at: null },
        {
          status: "delivering",
          attempt_count: 0,
          cycle_attempt_count: 0,
          last_http_status: null,
          last_error: null,
          latency_ms: null,
          response_snippet: null,
          next_attempt_at: new Date(Start - minutes(1)),
          last_attempt_at: null,
          delivered_at: null,
          claimed_at: new Date(Start + 1000)
        }
      ])
      const attempts = yield* query(
        `SELECT a.attempt, a.status, a.http_status, a.error_code, a.latency_ms, a.response_snippet, a.attempted_at
         FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.webhook_id = $1 ORDER BY d.id`,
        [endpoint]
      )
      expect(attempts).toEqual([
        { attempt: 1, status: "succeeded", http_status: 204, error_code: null, latency_ms: 12, response_snippet: null, attempted_at: at },
        { attempt: 1, status: "failed", http_status: 503, error_code: "http_503", latency_ms: 30, response_snippet: "busy", attempted_at: at },
        { attempt: 1, status: "failed", http_status: 410, error_code: "http_410", latency_ms: 8, response_snippet: null, attempted_at: at }
      ])
      // A success, then two failures: two failures since.
      const [counters] = yield* query(
        "SELECT status, failure_count, last_success_at, last_failure_at, failure_since FROM webhooks WHERE id = $1", [endpoint])
      expect(counters).toEqual({ status: "active", failure_count: 2, last_success_at: at, last_failure_at: at, failure_since: at })
    }))

  it.effect("record disables an endpoint failing for three days, abandons its queue and leaves its owner a notice", () =>
    Effect.gen(function*() {
      const h = yield* fresh
      const deliveries = yield* WebhookDeliveries
      const { accountId, endpoints: [endpoint] } = yield* accountWith([{ mode: "all" }])
      const since = new Date(Start - days(3))
      yield* query("UPDATE webhooks SET failure_since = $1, failure_count = 5 WHERE id = $2", [since, endpoint])
      yield* appendEvent(accountId, "alias.claimed", new Date(Start - minutes(2)))
      yield* appendEvent(accountId, "alias.paused", new Date(Start + minutes(10)))
      yield* deliveries.dispatchBatch(500)
      const [job] = yield* deliveries.claim({ limit: 10, leaseMs: minutes(5) })

      yield* deliveries.record([finished(job!, busy, 61_000)])

      const [webhook] = yield* query("SELECT status, disabled_at, failure_count FROM webhooks WHERE id = $1", [endpoint])
      expect(webhook).toEqual({ status: "disabled", disabled_at: h.clock.now(), failure_count: 6 })
      const queue = yield* query("SELECT status, claimed_at FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY id", [endpoint])
      expect(queue).toEqual([{ status: "abandoned", claimed_at: null }, { status: "abandoned", claimed_at: null }])
      const notices = yield* query("SELECT kind, data, created_at FROM account_notices WHERE account_id = $1", [accountId])
      expect(notices).toEqual([{
        kind: "webhook.disabled",
        data: { webhookId: endpoint, name: "hook 0", failureSince: since.toISOString() },
        created_at: h.clock.now()
      }])
    }))

  it.effect("purge strips the payload and log of deliveries 30 days old, and deletes them 30 days later", () =>
    Effect.gen(function*() {
      const h = yield* fresh
      const deliveries = yield* WebhookDeliveries
      const { accountId, endpoints: [endpoint] } = yield* accountWith([{ mode: "all" }])
      yield* appendEvent(accountId, "alias.claimed", new Date(Start - days(30)))
      yield* appendEvent(accountId, "alias.paused", new Date(Start - days(29)))
      yield* deliveries.dispatchBatch(500)
      const [old, recent] = yield* deliveries.claim({ limit: 10, leaseMs: minutes(5) })
      yield* deliveries.record([finished(old!, busy, 61_000), finished(recent!, busy, 61_000)])
      const state = () =>
        query(
          `SELECT d.status, d.payload IS NULL AS stripped, d.response_snippet, d.last_error, d.purged_at,
                  (SELECT count(*)::int FROM webhook_attempts a WHERE a.delivery_id = d.id) AS attempts
           FROM webhook_deliveries d WHERE d.webhook_id = $1 ORDER BY d.id`,
          [endpoint]
        )
      const kept = { status: "pending", stripped: false, response_snippet: "busy", last_error: "http_503", purged_at: null, attempts: 1 }

      assert.strictEqual(yield* deliveries.purge, 1)
      const purgedAt = new Date(Start)
      expect(yield* state()).toEqual([
        { status: "abandoned", stripped: true, response_snippet: null, last_error: null, purged_at: purgedAt, attempts: 0 },
        kept
      ])
      assert.strictEqual(yield* deliveries.purge, 0)

      // A day later the other one is 30 days old; the stripped one stays until 30 days after its purge.
      h.clock.advance(days(1))
      assert.strictEqual(yield* deliveries.purge, 1)
      expect((yield* state()).map((r) => [r.stripped, r.attempts])).toEqual([[true, 0], [true, 0]])
      h.clock.set(Start + days(30))
      yield* deliveries.purge
      expect((yield* state()).map((r) => r.purged_at)).toEqual([new Date(Start + days(1))])
    }))
})
