import { BurnboxApi, CurrentPrincipal, Forbidden, NotFound, ValidationFailed } from "@burnbox/domain"
import { Accounts, Tokens } from "@burnbox/store"
import { Effect, Redacted } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { now } from "@burnbox/store/platform/Time"
import { withProblems } from "../platform/ProblemMapping.ts"
import { currentAccount } from "../platform/CurrentAccount.ts"

export const TokensHttp = HttpApiBuilder.group(BurnboxApi, "tokens", Effect.fn(function*(handlers) {
  const tokens = yield* Tokens
  const accounts = yield* Accounts
  return handlers
    .handle("list", () =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        return { items: yield* tokens.list(principal.accountId) }
      }))
    .handle("create", ({ payload }) =>
      Effect.gen(function*() {
        const account = yield* currentAccount(accounts)
        if (!account.entitlements.developerAccess) return yield* Effect.fail(Forbidden.plan("API tokens (developer access)"))
        const expiresAt = payload.expiresAt === undefined || payload.expiresAt === null ? null : new Date(payload.expiresAt)
        if (expiresAt !== null && (Number.isNaN(expiresAt.getTime()) || expiresAt <= (yield* now))) {
          return yield* Effect.fail(ValidationFailed.withFields({ expiresAt: "must_be_future" }))
        }
        const created = yield* withProblems(tokens.create({
          accountId: account.id,
          name: payload.name,
          scopes: payload.scopes,
          expiresAt,
          limit: account.entitlements.apiTokenCount
        }))
        return { token: created.token, secret: Redacted.value(created.secret), secretShownOnce: true as const }
      }))
    .handle("revoke", ({ params }) =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const revoked = yield* tokens.revoke(principal.accountId, params.id)
        if (!revoked) return yield* Effect.fail(NotFound.of("Token"))
      }))
}))
