import { BurnboxApi, CurrentPrincipal } from "@burnbox/domain"
import { Shares } from "@burnbox/store"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { withProblems } from "../platform/ProblemMapping.ts"

export const SharingHttp = HttpApiBuilder.group(BurnboxApi, "sharing", Effect.fn(function*(handlers) {
  const shares = yield* Shares
  const caller = Effect.map(CurrentPrincipal, (p) => p.accountId)

  return handlers
    .handle("invite", ({ params, payload }) => withProblems(Effect.flatMap(caller, (accountId) => shares.invite(accountId, params.id, payload))))
    .handle("list", ({ params }) =>
      withProblems(Effect.flatMap(caller, (accountId) => shares.list(accountId, params.id))).pipe(Effect.map((items) => ({ items }))))
    .handle("update", ({ params, payload }) =>
      withProblems(Effect.flatMap(caller, (accountId) => shares.changeRole(accountId, params.id, params.shareId, payload.role))))
    .handle("end", ({ params }) => withProblems(Effect.flatMap(caller, (accountId) => shares.end(accountId, params.id, params.shareId))))
    .handle("invitations", () => Effect.flatMap(caller, (accountId) => shares.invitations(accountId)).pipe(Effect.map((items) => ({ items }))))
    .handle("accept", ({ params }) => withProblems(Effect.flatMap(caller, (accountId) => shares.accept(accountId, params.id))))
    .handle("decline", ({ params }) => withProblems(Effect.flatMap(caller, (accountId) => shares.decline(accountId, params.id))))
    .handle("leave", ({ params }) => withProblems(Effect.flatMap(caller, (accountId) => shares.leave(accountId, params.id))))
    .handle("grants", ({ params }) =>
      withProblems(Effect.flatMap(caller, (accountId) => shares.grants(accountId, params.id))).pipe(Effect.map((items) => ({ items }))))
    .handle("acknowledgeGrants", ({ params }) => withProblems(Effect.flatMap(caller, (accountId) => shares.acknowledgeGrants(accountId, params.id))))
    .handle("revokeGrant", ({ params }) =>
      withProblems(Effect.flatMap(caller, (accountId) => shares.revokeGrant(accountId, params.id, params.kind, params.subjectId))))
    .handle("revoked", () => Effect.flatMap(caller, (accountId) => shares.revoked(accountId)).pipe(Effect.map((items) => ({ items }))))
}))
