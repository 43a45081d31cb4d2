import { BurnboxApi, CurrentPrincipal } from "@burnbox/domain"
import { Tags } from "@burnbox/store"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { withProblems } from "../platform/ProblemMapping.ts"

export const TagsHttp = HttpApiBuilder.group(BurnboxApi, "tags", Effect.fn(function*(handlers) {
  const tags = yield* Tags
  return handlers
    .handle("list", () => Effect.flatMap(CurrentPrincipal, (p) => tags.list(p.accountId)).pipe(Effect.map((items) => ({ items }))))
    .handle("create", ({ payload }) => withProblems(Effect.flatMap(CurrentPrincipal, (p) => tags.create(p.accountId, payload))))
    .handle("update", ({ params, payload }) => withProblems(Effect.flatMap(CurrentPrincipal, (p) => tags.update(p.accountId, params.id, payload))))
    .handle("remove", ({ params }) => withProblems(Effect.flatMap(CurrentPrincipal, (p) => tags.remove(p.accountId, params.id))))
}))
