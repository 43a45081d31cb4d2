import {
  type ApiToken,
  MaxActiveTokens,
  type PlanEntitlements,
  type PlanOverrides,
  resolveEntitlements,
  type Scope,
  TokenLimitReached,
  TokenPrefix
} from "@burnbox/domain"
import { Context, Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { fingerprint, Keyring, randomSecret } from "../platform/Keyring.ts"
import { now } from "../platform/Time.ts"

export interface TokenGrant {
  readonly id: number
  readonly accountId: number
  readonly scopes: ReadonlyArray<Scope>
  readonly status: "active" | "suspended" | "revoked"
  readonly expiresAt: Date | null
  /** The owner's per-token request limits, resolved from plan and overrides. */
  readonly requestsPerMinute: number
  readonly requestsPerDay: number
}

/**
 * How long a process trusts a resolved token before reading it again. Changes made through
 * this process (revocation) apply at once; changes made by another process (an operator's
 * plan change, a revocation on another API node) reach it within this time.
 */
export const TokenCacheMs = 2_000

interface Raw {
  id: number
  name: string
  scopes: Array<Scope>
  prefix: string
  status: "active" | "suspended" | "revoked"
  created_at: Date
  last_used_at: Date | null
  expires_at: Date | null
}

const toApiToken = (raw: Raw): ApiToken => ({
  id: raw.id,
  name: raw.name,
  scopes: raw.scopes,
  prefix: raw.prefix,
  status: raw.status,
  createdAt: raw.created_at.toISOString(),
  lastUsedAt: raw.last_used_at?.toISOString() ?? null,
  expiresAt: raw.expires_at?.toISOString() ?? null
})

/** How stale `lastUsedAt` may get: one write per token per minute at most, off the hot path. */
const LastUsedResolutionMs = 60_000

export class Tokens extends Context.Service<Tokens, {
  /** Creates a token; the secret is returned once and stored only as a keyed digest. */
  readonly create: (input: {
    accountId: number
    name: string
    scopes: ReadonlyArray<Scope>
    expiresAt: Date | null
    limit: number
  }) => Effect.Effect<{ token: ApiToken; secret: Redacted.Redacted<string> }, TokenLimitReached>
  readonly list: (accountId: number) => Effect.Effect<ReadonlyArray<ApiToken>>
  readonly revoke: (accountId: number, id: number) => Effect.Effect<boolean>
  readonly resolve: (secret: Redacted.Redacted<string>) => Effect.Effect<TokenGrant | undefined>
  readonly touch: (id: number) => Effect.Effect<void>
  /** The grant `resolve` would answer from this process's cache at `atMs`, without waiting; undefined when it would read the database or the token is unknown. */
  readonly cachedGrant: (secret: string, atMs: number) => TokenGrant | undefined
  /** Whether `touch` would write `lastUsedAt` at `atMs`. */
  readonly touchDue: (id: number, atMs: number) => boolean
  /** Plan changes: suspend or reinstate every active/suspended token of an account. */
  readonly setSuspended: (accountId: number, suspended: boolean) => Effect.Effect<void>
}>()("burnbox/Tokens") {
  static readonly layer = Layer.effect(Tokens, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const keyring = yield* Keyring
    const digest = (secret: string) => keyring.digest("api-token", secret)
    const touchedAt = new Map<number, number>()
    const cache = new Map<string, { grant: TokenGrant | undefined; until: number }>()
    const fromCache = (key: string, atMs: number) => {
      const cached = cache.get(key)
      return cached !== undefined && cached.until > atMs ? cached : undefined
    }
    const touchDue = (id: number, atMs: number) => {
      const last = touchedAt.get(id)
      return last === undefined || atMs - last >= LastUsedResolutionMs
    }
    const forgetAccount = (accountId: number) => {
      for (const [key, entry] of cache) if (entry.grant?.accountId === accountId) cache.delete(key)
    }

    const create = Effect.fn("Tokens.create")(function*(input: {
      accountId: number
      name: string
      scopes: ReadonlyArray<Scope>
      expiresAt: Date | null
      limit: number
    }) {
      const secret = TokenPrefix + randomSecret(32)
      const createdAt = yield* now
      const limit = Math.min(MaxActiveTokens, input.limit)
      const inserted = yield* sql.withTransaction(Effect.gen(function*() {
        // Serialise token creation per account so two requests cannot both take the tenth place.
        yield* sql`SELECT id FROM accounts WHERE id = ${input.accountId} FOR NO KEY UPDATE`
        const [{ active }] = (yield* sql<{ active: number }>`
          SELECT count(*)::int AS active FROM api_tokens
          WHERE account_id = ${input.accountId} AND status = 'active' AND (expires_at IS NULL OR expires_at > ${createdAt})`) as [{ active: number }]
        if (active >= limit) return undefined
        return (yield* sql<Raw>`
          INSERT INTO api_tokens (account_id, name, scopes, prefix, digest, created_at, expires_at)
          VALUES (${input.accountId}, ${input.name}, ARRAY(SELECT jsonb_array_elements_text(${JSON.stringify(input.scopes)}::jsonb)), ${secret.slice(0, 12)}, ${digest(secret)}, ${createdAt}, ${input.expiresAt})
          RETURNING id, name, scopes, prefix, status, created_at, last_used_at, expires_at`)[0]
      })).pipe(Effect.orDie)
      if (inserted === undefined) return yield* Effect.fail(new TokenLimitReached({ limit }))
      return { token: toApiToken(inserted), secret: Redacted.make(secret) }
    })

    return Tokens.of({
      create,
      list: (accountId) =>
        sql<Raw>`
          SELECT id, name, scopes, prefix, status, created_at, last_used_at, expires_at
          FROM api_tokens WHERE account_id = ${accountId} ORDER BY id`.pipe(Effect.orDie, Effect.map((rows) => rows.map(toApiToken))),
      revoke: (accountId, id) =>
        Effect.gen(function*() {
          forgetAccount(accountId)
          const at = yield* now
          const rows = yield* sql`
            UPDATE api_tokens SET status = 'revoked', revoked_at = coalesce(revoked_at, ${at})
            WHERE account_id = ${accountId} AND id = ${id} RETURNING id`.pipe(Effect.orDie)
          return rows.length > 0
        }),
      resolve: (secret) =>
        Effect.gen(function*() {
          const key = fingerprint(Redacted.value(secret))
          const at = (yield* now).getTime()
          const cached = fromCache(key, at)
          if (cached !== undefined) return cached.grant
          const digested = digest(Redacted.value(secret))
          const rows = yield* sql<{
            id: number
            account_id: number
            scopes: Array<Scope>
            status: TokenGrant["status"]
            expires_at: Date | null
            entitlements: PlanEntitlements
            overrides: PlanOverrides
          }>`
            SELECT t.id, t.account_id, t.scopes, t.status, t.expires_at, p.entitlements, a.overrides
            FROM api_tokens t JOIN accounts a ON a.id = t.account_id JOIN plans p ON p.code = a.plan
            WHERE t.digest = ${digested}`.pipe(Effect.orDie)
          const row = rows[0]
          const entitlements = row && resolveEntitlements(row.entitlements, row.overrides)
          const grant = row && entitlements && {
            id: row.id,
            accountId: row.account_id,
            scopes: row.scopes,
            status: row.status,
            expiresAt: row.expires_at,
            requestsPerMinute: entitlements.requestsPerMinute,
            requestsPerDay: entitlements.requestsPerDay
          }
          if (cache.size > 10_000) cache.clear()
          cache.set(key, { grant, until: at + TokenCacheMs })
          return grant
        }),
      touch: (id) =>
        Effect.gen(function*() {
          const at = yield* now
          if (!touchDue(id, at.getTime())) return
          touchedAt.set(id, at.getTime())
          yield* sql`UPDATE api_tokens SET last_used_at = ${at} WHERE id = ${id}`.pipe(Effect.orDie)
        }),
      cachedGrant: (secret, atMs) => fromCache(fingerprint(secret), atMs)?.grant,
      touchDue,
      setSuspended: (accountId, suspended) =>
        Effect.sync(() => forgetAccount(accountId)).pipe(Effect.andThen(suspended
          ? sql`UPDATE api_tokens SET status = 'suspended' WHERE account_id = ${accountId} AND status = 'active'`
          : sql`UPDATE api_tokens SET status = 'active' WHERE account_id = ${accountId} AND status = 'suspended'`
        ), Effect.orDie, Effect.asVoid)
    })
  }))
}
