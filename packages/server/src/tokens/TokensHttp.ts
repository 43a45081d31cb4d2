import { BurnboxApi, CurrentPrincipal } from "@burnbox/domain"
import { Tokens } from "@burnbox/store"
import { Effect, Redacted } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { withProblems } from "../platform/ProblemMapping.ts"

export const TokensHttp = HttpApiBuilder.group(BurnboxApi, "tokens", Effect.fn(function*(handlers) {
  const tokens = yield* Tokens
  const owner = Effect.map(CurrentPrincipal, (p) => p.accountId)
  return handlers
    .handle("list", () => Effect.flatMap(owner, (accountId) => tokens.list(accountId)).pipe(Effect.map((items) => ({ items }))))
    .handle("create", ({ payload }) =>
      withProblems(Effect.flatMap(owner, (accountId) => tokens.create(accountId, payload))).pipe(
        Effect.map((created) => ({ token: created.token, secret: Redacted.value(created.secret), secretShownOnce: true as const }))
      ))
    .handle("revoke", ({ params }) => withProblems(Effect.flatMap(owner, (accountId) => tokens.revoke(accountId, params.id))))
}))
