import { BurnboxApi, CurrentPrincipal } from "@burnbox/domain"
import { Rules } from "@burnbox/store"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { withProblems } from "../platform/ProblemMapping.ts"

/** decisions.md "Mail rules": GET/POST/PATCH/DELETE /rules. */
export const RulesHttp = HttpApiBuilder.group(BurnboxApi, "rules", Effect.fn(function*(handlers) {
  const rules = yield* Rules
  return handlers
    .handle("list", () => Effect.flatMap(CurrentPrincipal, (p) => rules.list(p.accountId)))
    .handle("create", ({ payload }) => withProblems(Effect.flatMap(CurrentPrincipal, (p) => rules.create(p.accountId, payload))))
    .handle("update", ({ params, payload }) => withProblems(Effect.flatMap(CurrentPrincipal, (p) => rules.update(p.accountId, params.id, payload))))
    .handle("remove", ({ params }) => withProblems(Effect.flatMap(CurrentPrincipal, (p) => rules.remove(p.accountId, params.id))))
}))
