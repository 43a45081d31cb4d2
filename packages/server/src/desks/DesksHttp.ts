import { BurnboxApi, CurrentPrincipal } from "@burnbox/domain"
import { Desks } from "@burnbox/store"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { withProblems } from "../platform/ProblemMapping.ts"

/** Spec 4.6: session-only (the group's Access annotation refuses bearer tokens; CSRF guards the POST). */
export const DesksHttp = HttpApiBuilder.group(BurnboxApi, "desks", Effect.fn(function*(handlers) {
  const desks = yield* Desks
  return handlers
    .handle("sent", ({ params, query }) =>
      withProblems(Effect.flatMap(CurrentPrincipal, (p) => desks.sent(p.accountId, params.aliasId, query.page ?? 1))).pipe(
        Effect.map((items) => ({ items }))
      ))
    .handle("send", ({ params, payload }) => withProblems(Effect.flatMap(CurrentPrincipal, (p) => desks.send(p.accountId, params.aliasId, payload))))
    .handle("reply", ({ params }) =>
      withProblems(Effect.flatMap(CurrentPrincipal, (p) => desks.reply(p.accountId, params.aliasId, params.messageId))))
}))
