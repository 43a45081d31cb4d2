/**
 * Webhook endpoints against the embedded PostgreSQL, called directly: created with a secret
 * shown once and kept encrypted, changed, paused and removed with their queue, the secret
 * rotated with a day of overlap, the delivery log as the owner reads it, and the service's
 * own signing keys. Host names
 * resolve to a public address here, through the resolver the URL check uses.
 */
import { DeliveryRetentionMs, SecretOverlapMs } from "@burnbox/domain"
import { keyId } from "@burnbox/domain/webhooks/index"
import {
  Accounts,
  Entitlements,
  BurnboxConfig,
  dbText,
  decryptEndpointSecret,
  PreviousKeyPublishedMs,
  ServiceKeys,
  TargetResolver,
  Webhooks
} from "@burnbox/store"
import { TestDatabase } from "@burnbox/testkit"
import { assert, layer } from "@effect/vitest"
import { Clock, Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"

const Store = Layer.mergeAll(Webhooks.layer, Accounts.layer).pipe(
  Layer.provideMerge(Layer.succeed(TargetResolver, () => Effect.succeed(["93.184.215.14"]))),
  Layer.provideMerge(Entitlements.layer), Layer.provideMerge(TestDatabase)
)

let created = 0
const newAccount = Effect.gen(function*() {
  const accounts = yield* Accounts
  return yield* accounts.create({ email: `hooks${++created}@example.com`, password: "correct horse battery", plan: "pro" })
}).pipe(Effect.orDie)

const nowDate = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

const endpoint = (accountId: number, name = "orders") =>
  Effect.gen(function*() {
    const webhooks = yield* Webhooks
    return yield* webhooks.create(accountId, { name, url: "https://hooks.example.com/in", subscription: { mode: "all" } })
  }).pipe(Effect.orDie)

/** The endpoint's stored secrets, decrypted. */
const storedSecrets = (id: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* BurnboxConfig
    const [row] = yield* sql<{ secret_encrypted: string; previous_secret_encrypted: string | null; previous_secret_expires_at: Date | null }>`
      SELECT secret_encrypted, previous_secret_encrypted, previous_secret_expires_at FROM webhooks WHERE id = ${id}`
    return {
      current: Redacted.value(decryptEndpointSecret(row!.secret_encrypted, config.secret)),
      previous: row!.previous_secret_encrypted === null ? null : Redacted.value(decryptEndpointSecret(row!.previous_secret_encrypted, config.secret)),
      previousExpiresAt: row!.previous_secret_expires_at
    }
  }).pipe(Effect.orDie)

/** The statuses of the endpoint's deliveries, oldest first. */
const deliveryStatuses = (webhookId: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ status: string }>`SELECT status FROM webhook_deliveries WHERE webhook_id = ${webhookId} ORDER BY id`
    return rows.map((r) => r.status)
  }).pipe(Effect.orDie)

layer(Store)("Webhooks: endpoints", (it) => {
  it.effect("a new endpoint is active at secret version 1; its secret is answered once and kept only encrypted", () =>
    Effect.gen(function*() {
      const webhooks = yield* Webhooks
      const sql = yield* SqlClient.SqlClient
      const account = yield* newAccount
      const at = yield* nowDate
      const { secret, webhook } = yield* webhooks.create(account.id, {
        name: "orders",
        url: "https://hooks.example.com/in",
        subscription: { mode: "aliases", alias_ids: [3, 5] },
        include_text_body: true
      })
      assert.deepStrictEqual(webhook, {
        id: webhook.id,
        name: "orders",
        url: "https://hooks.example.com/in",
        subscription: { mode: "aliases", alias_ids: [3, 5] },
        spkiPin: null,
        includeTextBody: true,
        includeMessageRestored: false,
        status: "active",
        failureCount: 0,
        secretVersion: 1,
        lastSuccessAt: null,
        lastFailureAt: null,
        failureSince: null,
        disabledAt: null,
        createdAt: at.toISOString(),
        updatedAt: at.toISOString()
      })
      assert.match(Redacted.value(secret), /^whsec_/)
      assert.deepStrictEqual(yield* storedSecrets(webhook.id), { current: Redacted.value(secret), previous: null, previousExpiresAt: null })
      const [clear] = yield* sql<{ n: number }>`
        SELECT count(*)::int AS n FROM webhooks WHERE id = ${webhook.id} AND to_jsonb(webhooks)::text LIKE ${`%${Redacted.value(secret)}%`}`
      assert.strictEqual(clear!.n, 0)
      assert.deepStrictEqual(yield* webhooks.list(account.id), [webhook])
    }))

  it.effect("an account holds at most its limit of endpoints; a removed one no longer counts and is gone from the list", () =>
    Effect.gen(function*() {
      const webhooks = yield* Webhooks
      const account = yield* newAccount
      const input = { name: "hook", url: "https://hooks.example.com/in", subscription: { mode: "all" as const } }
      yield* (yield* Accounts).changeOverrides(account.id, { webhookCount: 2 })
      const first = yield* webhooks.create(account.id, input)
      const second = yield* webhooks.create(account.id, input)
      assert.deepInclude(yield* Effect.flip(webhooks.create(account.id, input)), { _tag: "WebhookLimitReached", limit: 2 })
      yield* webhooks.remove(account.id, first.webhook.id)
      assert.deepStrictEqual((yield* webhooks.list(account.id)).map((w) => w.id), [second.webhook.id])
      assert.deepStrictEqual(yield* webhooks.listWithLimit(account.id), { items: yield* webhooks.list(account.id), limit: 2 })
      yield* webhooks.create(account.id, input)
    }))

  it.effect("an update changes only what it names, and its updatedAt", () =>
    Effect.gen(function*() {
      const webhooks = yield* Webhooks
      const account = yield* newAccount
      const { webhook } = yield* endpoint(account.id)
      yield* TestClock.adjust(5_000)
      const pin = `sha256/${"A".repeat(43)}=`
      const updated = yield* webhooks.update(account.id, webhook.id, {
        name: "renamed",
        url: "https://other.example.com/hook",
        subscription: { mode: "tag", tag_id: 9 },
        spki_pin: pin,
        include_message_restored: true
      })
      assert.deepStrictEqual(updated, {
        ...webhook,
        name: "renamed",
        url: "https://other.example.com/hook",
        subscription: { mode: "tag", tag_id: 9 },
        spkiPin: pin,
        includeMessageRestored: true,
        updatedAt: new Date(Date.parse(webhook.updatedAt) + 5_000).toISOString()
      })
      const cleared = yield* webhooks.update(account.id, webhook.id, { spki_pin: null })
      assert.deepStrictEqual(cleared, { ...updated, spkiPin: null })
    }))

  it.effect("pausing an endpoint abandons its queued deliveries; reactivating a disabled one clears its failure state", () =>
    Effect.gen(function*() {
      const webhooks = yield* Webhooks
      const sql = yield* SqlClient.SqlClient
      const account = yield* newAccount
      const { webhook } = yield* endpoint(account.id)
      yield* webhooks.queueTest(account.id, webhook.id)
      assert.deepStrictEqual(yield* deliveryStatuses(webhook.id), ["pending"])
      assert.strictEqual((yield* webhooks.update(account.id, webhook.id, { status: "paused" })).status, "paused")
      assert.deepStrictEqual(yield* deliveryStatuses(webhook.id), ["abandoned"])
      yield* sql`UPDATE webhooks SET status = 'disabled', disabled_at = now(), failure_since = now() - interval '3 days', failure_count = 40
                 WHERE id = ${webhook.id}`
      const reactivated = yield* webhooks.update(account.id, webhook.id, { status: "active" })
      assert.deepInclude(reactivated, { status: "active", disabledAt: null, failureSince: null, failureCount: 40 })
    }))

  it.effect("a rotated secret replaces the current one; the old one keeps signing for a day", () =>
    Effect.gen(function*() {
      const webhooks = yield* Webhooks
      const account = yield* newAccount
      const { secret: old, webhook } = yield* endpoint(account.id)
      const at = yield* nowDate
      const rotated = yield* webhooks.rotateSecret(account.id, webhook.id)
      assert.strictEqual(rotated.webhook.secretVersion, 2)
      assert.notStrictEqual(Redacted.value(rotated.secret), Redacted.value(old))
      assert.deepStrictEqual(yield* storedSecrets(webhook.id), {
        current: Redacted.value(rotated.secret),
        previous: Redacted.value(old),
        previousExpiresAt: new Date(at.getTime() + SecretOverlapMs)
      })
      const again = yield* webhooks.rotateSecret(account.id, webhook.id)
      assert.strictEqual(again.webhook.secretVersion, 3)
      assert.strictEqual((yield* storedSecrets(webhook.id)).previous, Redacted.value(rotated.secret))
    }))
})

layer(Store)("Webhooks: deliveries", (it) => {
  it.effect("the delivery log lists the account's deliveries newest first, with their attempts, and each endpoint's on its own", () =>
    Effect.gen(function*() {
      const webhooks = yield* Webhooks
      const sql = yield* SqlClient.SqlClient
      const account = yield* newAccount
      const stranger = yield* newAccount
      const orders = (yield* endpoint(account.id, "orders")).webhook
      const alerts = (yield* endpoint(account.id, "alerts")).webhook
      yield* endpoint(stranger.id).pipe(Effect.flatMap(({ webhook }) => webhooks.queueTest(stranger.id, webhook.id)))
      const first = yield* webhooks.queueTest(account.id, orders.id)
      yield* TestClock.adjust(1_000)
      const second = yield* webhooks.queueTest(account.id, alerts.id)
      const at = yield* nowDate
      assert.deepStrictEqual(second, {
        id: second.id,
        webhookId: alerts.id,
        eventId: second.eventId,
        eventType: "webhook.test",
        status: "pending",
        attemptCount: 0,
        cycleAttemptCount: 0,
        nextAttemptAt: at.toISOString(),
        createdAt: at.toISOString()
      })
      const attemptedAt = new Date(at.getTime() + 2_000)
      yield* sql`
        UPDATE webhook_deliveries SET status = 'pending', attempt_count = 1, cycle_attempt_count = 1, last_http_status = 503,
               last_error = 'http_503', latency_ms = 87, response_snippet = 'busy', last_attempt_at = ${attemptedAt},
               next_attempt_at = ${new Date(attemptedAt.getTime() + 60_000)}
        WHERE id = ${first.id}`
      yield* sql`
        INSERT INTO webhook_attempts (delivery_id, attempt, status, http_status, error_code, latency_ms, response_snippet, attempted_at)
        VALUES (${first.id}, 1, 'failed', 503, 'http_503', 87, 'busy', ${attemptedAt})`
      const log = yield* webhooks.deliveries(account.id, null, 10)
      assert.deepStrictEqual(log.map((d) => [d.id, d.webhookName]), [[second.id, "alerts"], [first.id, "orders"]])
      assert.deepStrictEqual(log[1], {
        id: first.id,
        webhookId: orders.id,
        webhookName: "orders",
        eventId: first.eventId,
        eventType: "webhook.test",
        status: "pending",
        attemptCount: 1,
        cycleAttemptCount: 1,
        lastHttpStatus: 503,
        lastError: "http_503",
        latencyMs: 87,
        responseSnippet: "busy",
        nextAttemptAt: dbText(new Date(attemptedAt.getTime() + 60_000)),
        lastAttemptAt: dbText(attemptedAt),
        deliveredAt: null,
        createdAt: dbText(new Date(at.getTime() - 1_000)),
        attempts: [{
          attempt: 1,
          status: "failed",
          httpStatus: 503,
          errorCode: "http_503",
          latencyMs: 87,
          responseSnippet: "busy",
          attemptedAt: attemptedAt.toISOString()
        }]
      })
      assert.deepStrictEqual(log[0]!.attempts, [])
      assert.deepStrictEqual((yield* webhooks.deliveries(account.id, orders.id, 10)).map((d) => d.id), [first.id])
      assert.deepStrictEqual((yield* webhooks.deliveries(account.id, null, 1)).map((d) => d.id), [second.id])
      assert.deepInclude(yield* Effect.flip(webhooks.deliveries(stranger.id, orders.id, 10)), { _tag: "WebhookNotFound", webhookId: orders.id })
    }))

  it.effect("a delivery leaves the log 30 days after it was made", () =>
    Effect.gen(function*() {
      const webhooks = yield* Webhooks
      const account = yield* newAccount
      const { webhook } = yield* endpoint(account.id)
      const delivery = yield* webhooks.queueTest(account.id, webhook.id)
      yield* TestClock.adjust(DeliveryRetentionMs - 1)
      assert.deepStrictEqual((yield* webhooks.deliveries(account.id, webhook.id, 10)).map((d) => d.id), [delivery.id])
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(yield* webhooks.deliveries(account.id, webhook.id, 10), [])
    }))

  it.effect("a redelivery sends the same event again in a fresh cycle, keeping its attempt count; not while one is under way", () =>
    Effect.gen(function*() {
      const webhooks = yield* Webhooks
      const sql = yield* SqlClient.SqlClient
      const account = yield* newAccount
      const { webhook } = yield* endpoint(account.id)
      const delivery = yield* webhooks.queueTest(account.id, webhook.id)
      yield* sql`UPDATE webhook_deliveries SET status = 'failed', attempt_count = 8, cycle_attempt_count = 8 WHERE id = ${delivery.id}`
      yield* TestClock.adjust(60_000)
      const at = yield* nowDate
      assert.deepStrictEqual(yield* webhooks.redeliver(account.id, delivery.id), {
        ...delivery,
        status: "pending",
        attemptCount: 8,
        cycleAttemptCount: 0,
        nextAttemptAt: at.toISOString()
      })
      yield* sql`UPDATE webhook_deliveries SET status = 'delivering' WHERE id = ${delivery.id}`
      assert.deepInclude(yield* Effect.flip(webhooks.redeliver(account.id, delivery.id)), { _tag: "DeliveryInProgress", deliveryId: delivery.id })
    }))
})

layer(ServiceKeys.layer.pipe(Layer.provideMerge(TestDatabase)))("Webhooks: the service's signing keys", (it) => {
  it.effect("the first start makes one current key, published and signing", () =>
    Effect.gen(function*() {
      const keys = yield* ServiceKeys
      const signing = yield* keys.signingKeys
      assert.strictEqual(signing.length, 1)
      assert.deepInclude(signing[0]!, { kid: keyId(signing[0]!.publicKey), status: "current" })
      assert.strictEqual(signing[0]!.privateKey.length, 32)
      const { keys: published } = yield* keys.keySet
      assert.deepStrictEqual(published.map((k) => [k.kid, k.status, k.alg]), [[signing[0]!.kid, "current", "Ed25519"]])
      assert.strictEqual(published[0]!.publicKey, Buffer.from(signing[0]!.publicKey).toString("base64"))
    }))

  it.effect("a rotated key stays published, and keeps signing, for seven days as the previous key", () =>
    Effect.gen(function*() {
      const keys = yield* ServiceKeys
      const [before] = yield* keys.signingKeys
      yield* TestClock.adjust(1_000)
      const at = yield* nowDate
      const { keySet, kid } = yield* keys.rotate
      assert.deepStrictEqual(keySet.keys.map((k) => [k.kid, k.status]), [[kid, "current"], [before!.kid, "previous"]])
      assert.strictEqual(keySet.keys[0]!.createdAt, at.toISOString())
      assert.deepStrictEqual((yield* keys.signingKeys).map((k) => [k.kid, k.status]), [[kid, "current"], [before!.kid, "previous"]])
      yield* TestClock.adjust(PreviousKeyPublishedMs - 1)
      assert.strictEqual((yield* keys.keySet).keys.length, 2)
      yield* TestClock.adjust(1)
      assert.deepStrictEqual((yield* keys.keySet).keys.map((k) => k.kid), [kid])
      assert.deepStrictEqual((yield* keys.signingKeys).map((k) => k.kid), [kid])
    }))
})
