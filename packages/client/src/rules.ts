/**
 * Mail rules (decisions.md "Mail rules"): GET/POST/PATCH/DELETE /rules, for both faces of the
 * client. `rulesOf(client)` takes a BurnboxClient (the Effect face) or a `createClient` client's
 * `raw`; `rulesClient(client)` the Promise face.
 *
 * ```ts
 * const client = createClient({ baseUrl: process.env.BURNBOX_URL!, token: process.env.BURNBOX_TOKEN })
 * const rules = rulesClient(client)
 * await rules.create({ name: "Receipts", match: { from: "shop.example" }, actions: [{ type: "tag", tagId: 3 }, { type: "mark_read" }] })
 * ```
 */
import { Effect } from "effect"
import type * as Rules from "@burnbox/domain/rules/Rule"
import type { RawClient } from "./BurnboxClient.ts"
import { type BurnboxProblem, problems } from "./BurnboxProblem.ts"
import type { Client } from "./createClient.ts"

export type Rule = typeof Rules.Rule.Type
export type RuleList = typeof Rules.RuleList.Type
export type CreateRule = typeof Rules.CreateRule.Type
export type UpdateRule = typeof Rules.UpdateRule.Type

export interface RulesResource {
  /** The account's rules in position order, and the plan's mailRuleCount (`limit`). */
  readonly list: () => Effect.Effect<RuleList, BurnboxProblem>
  /** 409 `rule_limit_reached` over the plan's mailRuleCount; 422 naming each bad field. */
  readonly create: (input: CreateRule) => Effect.Effect<Rule, BurnboxProblem>
  readonly update: (id: number, input: UpdateRule) => Effect.Effect<Rule, BurnboxProblem>
  readonly delete: (id: number) => Effect.Effect<void, BurnboxProblem>
}

/** The rules endpoints over a client's `raw` (a BurnboxClient, or a `createClient` client). */
export const rulesOf = (client: { readonly raw: RawClient }): RulesResource => ({
  list: () => problems(client.raw.rules.list()).pipe(Effect.withSpan("BurnboxClient.rules.list")),
  create: (input) => problems(client.raw.rules.create({ payload: input })).pipe(Effect.withSpan("BurnboxClient.rules.create")),
  update: (id, input) => problems(client.raw.rules.update({ params: { id }, payload: input })).pipe(Effect.withSpan("BurnboxClient.rules.update")),
  delete: (id) => problems(client.raw.rules.remove({ params: { id } })).pipe(Effect.asVoid, Effect.withSpan("BurnboxClient.rules.delete"))
})

/** The same as Promises that reject with a BurnboxProblem, over a `createClient` client. */
export const rulesClient = (client: Client) => {
  const rules = rulesOf(client)
  return {
    list: (): Promise<RuleList> => client.run(rules.list()),
    create: (input: CreateRule): Promise<Rule> => client.run(rules.create(input)),
    update: (id: number, input: UpdateRule): Promise<Rule> => client.run(rules.update(id, input)),
    delete: (id: number): Promise<void> => client.run(rules.delete(id))
  }
}
