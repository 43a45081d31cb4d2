import { BurnboxApi, CurrentPrincipal, NotFound } from "@burnbox/domain"
import { BurnboxConfig, Messages } from "@burnbox/store"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { conditionalJson } from "./Conditional.ts"

const notFound = () => Effect.fail(NotFound.of("Message"))

export const MessagesHttp = HttpApiBuilder.group(BurnboxApi, "messages", Effect.fn(function*(handlers) {
  const messages = yield* Messages
  const config = yield* BurnboxConfig
  return handlers
    .handle("list", ({ query }) => Effect.flatMap(CurrentPrincipal, (p) => messages.list(p.accountId, query)))
    .handle("get", ({ params }) =>
      Effect.flatMap(CurrentPrincipal, (p) => messages.detail(p.accountId, params.id, config.baseUrl)).pipe(
        Effect.flatMap((detail) => (detail === undefined ? notFound() : conditionalJson(detail)))
      ))
    .handle("raw", ({ params }) =>
      Effect.flatMap(CurrentPrincipal, (p) => messages.raw(p.accountId, params.id)).pipe(
        Effect.flatMap((raw) => (raw === undefined ? notFound() : Effect.succeed(raw)))
      ))
}))
