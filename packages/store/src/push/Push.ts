/**
 * Browser push (spec 2.20, 4.1, 7; decisions.md "Browser push"; issue #32).
 *
 * - `VapidKeys`: the application server's key pair (RFC 8292), from BURNBOX_VAPID_PUBLIC_KEY /
 *   BURNBOX_VAPID_PRIVATE_KEY (base64url), else generated once into the data directory
 *   (`vapid.json`, mode 0600) and read from there by every process.
 * - `Push`: the account's settings, its subscriptions (the endpoint checked by OutboundHttp's
 *   SSRF rules, kept but never answered: the API shows its SHA-256), a mailbox's preference (the
 *   owner's on the alias, a guest's own on its share) and the test push (queued, never sent in
 *   the request).
 * - `PushSender`: sends what is due. Pushes are queued in `push_deliveries` by the pipeline's
 *   statement itself (the trigger of migration 0020: a processed message on an alias with push on,
 *   for an account with push on, one row per enabled subscription, and likewise for live guests
 *   whose own preference is on) and by the test push; the worker's `push` job sends them (RFC 8291
 *   aes128gcm, or aesgcm when the subscription asks, with a VAPID JWT; TTL 24 h, urgency high for
 *   mail with a code) through OutboundHttp (SSRF guard, CA file, timeouts, as webhooks), retries
 *   with backoff for a day, deletes a subscription its push service answers 404 or 410, and
 *   records `last_success_at`.
 */
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { PgClient } from "@effect/sql-pg"
import {
  type Alias,
  AliasNotFound,
  type CreatePushSubscription,
  type PushPayload,
  PushQueueUnavailable,
  type PushSettings,
  type PushSubscription,
  PushSubscriptionExists,
  PushSubscriptionNotFound,
  PushSubscriptionRefused,
  PushTestLimited
} from "@burnbox/domain"
import { Config, Context, Effect, Layer, Option, type Queue, Redacted, Schema, type Scope } from "effect"
import { SqlClient } from "effect/sql"
import webpush from "web-push"
import { Aliases } from "../aliases/Aliases.ts"
import { BurnboxConfig } from "../platform/Config.ts"
import { OutboundHttp } from "../platform/OutboundHttp.ts"
import { RateLimiter } from "../platform/RateLimiter.ts"
import { rowsDecoder } from "../platform/Rows.ts"
import { now } from "../platform/Time.ts"
import { liveGuestShare } from "../sharing/MailboxAccess.ts"

/** Notified (at commit) whenever a push is queued, so the senders start at once. */
export const PushChannel = "burnbox_push"

/** A push is retained by the push service this long (decisions.md: TTL 24 h); it is retried no longer. */
export const PushTtlSeconds = 86_400
/** Attempts before a push is given up (the webhooks' number). */
export const PushMaxAttempts = 8
/** Seconds before attempt n+1 after n failed ones. */
export const pushBackoffSeconds = (attempts: number) => [10, 60, 300, 1800, 3600, 7200, 14_400][attempts - 1] ?? 14_400
/** A claim older than this belongs to a sender that died: taken again. */
export const PushLeaseMs = 60_000
/** Test pushes: per account and per source address an hour, and how many may wait unsent. */
export const PushTestWindows = {
  account: [{ limit: 10, seconds: 3600 }],
  address: [{ limit: 30, seconds: 3600 }],
  outstanding: 3
} as const

// -- VAPID ------------------------------------------------------------------------------------

export interface VapidKeyPair {
  readonly publicKey: string
  readonly privateKey: Redacted.Redacted<string>
}

const base64urlBytes = (text: string) => (/^[A-Za-z0-9_-]+$/u.test(text) ? Buffer.from(text, "base64url").length : -1)
const validPair = (publicKey: string, privateKey: string) => base64urlBytes(publicKey) === 65 && base64urlBytes(privateKey) === 32

const loadOrCreateVapid = (dataDir: string): { publicKey: string; privateKey: string } => {
  const file = join(dataDir, "vapid.json")
  const read = () => JSON.parse(readFileSync(file, "utf8")) as { publicKey: string; privateKey: string }
  if (existsSync(file)) return read()
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const keys = webpush.generateVAPIDKeys()
  try {
    writeFileSync(file, JSON.stringify(keys) + "\n", { mode: 0o600, flag: "wx" })
    return keys
  } catch (error) {
    // Another process wrote it first: theirs is the pair.
    if ((error as { code?: string }).code === "EEXIST") return read()
    throw error
  }
}

export class VapidKeys extends Context.Service<VapidKeys, VapidKeyPair>()("burnbox/VapidKeys") {
  static readonly layer = Layer.effect(VapidKeys, Effect.gen(function*() {
    const config = yield* BurnboxConfig
    const publicKey = yield* Config.option(Config.String("BURNBOX_VAPID_PUBLIC_KEY"))
    const privateKey = yield* Config.option(Config.Redacted("BURNBOX_VAPID_PRIVATE_KEY"))
    if (Option.isSome(publicKey) && Option.isSome(privateKey)) {
      if (!validPair(publicKey.value, Redacted.value(privateKey.value))) {
        return yield* Effect.die(new Error("BURNBOX_VAPID_PUBLIC_KEY / BURNBOX_VAPID_PRIVATE_KEY: expected a P-256 key pair, base64url (65 and 32 bytes)"))
      }
      return VapidKeys.of({ publicKey: publicKey.value, privateKey: privateKey.value })
    }
    const keys = yield* Effect.try(() => loadOrCreateVapid(config.dataDir)).pipe(Effect.orDie)
    return VapidKeys.of({ publicKey: keys.publicKey, privateKey: Redacted.make(keys.privateKey) })
  }).pipe(Effect.orDie))
}

// -- settings and subscriptions ---------------------------------------------------------------

/** SHA-256 of a subscription's endpoint, hex: how the API names it (the endpoint is never answered). */
export const endpointHash = (endpoint: string) => createHash("sha256").update(endpoint).digest("hex")

const SettingsRow = Schema.Struct({ push_enabled: Schema.Boolean, push_nudge_dismissed: Schema.Boolean })
const settingsRows = rowsDecoder(SettingsRow)
const SubscriptionRow = Schema.Struct({
  id: Schema.Int,
  endpoint_hash: Schema.String,
  created_at: Schema.String,
  last_success_at: Schema.NullOr(Schema.String)
})
const subscriptionRows = rowsDecoder(SubscriptionRow)
const IdEnabledRow = Schema.Struct({ id: Schema.Int, enabled: Schema.Boolean })
const idEnabledRows = rowsDecoder(IdEnabledRow)
const CountRow = Schema.Struct({ n: Schema.Int })
const countRows = rowsDecoder(CountRow)

export class Push extends Context.Service<Push, {
  /** GET /push/settings (and the bootstrap's `push`). */
  readonly settings: (accountId: number) => Effect.Effect<PushSettings>
  /** PUT /push/settings. */
  readonly setEnabled: (accountId: number, enabled: boolean) => Effect.Effect<PushSettings>
  /** DELETE /push/nudge: the offer to turn push on is dismissed for the account. */
  readonly dismissNudge: (accountId: number) => Effect.Effect<PushSettings>
  /** POST /push/subscriptions. */
  readonly subscribe: (accountId: number, input: CreatePushSubscription) =>
    Effect.Effect<PushSubscription, PushSubscriptionExists | PushSubscriptionRefused>
  /** DELETE /push/subscriptions/{id}. */
  readonly unsubscribe: (accountId: number, id: number) => Effect.Effect<void, PushSubscriptionNotFound>
  /** POST /push/subscriptions/{id}/test: queues a test push, from `address` (the client's). */
  readonly test: (accountId: number, id: number, address: string) =>
    Effect.Effect<void, PushSubscriptionNotFound | PushTestLimited | PushQueueUnavailable>
  /** PUT /push/aliases/{id}: the caller's own preference for a mailbox (a guest's on its share); the alias as the caller sees it. */
  readonly setAliasPreference: (accountId: number, aliasId: number, enabled: boolean) => Effect.Effect<Alias, AliasNotFound>
}>()("burnbox/Push") {
  static readonly layer = Layer.effect(Push, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const vapid = yield* VapidKeys
    const outbound = yield* OutboundHttp
    const limiter = yield* RateLimiter
    const aliases = yield* Aliases

    const settings = Effect.fn("Push.settings")(function*(accountId: number) {
      const [account] = yield* sql`SELECT push_enabled, push_nudge_dismissed FROM accounts WHERE id = ${accountId}`.pipe(
        Effect.flatMap(settingsRows),
        Effect.orDie
      )
      const subscriptions = yield* sql`
        SELECT id, endpoint_hash, created_at::text AS created_at, last_success_at::text AS last_success_at
        FROM push_subscriptions WHERE account_id = ${accountId} ORDER BY id`.pipe(Effect.flatMap(subscriptionRows), Effect.orDie)
      return {
        enabled: account?.push_enabled ?? false,
        nudgeDismissed: account?.push_nudge_dismissed ?? false,
        publicKey: vapid.publicKey,
        subscriptions: subscriptions.map((row) => ({
          id: row.id,
          endpointHash: row.endpoint_hash,
          createdAt: row.created_at,
          lastSuccessAt: row.last_success_at
        }))
      } satisfies PushSettings
    })

    const setEnabled = Effect.fn("Push.setEnabled")(function*(accountId: number, enabled: boolean) {
      yield* sql`UPDATE accounts SET push_enabled = ${enabled} WHERE id = ${accountId}`.pipe(Effect.orDie)
      return yield* settings(accountId)
    })

    const dismissNudge = Effect.fn("Push.dismissNudge")(function*(accountId: number) {
      yield* sql`UPDATE accounts SET push_nudge_dismissed = true WHERE id = ${accountId}`.pipe(Effect.orDie)
      return yield* settings(accountId)
    })

    const subscribe = Effect.fn("Push.subscribe")(function*(accountId: number, input: CreatePushSubscription) {
      // The keys must be a P-256 point and a 16-byte secret (RFC 8291), or nothing can be encrypted for them.
      const p256dh = base64urlBytes(input.keys.p256dh.replace(/=+$/u, ""))
      if (p256dh !== 65 || !Buffer.from(input.keys.p256dh, "base64url").subarray(0, 1).equals(Buffer.from([4]))) {
        return yield* new PushSubscriptionRefused({ field: "keys.p256dh", reason: "invalid_key" })
      }
      if (base64urlBytes(input.keys.auth.replace(/=+$/u, "")) !== 16) {
        return yield* new PushSubscriptionRefused({ field: "keys.auth", reason: "invalid_key" })
      }
      const checked = yield* outbound.check(input.endpoint)
      if (!checked.ok) return yield* new PushSubscriptionRefused({ field: "endpoint", reason: checked.reason })
      const at = yield* now
      const rows = yield* sql`
        INSERT INTO push_subscriptions (account_id, endpoint, endpoint_hash, content_encoding, p256dh, auth, created_at)
        VALUES (${accountId}, ${input.endpoint}, ${endpointHash(input.endpoint)}, ${input.contentEncoding ?? "aes128gcm"},
                ${input.keys.p256dh}, ${input.keys.auth}, ${at})
        ON CONFLICT (account_id, endpoint_hash) DO NOTHING
        RETURNING id, enabled`.pipe(Effect.flatMap(idEnabledRows), Effect.orDie)
      const [row] = rows
      if (row === undefined) return yield* new PushSubscriptionExists()
      return { id: row.id, enabled: row.enabled } satisfies PushSubscription
    })

    const unsubscribe = Effect.fn("Push.unsubscribe")(function*(accountId: number, id: number) {
      const rows = yield* sql`DELETE FROM push_subscriptions WHERE id = ${id} AND account_id = ${accountId} RETURNING id`.pipe(Effect.orDie)
      if (rows.length === 0) return yield* new PushSubscriptionNotFound({ subscriptionId: id })
    })

    const test = Effect.fn("Push.test")(function*(accountId: number, id: number, address: string) {
      const owned = yield* sql`SELECT id FROM push_subscriptions WHERE id = ${id} AND account_id = ${accountId}`.pipe(Effect.orDie)
      if (owned.length === 0) return yield* new PushSubscriptionNotFound({ subscriptionId: id })
      const [waiting] = yield* sql`SELECT count(*)::int AS n FROM push_deliveries WHERE account_id = ${accountId} AND message_id IS NULL`
        .pipe(Effect.flatMap(countRows), Effect.orDie)
      if ((waiting?.n ?? 0) >= PushTestWindows.outstanding) {
        return yield* new PushTestLimited({ allowance: "outstanding", retryAfter: Math.ceil(PushLeaseMs / 1000) })
      }
      const byAccount = yield* limiter.hit(`push-test:account:${accountId}`, PushTestWindows.account)
      if (!byAccount.allowed) return yield* new PushTestLimited({ allowance: "account", retryAfter: byAccount.retryAfter })
      const byAddress = yield* limiter.hit(`push-test:address:${address}`, PushTestWindows.address)
      if (!byAddress.allowed) return yield* new PushTestLimited({ allowance: "address", retryAfter: byAddress.retryAfter })
      const at = yield* now
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO push_deliveries (subscription_id, account_id, message_id, created_at) VALUES (${id}, ${accountId}, NULL, ${at})`
        yield* sql`SELECT pg_notify(${PushChannel}, '')`
      })).pipe(Effect.catchTag("SqlError", () => Effect.fail(new PushQueueUnavailable())))
    })

    const setAliasPreference = Effect.fn("Push.setAliasPreference")(function*(accountId: number, aliasId: number, enabled: boolean) {
      const own = yield* sql`
        UPDATE aliases SET push_enabled = ${enabled}
        WHERE id = ${aliasId} AND account_id = ${accountId} AND status IN ('active', 'paused') RETURNING id`.pipe(Effect.orDie)
      if (own.length === 0) {
        const guest = yield* sql`
          UPDATE shares s SET push_enabled = ${enabled}
          WHERE s.alias_id = ${aliasId} AND s.guest_id = ${accountId} AND ${sql.literal(liveGuestShare("s"))} RETURNING s.id`.pipe(Effect.orDie)
        if (guest.length === 0) return yield* new AliasNotFound({ aliasId })
      }
      const alias = (yield* aliases.list(accountId, false)).find((item) => item.id === aliasId)
      if (alias === undefined) return yield* new AliasNotFound({ aliasId })
      return alias
    })

    return Push.of({ settings, setEnabled, dismissNudge, subscribe, unsubscribe, test, setAliasPreference })
  }))
}

// -- sending ----------------------------------------------------------------------------------

const DueRow = Schema.Struct({
  id: Schema.String,
  subscription_id: Schema.Int,
  attempts: Schema.Int,
  created_at: Schema.Date,
  endpoint: Schema.String,
  content_encoding: Schema.Literals(["aes128gcm", "aesgcm"]),
  p256dh: Schema.String,
  auth: Schema.String,
  message_id: Schema.NullOr(Schema.Int),
  alias: Schema.NullOr(Schema.String),
  sender: Schema.NullOr(Schema.String),
  subject: Schema.NullOr(Schema.String),
  otp: Schema.NullOr(Schema.String)
})
type DueRow = typeof DueRow.Type
const dueRows = rowsDecoder(DueRow)

/** What one attempt came to. */
export type PushOutcome = "sent" | "gone" | "retry" | "given_up"

/** The push a due row sends: never the body. */
export const pushPayload = (row: Pick<DueRow, "message_id" | "alias" | "sender" | "subject" | "otp">): PushPayload =>
  row.message_id === null
    ? { type: "test", messageId: null, alias: null, from: null, subject: "burnbox test push", otp: null }
    : { type: "message", messageId: row.message_id, alias: row.alias, from: row.sender, subject: row.subject, otp: row.otp }

/** The VAPID `sub` claim: the site when it is https, else a mailto: at the first receiving domain. */
const vapidSubject = (siteUrl: string, domain: string) => (siteUrl.startsWith("https://") ? siteUrl : `mailto:postmaster@${domain}`)

export class PushSender extends Context.Service<PushSender, {
  /** Claims and attempts up to `limit` due pushes at the clock's time; answers each outcome. */
  readonly sendDue: (limit: number) => Effect.Effect<ReadonlyArray<PushOutcome>>
  /** Sends until nothing is due (the `push` job). */
  readonly sendAll: Effect.Effect<number>
  /** A wake-up each time a push is queued (at the queueing commit). */
  readonly wakeups: Effect.Effect<Queue.Dequeue<unknown, unknown>, never, Scope.Scope>
}>()("burnbox/PushSender") {
  static readonly layer = Layer.effect(PushSender, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* PgClient.PgClient
    const vapid = yield* VapidKeys
    const outbound = yield* OutboundHttp
    const config = yield* BurnboxConfig
    const subject = vapidSubject(config.siteUrl, config.domains[0]?.name ?? "localhost")

    const claim = (at: Date, limit: number) =>
      sql`
        WITH due AS (
          SELECT id FROM push_deliveries
          WHERE (next_attempt_at IS NULL OR next_attempt_at <= ${at})
            AND (claimed_at IS NULL OR claimed_at < ${new Date(at.getTime() - PushLeaseMs)})
          ORDER BY next_attempt_at NULLS FIRST, id LIMIT ${limit}
          FOR UPDATE SKIP LOCKED),
        claimed AS (
          UPDATE push_deliveries d SET claimed_at = ${at}, attempts = d.attempts + 1
          FROM due WHERE d.id = due.id
          RETURNING d.id, d.subscription_id, d.attempts, d.created_at, d.message_id)
        SELECT c.id::text AS id, c.subscription_id, c.attempts, c.created_at, ps.endpoint, ps.content_encoding, ps.p256dh, ps.auth,
               c.message_id, al.local_part || '@' || dm.name AS alias,
               CASE WHEN m.id IS NULL THEN NULL
                    WHEN m.sender_name IS NOT NULL AND m.sender_name <> '' THEN m.sender_name || ' <' || m.sender_address || '>'
                    ELSE m.sender_address END AS sender,
               m.subject, m.otp_codes->>0 AS otp
        FROM claimed c
        JOIN push_subscriptions ps ON ps.id = c.subscription_id
        LEFT JOIN messages m ON m.id = c.message_id
        LEFT JOIN aliases al ON al.id = m.alias_id
        LEFT JOIN domains dm ON dm.id = al.domain_id
        ORDER BY c.id`.pipe(Effect.flatMap(dueRows), Effect.orDie)

    const attempt = (row: DueRow) =>
      Effect.gen(function*() {
        const checked = yield* outbound.check(row.endpoint)
        if (!checked.ok) return { kind: "error", errorCode: checked.reason } as const
        const payload = pushPayload(row)
        const details = yield* Effect.try(() =>
          webpush.generateRequestDetails(
            { endpoint: row.endpoint, keys: { p256dh: row.p256dh, auth: row.auth } },
            JSON.stringify(payload),
            {
              vapidDetails: { subject, publicKey: vapid.publicKey, privateKey: Redacted.value(vapid.privateKey) },
              TTL: PushTtlSeconds,
              urgency: payload.otp === null ? "normal" : "high",
              contentEncoding: row.content_encoding
            }
          )
        ).pipe(Effect.orElseSucceed(() => undefined))
        if (details === undefined) return { kind: "error", errorCode: "encryption_failed" } as const
        return yield* outbound.post(checked, details.body ?? new Uint8Array(), details.headers, { spkiPin: null, timeoutMs: 10_000 })
      })

    const finish = (row: DueRow, result: { readonly kind: "response"; readonly status: number } | { readonly kind: "error" }, at: Date) =>
      Effect.gen(function*() {
        if (result.kind === "response" && result.status >= 200 && result.status < 300) {
          yield* sql`DELETE FROM push_deliveries WHERE id = ${row.id}::bigint`
          yield* sql`UPDATE push_subscriptions SET last_success_at = ${at} WHERE id = ${row.subscription_id}`
          return "sent" as const
        }
        if (result.kind === "response" && (result.status === 404 || result.status === 410)) {
          // The subscription expired or was withdrawn: it goes, with everything queued for it.
          yield* sql`DELETE FROM push_subscriptions WHERE id = ${row.subscription_id}`
          return "gone" as const
        }
        yield* sql`UPDATE push_subscriptions SET last_failure_at = ${at} WHERE id = ${row.subscription_id}`
        const retryAt = new Date(at.getTime() + pushBackoffSeconds(row.attempts) * 1000)
        if (row.attempts >= PushMaxAttempts || retryAt.getTime() - row.created_at.getTime() > PushTtlSeconds * 1000) {
          yield* sql`DELETE FROM push_deliveries WHERE id = ${row.id}::bigint`
          return "given_up" as const
        }
        yield* sql`UPDATE push_deliveries SET next_attempt_at = ${retryAt}, claimed_at = NULL WHERE id = ${row.id}::bigint`
        return "retry" as const
      }).pipe(Effect.orDie)

    const sendDue = Effect.fn("PushSender.sendDue")(function*(limit: number) {
      const at = yield* now
      const rows = yield* claim(at, limit)
      return yield* Effect.forEach(rows, (row) => Effect.flatMap(attempt(row), (result) => finish(row, result, at)), { concurrency: 16 })
    })

    const sendAll = Effect.gen(function*() {
      let sent = 0
      for (;;) {
        const outcomes = yield* sendDue(100)
        sent += outcomes.length
        if (outcomes.length < 100) return sent
      }
    })

    return PushSender.of({
      sendDue,
      sendAll,
      wakeups: pg.listen(PushChannel).pipe(Effect.orDie)
    })
  }))
}
