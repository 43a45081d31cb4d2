import {
  ApiToken,
  type FeatureNotInPlan,
  MaxActiveTokens,
  ResolvedPlan,
  Scope,
  TokenExpiryNotInFuture,
  TokenLimitReached,
  TokenNotFound,
  TokenPrefix,
  TokenStatus
} from "@burnbox/domain"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { fingerprint, Keyring, randomSecret } from "../platform/Keyring.ts"
import { IsoFromDate } from "../platform/Rows.ts"
import { now } from "../platform/Time.ts"
import { pgJson } from "../platform/PgText.ts"
import { Entitlements } from "../plans/Entitlements.ts"

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

/** A token row is the ApiToken resource; its times are timestamptz. */
const ApiTokenRow = Schema.Struct({
  ...ApiToken.fields,
  createdAt: IsoFromDate,
  lastUsedAt: Schema.NullOr(IsoFromDate),
  expiresAt: Schema.NullOr(IsoFromDate)
}).pipe(Schema.encodeKeys({ createdAt: "created_at", lastUsedAt: "last_used_at", expiresAt: "expires_at" }))

/** What `resolve` reads of a token and its owner's plan. */
const GrantRecord = Schema.Struct({
  id: Schema.Int,
  account_id: Schema.Int,
  scopes: Schema.Array(Scope),
  status: TokenStatus,
  expires_at: Schema.NullOr(Schema.Date),
  plan: ResolvedPlan
})

const toGrant = (record: typeof GrantRecord.Type): TokenGrant => ({
  id: record.id,
  accountId: record.account_id,
  scopes: record.scopes,
  status: record.status,
  expiresAt: record.expires_at,
  requestsPerMinute: record.plan.requestsPerMinute,
  requestsPerDay: record.plan.requestsPerDay
})

const NewToken = Schema.Struct({
  accountId: Schema.Int,
  name: Schema.String,
  scopes: Schema.Array(Scope),
  prefix: Schema.String,
  digest: Schema.Uint8Array,
  createdAt: Schema.Date,
  expiresAt: Schema.NullOr(Schema.Date)
})

/** How stale `lastUsedAt` may get: one write per token per minute at most, off the hot path. */
const LastUsedResolutionMs = 60_000

/** What an account asks for when it creates a token (decisions.md, POST /tokens). */
export interface NewTokenRequest {
  readonly name: string
  readonly scopes: ReadonlyArray<Scope>
  /** An ISO date-time in the future, or none for a token that does not expire. */
  readonly expiresAt?: string | null | undefined
}

export type CreatedSecretToken = { readonly token: ApiToken; readonly secret: Redacted.Redacted<string> }

export class Tokens extends Context.Service<Tokens, {
  /**
   * An account creates a token (POST /tokens): its plan needs developer access, at most its
   * plan's `apiTokenCount` (and never more than ten) may be active, an expiry lies in the future.
   * The secret is returned once and stored only as a keyed digest.
   */
  readonly create: (accountId: number, request: NewTokenRequest) =>
    Effect.Effect<CreatedSecretToken, FeatureNotInPlan | TokenLimitReached | TokenExpiryNotInFuture>
  /** An operator issues a token (`burnbox admin token create`): on any plan, within the ten-active rule; it does not expire. */
  readonly issue: (accountId: number, request: { readonly name: string; readonly scopes: ReadonlyArray<Scope> }) =>
    Effect.Effect<CreatedSecretToken, TokenLimitReached>
  readonly list: (accountId: number) => Effect.Effect<ReadonlyArray<ApiToken>>
  readonly revoke: (accountId: number, id: number) => Effect.Effect<void, TokenNotFound>
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
    const entitlements = yield* Entitlements
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

    const activeCount = SqlSchema.findOne({
      Request: Schema.Struct({ accountId: Schema.Int, at: Schema.Date }),
      Result: Schema.Struct({ active: Schema.Int }),
      execute: ({ accountId, at }) =>
        sql`
          SELECT count(*)::int AS active FROM api_tokens
          WHERE account_id = ${accountId} AND status = 'active' AND (expires_at IS NULL OR expires_at > ${at})`
    })
    const insert = SqlSchema.findOne({
      Request: NewToken,
      Result: ApiTokenRow,
      execute: (token) =>
        sql`
          INSERT INTO api_tokens (account_id, name, scopes, prefix, digest, created_at, expires_at)
          VALUES (${token.accountId}, ${token.name}, ARRAY(SELECT jsonb_array_elements_text(${pgJson(token.scopes)}::jsonb)), ${token.prefix}, ${token.digest}, ${token.createdAt}, ${token.expiresAt})
          RETURNING id, name, scopes, prefix, status, created_at, last_used_at, expires_at`
    })
    const ofAccount = SqlSchema.findAll({
      Request: Schema.Int,
      Result: ApiTokenRow,
      execute: (accountId) =>
        sql`
          SELECT id, name, scopes, prefix, status, created_at, last_used_at, expires_at
          FROM api_tokens WHERE account_id = ${accountId} ORDER BY id`
    })
    const byDigest = SqlSchema.findOneOption({
      Request: Schema.Uint8Array,
      Result: GrantRecord,
      execute: (digested) =>
        sql`
            SELECT t.id, t.account_id, t.scopes, t.status, t.expires_at, ${entitlements.column("a")} AS plan
            FROM api_tokens t JOIN accounts a ON a.id = t.account_id
            WHERE t.digest = ${digested}`
    })

    /** Creates a token within `limit` active ones (never more than ten). */
    const insertWithin = Effect.fnUntraced(function*(input: {
      accountId: number
      name: string
      scopes: ReadonlyArray<Scope>
      expiresAt: Date | null
      limit: number
      createdAt: Date
    }) {
      const secret = TokenPrefix + randomSecret(32)
      const createdAt = input.createdAt
      const limit = Math.min(MaxActiveTokens, input.limit)
      const inserted = yield* sql.withTransaction(Effect.gen(function*() {
        // Serialise token creation per account so two requests cannot both take the tenth place.
        yield* sql`SELECT id FROM accounts WHERE id = ${input.accountId} FOR NO KEY UPDATE`
        const { active } = yield* activeCount({ accountId: input.accountId, at: createdAt })
        if (active >= limit) return undefined
        return yield* insert({
          accountId: input.accountId,
          name: input.name,
          scopes: input.scopes,
          prefix: secret.slice(0, 12),
          digest: digest(secret),
          createdAt,
          expiresAt: input.expiresAt
        })
      })).pipe(Effect.orDie)
      if (inserted === undefined) return yield* Effect.fail(new TokenLimitReached({ limit }))
      return { token: inserted, secret: Redacted.make(secret) } as CreatedSecretToken
    })

    const create = Effect.fn("Tokens.create")(function*(accountId: number, request: NewTokenRequest) {
      const plan = yield* entitlements.require(accountId, "developerAccess")
      const createdAt = yield* now
      const expiresAt = request.expiresAt === undefined || request.expiresAt === null ? null : new Date(request.expiresAt)
      if (expiresAt !== null && (Number.isNaN(expiresAt.getTime()) || expiresAt <= createdAt)) {
        return yield* Effect.fail(new TokenExpiryNotInFuture({ expiresAt: request.expiresAt! }))
      }
      return yield* insertWithin({ accountId, name: request.name, scopes: request.scopes, expiresAt, limit: plan.apiTokenCount, createdAt })
    })

    const issue = Effect.fn("Tokens.issue")(function*(accountId: number, request: { readonly name: string; readonly scopes: ReadonlyArray<Scope> }) {
      return yield* insertWithin({ accountId, name: request.name, scopes: request.scopes, expiresAt: null, limit: MaxActiveTokens, createdAt: yield* now })
    })

    const setSuspended = (accountId: number, suspended: boolean) =>
      Effect.sync(() => forgetAccount(accountId)).pipe(Effect.andThen(suspended
        ? sql`UPDATE api_tokens SET status = 'suspended' WHERE account_id = ${accountId} AND status = 'active'`
        : sql`UPDATE api_tokens SET status = 'active' WHERE account_id = ${accountId} AND status = 'suspended'`
      ), Effect.orDie, Effect.asVoid)
    // A plan change: bearer tokens follow developer access (spec 5.2: suspended, not deleted, when Pro access ends).
    yield* entitlements.onPlanChange({ feature: "tokens", apply: ({ accountId, after }) => setSuspended(accountId, !after.developerAccess) })

    return Tokens.of({
      create,
      issue,
      list: (accountId) => ofAccount(accountId).pipe(Effect.orDie),
      revoke: Effect.fn("Tokens.revoke")(function*(accountId: number, id: number) {
        forgetAccount(accountId)
        const at = yield* now
        const rows = yield* sql`
          UPDATE api_tokens SET status = 'revoked', revoked_at = coalesce(revoked_at, ${at})
          WHERE account_id = ${accountId} AND id = ${id} RETURNING id`.pipe(Effect.orDie)
        if (rows.length === 0) return yield* Effect.fail(new TokenNotFound({ tokenId: id }))
      }),
      resolve: (secret) =>
        Effect.gen(function*() {
          const key = fingerprint(Redacted.value(secret))
          const at = (yield* now).getTime()
          const cached = fromCache(key, at)
          if (cached !== undefined) return cached.grant
          const record = yield* byDigest(digest(Redacted.value(secret))).pipe(Effect.orDie)
          const grant = Option.isSome(record) ? toGrant(record.value) : undefined
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
      setSuspended
    })
  }))
}
