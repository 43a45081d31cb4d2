/** Spec 4.1, the push endpoints (issue #32): browser session only; the work is the store's `Push`. */
import { BurnboxApi, CurrentPrincipal } from "@burnbox/domain"
import { Push } from "@burnbox/store"
import { Effect } from "effect"
import { HttpServerRequest } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { clientAddress } from "../platform/Authentication.ts"
import { withProblems } from "../platform/ProblemMapping.ts"

export const PushHttp = HttpApiBuilder.group(BurnboxApi, "push", Effect.fn(function*(handlers) {
  const push = yield* Push
  const caller = Effect.map(CurrentPrincipal, (p) => p.accountId)

  return handlers
    .handle("setEnabled", ({ payload }) => Effect.flatMap(caller, (accountId) => push.setEnabled(accountId, payload.enabled)))
    .handle("dismissNudge", () => Effect.flatMap(caller, (accountId) => push.dismissNudge(accountId)))
    .handle("subscribe", ({ payload }) => withProblems(Effect.flatMap(caller, (accountId) => push.subscribe(accountId, payload))))
    .handle("unsubscribe", ({ params }) => withProblems(Effect.flatMap(caller, (accountId) => push.unsubscribe(accountId, params.id))))
    .handle("test", ({ params }) =>
      withProblems(Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        yield* push.test(yield* caller, params.id, clientAddress(request))
        return { queued: true, sent: true } as const
      })))
    .handle("aliasPreference", ({ params, payload }) =>
      withProblems(Effect.flatMap(caller, (accountId) => push.setAliasPreference(accountId, params.id, payload.enabled))))
}))
