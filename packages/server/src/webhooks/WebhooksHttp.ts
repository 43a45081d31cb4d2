/** Spec 4.9: thin handlers over the Webhooks repository. */
import { BurnboxApi, CurrentPrincipal } from "@burnbox/domain"
import { Webhooks } from "@burnbox/store"
import { Effect, Redacted } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { withProblems } from "../platform/ProblemMapping.ts"

const DefaultPageSize = 50

export const WebhooksHttp = HttpApiBuilder.group(BurnboxApi, "webhooks", Effect.fn(function*(handlers) {
  const webhooks = yield* Webhooks
  const owner = Effect.map(CurrentPrincipal, (p) => p.accountId)

  return handlers
    .handle("list", () => Effect.flatMap(owner, (accountId) => webhooks.listWithLimit(accountId)))
    .handle("create", ({ payload }) =>
      withProblems(Effect.flatMap(owner, (accountId) => webhooks.create(accountId, payload))).pipe(
        Effect.map((created) => ({ webhook: created.webhook, secret: Redacted.value(created.secret), secretShownOnce: true as const }))
      ))
    .handle("update", ({ params, payload }) => withProblems(Effect.flatMap(owner, (accountId) => webhooks.update(accountId, params.id, payload))))
    .handle("remove", ({ params }) => withProblems(Effect.flatMap(owner, (accountId) => webhooks.remove(accountId, params.id))))
    .handle("rotateSecret", ({ params }) =>
      withProblems(Effect.flatMap(owner, (accountId) => webhooks.rotateSecret(accountId, params.id))).pipe(
        Effect.map((rotated) => ({ webhook: rotated.webhook, secret: Redacted.value(rotated.secret), secretShownOnce: true as const }))
      ))
    .handle("deliveries", ({ params, query }) =>
      withProblems(Effect.flatMap(owner, (accountId) => webhooks.deliveries(accountId, params.id, query.limit ?? DefaultPageSize))).pipe(
        Effect.map((items) => ({ items }))
      ))
    .handle("allDeliveries", ({ query }) =>
      Effect.flatMap(owner, (accountId) => webhooks.deliveries(accountId, null, query.limit ?? DefaultPageSize)).pipe(
        // Without an endpoint id there is nothing to be missing.
        Effect.catchTag("WebhookNotFound", Effect.die),
        Effect.map((items) => ({ items }))
      ))
    .handle("test", ({ params }) =>
      withProblems(Effect.flatMap(owner, (accountId) => webhooks.queueTest(accountId, params.id))).pipe(Effect.map((delivery) => ({ delivery }))))
    .handle("redeliver", ({ params }) =>
      withProblems(Effect.flatMap(owner, (accountId) => webhooks.redeliver(accountId, params.id))).pipe(Effect.map((delivery) => ({ delivery }))))
}))
