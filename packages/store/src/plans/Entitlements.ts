/**
 * Entitlements: the one owner of "what may this account do" (architecture.md, "Entitlements").
 *
 * An account's plan is the row of `plans` its `accounts.plan` names, with the account's
 * `overrides` applied. This is the only code that reads `plans` next to an account:
 * - as a service, for one account (`of`, `lock`, `require`);
 * - as a SQL fragment (`column`), which the other owners compose into their own statements
 *   where reading the plan in the same round trip matters (the group commit, token resolution,
 *   alias rows), decoded with the domain's `ResolvedPlan`.
 *
 * It is also the registry of plan-change effects: each feature whose rules follow the plan
 * registers what a change does to its data (`onPlanChange`: tokens suspended without developer
 * access, aliases paused beyond the active cap, ...), and `Accounts.changePlan` runs them all in
 * the transaction that changes the plan.
 */
import { FeatureNotInPlan, type PlanEntitlements, type PlanFeature, planIncludes, ResolvedPlan } from "@burnbox/domain"
import { Context, Effect, Layer, Schema, type Scope } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { rowsDecoder } from "../platform/Rows.ts"

/** A plan change of one account, as its effects see it: resolved entitlements before and after. */
export interface PlanChange {
  readonly accountId: number
  readonly before: PlanEntitlements
  readonly after: PlanEntitlements
}

/**
 * What a plan change does to one feature's data. `apply` runs inside the transaction of the
 * change (after the account row is updated and locked), for every change, upgrades included;
 * it reads `before`/`after` or the data itself to decide, and does nothing when nothing is due.
 */
export interface PlanChangeEffect {
  /** Names the effect in traces and failures: "tokens", "aliases", ... */
  readonly feature: string
  readonly apply: (change: PlanChange) => Effect.Effect<void>
}

export class Entitlements extends Context.Service<Entitlements, {
  /** The account's resolved plan. */
  readonly of: (accountId: number) => Effect.Effect<PlanEntitlements>
  /** The account's resolved plan, its row locked (FOR NO KEY UPDATE) until the caller's transaction ends. */
  readonly lock: (accountId: number) => Effect.Effect<PlanEntitlements>
  /** The account's resolved plan when it includes `feature`; FeatureNotInPlan when not. */
  readonly require: (accountId: number, feature: PlanFeature) => Effect.Effect<PlanEntitlements, FeatureNotInPlan>
  /**
   * The resolved plan of the `accounts` row named `account` in a statement, as one json
   * column: select it `AS plan` (or any name) and decode it with `ResolvedPlan`.
   */
  readonly column: (account: string) => Statement.Fragment
  /** Registers what a plan change does to a feature's data, for as long as the caller's scope lives. */
  readonly onPlanChange: (effect: PlanChangeEffect) => Effect.Effect<void, never, Scope.Scope>
  /** Runs every registered effect for a change; inside the transaction that made it. */
  readonly applyChange: (change: PlanChange) => Effect.Effect<void>
}>()("burnbox/Entitlements") {
  static readonly layer = Layer.effect(Entitlements, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const planRows = rowsDecoder(Schema.Struct({ plan: ResolvedPlan }))

    const column = (account: string) =>
      sql`(SELECT json_build_object('entitlements', p.entitlements, 'overrides', ${sql.literal(account)}.overrides)
           FROM plans p WHERE p.code = ${sql.literal(account)}.plan)`

    const read = (accountId: number, lock: boolean) =>
      sql`SELECT ${column("a")} AS plan FROM accounts a WHERE a.id = ${accountId} ${lock ? sql`FOR NO KEY UPDATE OF a` : sql``}`.pipe(
        Effect.flatMap(planRows),
        Effect.orDie,
        Effect.flatMap(([row]) => row === undefined ? Effect.die(new Error(`account ${accountId} has no plan`)) : Effect.succeed(row.plan))
      )

    const of = Effect.fn("Entitlements.of")((accountId: number) => read(accountId, false))
    const lock = Effect.fn("Entitlements.lock")((accountId: number) => read(accountId, true))
    const require = Effect.fn("Entitlements.require")(function*(accountId: number, feature: PlanFeature) {
      const plan = yield* read(accountId, false)
      if (!planIncludes(plan, feature)) return yield* Effect.fail(new FeatureNotInPlan({ feature }))
      return plan
    })

    const effects = new Set<PlanChangeEffect>()
    const onPlanChange = (effect: PlanChangeEffect) =>
      Effect.acquireRelease(Effect.sync(() => effects.add(effect)), () => Effect.sync(() => effects.delete(effect))).pipe(Effect.asVoid)
    const applyChange = Effect.fn("Entitlements.applyChange")(function*(change: PlanChange) {
      for (const effect of effects) yield* effect.apply(change).pipe(Effect.withSpan(`PlanChange.${effect.feature}`))
    })

    return Entitlements.of({ of, lock, require, column, onPlanChange, applyChange })
  }))
}
