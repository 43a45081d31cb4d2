import { BurnboxApi, CurrentPrincipal } from "@burnbox/domain"
import { Aliases, type Transition } from "@burnbox/store"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { withProblems } from "../platform/ProblemMapping.ts"

export const AliasesHttp = HttpApiBuilder.group(BurnboxApi, "aliases", Effect.fn(function*(handlers) {
  const aliases = yield* Aliases
  const owner = Effect.map(CurrentPrincipal, (p) => p.accountId)

  const move = (id: number, to: Transition) => withProblems(Effect.flatMap(owner, (accountId) => aliases.transition(accountId, id, to)))

  return handlers
    .handle("list", ({ query }) =>
      Effect.flatMap(owner, (accountId) => aliases.list(accountId, query.includeBurned === "true")).pipe(
        Effect.map((items) => ({ items }))
      ))
    .handle("reserve", ({ payload }) => withProblems(Effect.flatMap(owner, (accountId) => aliases.reserve(accountId, payload))))
    .handle("releaseCandidates", ({ payload }) =>
      Effect.flatMap(owner, (accountId) => aliases.release(accountId, payload?.reservationToken ?? undefined)).pipe(Effect.map((released) => ({ released }))))
    .handle("releaseCandidatesPost", ({ payload }) =>
      Effect.flatMap(owner, (accountId) => aliases.release(accountId, payload?.reservationToken ?? undefined)).pipe(Effect.map((released) => ({ released }))))
    .handle("claim", ({ payload }) => withProblems(Effect.flatMap(owner, (accountId) => aliases.claim(accountId, payload))))
    .handle("update", ({ params, payload }) => withProblems(Effect.flatMap(owner, (accountId) => aliases.change(accountId, params.id, payload))))
    .handle("remove", ({ params }) => move(params.id, "burn"))
    .handle("pause", ({ params }) => move(params.id, "pause"))
    .handle("resume", ({ params }) => move(params.id, "resume"))
    .handle("burn", ({ params }) => move(params.id, "burn"))
    .handle("setTimer", ({ params, payload }) =>
      withProblems(Effect.flatMap(owner, (accountId) => aliases.setTimer(accountId, params.id, payload.selfDestructAt))))
    .handle("clearTimer", ({ params }) => withProblems(Effect.flatMap(owner, (accountId) => aliases.clearTimer(accountId, params.id))))
}))
