import { createServer } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { BurnboxApi } from "@burnbox/domain"
import { AccountSnapshots, Accounts, Aliases, BurnboxConfig, Mailstore, MessageActions, Messages, Notices, CandidateRandom, Domains, Keyring, RateLimiter, Sessions, Tags, Tokens, ServiceKeys, Webhooks } from "@burnbox/store"
import { Effect, Layer } from "effect"
import { HttpRouter } from "effect/http"
import { HttpApiBuilder, HttpApiScalar } from "effect/http-api"
import { AuthenticationLive } from "./platform/Authentication.ts"
import { HotReadsMiddleware } from "./platform/HotReads.ts"
import { AccountHttp } from "./accounts/AccountHttp.ts"
import { AliasesHttp } from "./aliases/AliasesHttp.ts"
import { MessagesHttp } from "./messages/MessagesHttp.ts"
import { NoticesHttp } from "./notices/NoticesHttp.ts"
import { TestMailHttp } from "./testmail/TestMailHttp.ts"
import { AuthHttp } from "./auth/AuthHttp.ts"
import { TagsHttp } from "./tags/TagsHttp.ts"
import { TokensHttp } from "./tokens/TokensHttp.ts"
import { WebhooksHttp } from "./webhooks/WebhooksHttp.ts"
import { WellKnownRoutes } from "./webhooks/WellKnown.ts"
import { ProblemRouting } from "./platform/ProblemRouting.ts"
import { ValidationErrorsLive } from "./platform/Validation.ts"

/** The repositories the API reads and writes; each needs only the SQL client and config. */
export const ApiServices = Layer.mergeAll(
  Accounts.layer,
  AccountSnapshots.layer.pipe(Layer.provide(Accounts.layer)),
  Sessions.layer,
  Tokens.layer,
  Tags.layer,
  Domains.layer,
  RateLimiter.layer,
  Mailstore.layer,
  Messages.layer,
  Notices.layer,
  MessageActions.layer,
  Aliases.layer.pipe(Layer.provide(RateLimiter.layer)),
  Webhooks.layer,
  ServiceKeys.layer
).pipe(Layer.provideMerge(Keyring.layer))

/**
 * Every route of the service: the API under /api/v1, its OpenAPI document and the docs page,
 * with the hot read path (GET /me, /storage from caches) in front of them.
 */
export const HttpRoutes = Layer.mergeAll(
  HotReadsMiddleware,
  HttpApiBuilder.layer(BurnboxApi, { openapiPath: "/api/v1/openapi.json" }).pipe(
    Layer.provide([AuthHttp, TokensHttp, AccountHttp, TagsHttp, AliasesHttp, MessagesHttp, TestMailHttp, WebhooksHttp, NoticesHttp]),
    Layer.provide([AuthenticationLive, ValidationErrorsLive])
  ),
  HttpApiScalar.layer(BurnboxApi, { path: "/docs" }),
  ProblemRouting,
  WellKnownRoutes
).pipe(Layer.provide(ApiServices))

/** Node's HTTP server on host:port. */
export const NodeServerLive = (options: { readonly port: number; readonly host: string }) => NodeHttpServer.layer(createServer, options)

/** The HTTP listener on BURNBOX_HOST:BURNBOX_HTTP_PORT, serving every route. */
export const HttpServerLive = Layer.unwrap(Effect.gen(function*() {
  const config = yield* BurnboxConfig
  return HttpRouter.serve(HttpRoutes, { disableLogger: true }).pipe(
    Layer.provide(NodeServerLive({ port: config.httpPort, host: config.host })),
    Layer.provide(CandidateRandom.layer)
  )
}))
