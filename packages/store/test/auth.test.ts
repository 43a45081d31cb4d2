/**
 * Browser sessions against the embedded PostgreSQL, called directly: a session is found by its
 * secret (stored only as a digest) until it expires or is removed.
 */
import { Accounts, Keyring, SessionLifetimeMs, Sessions, Entitlements } from "@burnbox/store"
import { TestDatabase } from "@burnbox/testkit"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { TestClock } from "effect/testing"

const Store = Layer.mergeAll(Sessions.layer, Accounts.layer).pipe(Layer.provideMerge(Keyring.layer), Layer.provideMerge(Entitlements.layer), Layer.provideMerge(TestDatabase))

let created = 0
const newAccount = Effect.gen(function*() {
  const accounts = yield* Accounts
  return yield* accounts.create({ email: `sessions${++created}@example.com`, password: "correct horse battery" })
}).pipe(Effect.orDie)

layer(Store)("Sessions", (it) => {
  it.effect("a session is resolved by its secret to its account until 30 days after it began", () =>
    Effect.gen(function*() {
      const sessions = yield* Sessions
      const account = yield* newAccount
      const secret = yield* sessions.create(account.id)
      const resolved = yield* sessions.resolve(secret)
      assert.deepStrictEqual(resolved, { id: resolved!.id, accountId: account.id })
      assert.isNumber(resolved!.id)
      yield* TestClock.adjust(SessionLifetimeMs - 1)
      assert.deepStrictEqual(yield* sessions.resolve(secret), resolved)
      yield* TestClock.adjust(1)
      assert.isUndefined(yield* sessions.resolve(secret))
    }))

  it.effect("a removed session resolves to nothing, and neither does a secret never given out; other sessions stay", () =>
    Effect.gen(function*() {
      const sessions = yield* Sessions
      const account = yield* newAccount
      const removed = yield* sessions.create(account.id)
      const kept = yield* sessions.create(account.id)
      yield* sessions.remove((yield* sessions.resolve(removed))!.id)
      assert.isUndefined(yield* sessions.resolve(removed))
      assert.strictEqual((yield* sessions.resolve(kept))!.accountId, account.id)
      assert.isUndefined(yield* sessions.resolve(Redacted.make("never-given-out")))
    }))
})
