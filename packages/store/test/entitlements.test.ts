/**
 * Entitlements: the one reader of an account's plan, and the registry of what a plan change does
 * to each feature's data. A change runs every registered effect in the transaction that makes it.
 */
import { DefaultPlans, type PlanEntitlements } from "@burnbox/domain"
import { Accounts, Entitlements, type PlanChange } from "@burnbox/store"
import { TestDatabase } from "@burnbox/testkit"
import { assert, layer } from "@effect/vitest"
import { Effect, Exit, Layer, Scope } from "effect"
import { SqlClient } from "effect/sql"

const Store = Accounts.layer.pipe(Layer.provideMerge(Entitlements.layer), Layer.provideMerge(TestDatabase))

let created = 0
const newAccount = (plan: "free" | "premium" | "pro") =>
  Effect.gen(function*() {
    const accounts = yield* Accounts
    return yield* accounts.create({ email: `plans${++created}@example.com`, password: "correct horse battery", plan })
  }).pipe(Effect.orDie)

const planOf = (accountId: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ plan: string }>`SELECT plan FROM accounts WHERE id = ${accountId}`
    return row!.plan
  }).pipe(Effect.orDie)

layer(Store)("Entitlements", (it) => {
  it.effect("an account's plan is its plan row with its overrides; require refuses a feature the plan lacks", () =>
    Effect.gen(function*() {
      const entitlements = yield* Entitlements
      const accounts = yield* Accounts
      const account = yield* newAccount("premium")
      assert.deepStrictEqual(yield* entitlements.of(account.id), DefaultPlans.premium)
      assert.deepInclude(yield* Effect.flip(entitlements.require(account.id, "developerAccess")), { _tag: "FeatureNotInPlan", feature: "developerAccess" })
      assert.deepInclude(yield* Effect.flip(entitlements.require(account.id, "testMail")), { _tag: "FeatureNotInPlan", feature: "testMail" })
      yield* accounts.changeOverrides(account.id, { developerAccess: true, webhookCount: 3 })
      const granted = yield* entitlements.require(account.id, "developerAccess")
      assert.deepStrictEqual(granted, { ...DefaultPlans.premium, developerAccess: true, webhookCount: 3 })
      assert.deepStrictEqual(yield* entitlements.lock(account.id).pipe((yield* SqlClient.SqlClient).withTransaction), granted)
    }))

  it.effect("a plan change runs every registered effect once, with the entitlements before and after, in its transaction", () =>
    Effect.gen(function*() {
      const entitlements = yield* Entitlements
      const accounts = yield* Accounts
      const account = yield* newAccount("pro")
      const sql = yield* SqlClient.SqlClient
      const seen: Array<PlanChange & { readonly planInTransaction: string }> = []
      const scope = yield* Scope.make()
      yield* entitlements.onPlanChange({
        feature: "test",
        apply: (change) =>
          planOf(change.accountId).pipe(
            Effect.provideService(SqlClient.SqlClient, sql),
            Effect.map((planInTransaction) => void seen.push({ ...change, planInTransaction }))
          )
      }).pipe(Scope.provide(scope))
      const downgraded = yield* accounts.changePlan(account.id, "free")
      assert.strictEqual(downgraded.plan, "free")
      assert.deepStrictEqual(seen, [{ accountId: account.id, before: DefaultPlans.pro, after: DefaultPlans.free, planInTransaction: "free" }])
      // An effect registered by a scope that ended runs no more.
      yield* Scope.close(scope, Exit.void)
      yield* accounts.changePlan(account.id, "pro")
      assert.strictEqual(seen.length, 1)
    }))

  it.effect("an effect that fails undoes the plan change: the plan stays as it was", () =>
    Effect.gen(function*() {
      const entitlements = yield* Entitlements
      const accounts = yield* Accounts
      const account = yield* newAccount("premium")
      const afterSeen: Array<PlanEntitlements> = []
      yield* Effect.scoped(Effect.gen(function*() {
        yield* entitlements.onPlanChange({
          feature: "broken",
          apply: (change) => Effect.sync(() => afterSeen.push(change.after)).pipe(Effect.andThen(Effect.die(new Error("effect failed"))))
        })
        const exit = yield* Effect.exit(accounts.changePlan(account.id, "free"))
        assert.isTrue(Exit.isFailure(exit))
      }))
      assert.deepStrictEqual(afterSeen, [DefaultPlans.free])
      assert.strictEqual(yield* planOf(account.id), "premium")
      assert.deepStrictEqual(yield* entitlements.of(account.id), DefaultPlans.premium)
    }))
})
