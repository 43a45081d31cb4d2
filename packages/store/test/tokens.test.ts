/**
 * API tokens against the embedded PostgreSQL, called directly: a token is created once with its
 * secret, found again only by the digest of that secret, revoked for good, held to ten active
 * at a time, and read again from the database when its cached grant grows old.
 */
import { DefaultPlans, MaxActiveTokens, TokenPrefix } from "@burnbox/domain"
import { Accounts, Keyring, TokenCacheMs, Tokens, Entitlements } from "@burnbox/store"
import { TestDatabase } from "@burnbox/testkit"
import { assert, layer } from "@effect/vitest"
import { Clock, Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"

const Store = Layer.mergeAll(Tokens.layer, Accounts.layer).pipe(Layer.provideMerge(Keyring.layer), Layer.provideMerge(Entitlements.layer), Layer.provideMerge(TestDatabase))

let created = 0
const newAccount = Effect.gen(function*() {
  const accounts = yield* Accounts
  return yield* accounts.create({ email: `tokens${++created}@example.com`, password: "correct horse battery", plan: "pro" })
}).pipe(Effect.orDie)

/** A token the account creates; `limit` is its plan's apiTokenCount (an override), when given. */
const create = (accountId: number, options: { name?: string; expiresAt?: Date | null; limit?: number } = {}) =>
  Effect.gen(function*() {
    const tokens = yield* Tokens
    if (options.limit !== undefined) {
      const accounts = yield* Accounts
      yield* accounts.changeOverrides(accountId, { apiTokenCount: options.limit })
    }
    return yield* tokens.create(accountId, {
      name: options.name ?? "ci",
      scopes: ["read", "test"],
      expiresAt: options.expiresAt?.toISOString() ?? null
    })
  })

const nowDate = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

layer(Store)("Tokens", (it) => {
  it.effect("a new token is active, shown with its prefix, and its secret is stored only as a digest", () =>
    Effect.gen(function*() {
      const tokens = yield* Tokens
      const sql = yield* SqlClient.SqlClient
      const account = yield* newAccount
      const at = yield* nowDate
      const expiresAt = new Date(at.getTime() + 86_400_000)
      const { secret, token } = yield* create(account.id, { name: "deploy bot", expiresAt })
      const value = Redacted.value(secret)
      assert.isTrue(value.startsWith(TokenPrefix))
      assert.deepStrictEqual(token, {
        id: token.id,
        name: "deploy bot",
        scopes: ["read", "test"],
        prefix: value.slice(0, 12),
        status: "active",
        createdAt: at.toISOString(),
        lastUsedAt: null,
        expiresAt: expiresAt.toISOString()
      })
      assert.deepStrictEqual(yield* tokens.list(account.id), [token])
      const keyring = yield* Keyring
      const stored = yield* sql<{ digest: Uint8Array; secret_kept: boolean }>`
        SELECT digest, (to_jsonb(t)::text LIKE ${`%${value.slice(12)}%`}) AS secret_kept FROM api_tokens t WHERE id = ${token.id}`
      assert.deepStrictEqual(Buffer.from(stored[0]!.digest), keyring.digest("api-token", value))
      assert.isFalse(stored[0]!.secret_kept)
    }))

  it.effect("a token is resolved by its secret to its account, scopes and the owner's request limits; another secret resolves to nothing", () =>
    Effect.gen(function*() {
      const tokens = yield* Tokens
      const accounts = yield* Accounts
      const account = yield* newAccount
      yield* accounts.changeOverrides(account.id, { requestsPerMinute: 42 })
      const { secret, token } = yield* create(account.id)
      assert.deepStrictEqual(yield* tokens.resolve(secret), {
        id: token.id,
        accountId: account.id,
        scopes: ["read", "test"],
        status: "active",
        expiresAt: null,
        requestsPerMinute: 42,
        requestsPerDay: DefaultPlans.pro.requestsPerDay
      })
      assert.isUndefined(yield* tokens.resolve(Redacted.make(`${TokenPrefix}not-a-token`)))
    }))

  it.effect("a revoked token stays revoked, resolves as revoked at once, and frees its place; a stranger cannot revoke it", () =>
    Effect.gen(function*() {
      const tokens = yield* Tokens
      const account = yield* newAccount
      const stranger = yield* newAccount
      const { secret, token } = yield* create(account.id)
      assert.strictEqual((yield* tokens.resolve(secret))!.status, "active")
      assert.deepInclude(yield* Effect.flip(tokens.revoke(stranger.id, token.id)), { _tag: "TokenNotFound", tokenId: token.id })
      yield* tokens.revoke(account.id, token.id)
      assert.strictEqual((yield* tokens.resolve(secret))!.status, "revoked")
      assert.deepStrictEqual((yield* tokens.list(account.id)).map((t) => t.status), ["revoked"])
    }))

  it.effect("an account holds at most ten active tokens; a revoked one frees its place", () =>
    Effect.gen(function*() {
      const tokens = yield* Tokens
      const account = yield* newAccount
      const made = []
      for (let i = 0; i < MaxActiveTokens; i++) made.push((yield* create(account.id, { name: `token ${i}`, limit: 50 })).token)
      const refused = yield* Effect.flip(create(account.id, { limit: 50 }))
      assert.deepInclude(refused, { _tag: "TokenLimitReached", limit: MaxActiveTokens })
      yield* tokens.revoke(account.id, made[3]!.id)
      yield* create(account.id, { name: "in the freed place", limit: 50 })
      assert.strictEqual((yield* tokens.list(account.id)).length, MaxActiveTokens + 1)
    }))

  it.effect("a plan's lower token limit holds too", () =>
    Effect.gen(function*() {
      const account = yield* newAccount
      yield* create(account.id, { limit: 2 })
      yield* create(account.id, { limit: 2 })
      const refused = yield* Effect.flip(create(account.id, { limit: 2 }))
      assert.deepInclude(refused, { _tag: "TokenLimitReached", limit: 2 })
    }))

  it.effect("a token past its expiry no longer takes one of the ten places", () =>
    Effect.gen(function*() {
      const account = yield* newAccount
      const at = yield* nowDate
      yield* create(account.id, { expiresAt: new Date(at.getTime() + 60_000), limit: 1 })
      yield* Effect.flip(create(account.id, { limit: 1 }))
      yield* TestClock.adjust(59_999)
      yield* Effect.flip(create(account.id, { limit: 1 }))
      yield* TestClock.adjust(1)
      const { token } = yield* create(account.id, { limit: 1 })
      assert.strictEqual(token.status, "active")
    }))

  it.effect("a resolved grant is trusted for TokenCacheMs; a change made elsewhere shows after that", () =>
    Effect.gen(function*() {
      const tokens = yield* Tokens
      const sql = yield* SqlClient.SqlClient
      const account = yield* newAccount
      const { secret, token } = yield* create(account.id)
      yield* tokens.resolve(secret)
      // Another process suspends the token.
      yield* sql`UPDATE api_tokens SET status = 'suspended' WHERE id = ${token.id}`
      assert.strictEqual(tokens.cachedGrant(Redacted.value(secret), yield* Clock.currentTimeMillis)!.status, "active")
      yield* TestClock.adjust(TokenCacheMs - 1)
      assert.strictEqual((yield* tokens.resolve(secret))!.status, "active")
      yield* TestClock.adjust(1)
      assert.isUndefined(tokens.cachedGrant(Redacted.value(secret), yield* Clock.currentTimeMillis))
      assert.strictEqual((yield* tokens.resolve(secret))!.status, "suspended")
    }))

  it.effect("lastUsedAt is written at most once a minute", () =>
    Effect.gen(function*() {
      const tokens = yield* Tokens
      const account = yield* newAccount
      const { token } = yield* create(account.id)
      const first = yield* nowDate
      yield* tokens.touch(token.id)
      yield* TestClock.adjust(59_999)
      assert.isFalse(tokens.touchDue(token.id, yield* Clock.currentTimeMillis))
      yield* tokens.touch(token.id)
      assert.strictEqual((yield* tokens.list(account.id))[0]!.lastUsedAt, first.toISOString())
      yield* TestClock.adjust(1)
      yield* tokens.touch(token.id)
      assert.strictEqual((yield* tokens.list(account.id))[0]!.lastUsedAt, new Date(first.getTime() + 60_000).toISOString())
    }))

  it.effect("a plan change suspends the account's active tokens and reinstates them, leaving revoked ones revoked", () =>
    Effect.gen(function*() {
      const tokens = yield* Tokens
      const account = yield* newAccount
      const kept = yield* create(account.id, { name: "kept" })
      const revoked = yield* create(account.id, { name: "revoked" })
      yield* tokens.revoke(account.id, revoked.token.id)
      yield* tokens.resolve(kept.secret)
      yield* tokens.setSuspended(account.id, true)
      assert.strictEqual((yield* tokens.resolve(kept.secret))!.status, "suspended")
      assert.deepStrictEqual((yield* tokens.list(account.id)).map((t) => t.status), ["suspended", "revoked"])
      yield* tokens.setSuspended(account.id, false)
      assert.strictEqual((yield* tokens.resolve(kept.secret))!.status, "active")
      assert.deepStrictEqual((yield* tokens.list(account.id)).map((t) => t.status), ["active", "revoked"])
    }))
})
