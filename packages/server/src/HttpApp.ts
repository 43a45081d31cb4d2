import { createServer } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { BurnboxApi, withOpenApiSecurity } from "@burnbox/domain"
import { BurnboxConfig, MessageWaits } from "@burnbox/store"
import { Effect, Layer } from "effect"
import { HttpRouter } from "effect/http"
import { HttpApiBuilder, HttpApiScalar } from "effect/http-api"
import { AuthenticationLive } from "./platform/Authentication.ts"
import { HotReadsMiddleware } from "./platform/HotReads.ts"
import { AccountHttp } from "./accounts/AccountHttp.ts"
import { AliasesHttp } from "./aliases/AliasesHttp.ts"
import { DesksHttp } from "./desks/DesksHttp.ts"
import { ExportsHttp } from "./exports/ExportsHttp.ts"
import { MessagesHttp } from "./messages/MessagesHttp.ts"
import { NoticesHttp } from "./notices/NoticesHttp.ts"
import { PushHttp } from "./push/PushHttp.ts"
import { TestMailHttp } from "./testmail/TestMailHttp.ts"
import { AuthHttp } from "./auth/AuthHttp.ts"
import { SharingHttp } from "./sharing/SharingHttp.ts"
import { TagsHttp } from "./tags/TagsHttp.ts"
import { RulesHttp } from "./rules/RulesHttp.ts"
import { TokensHttp } from "./tokens/TokensHttp.ts"
import { WebhooksHttp } from "./webhooks/WebhooksHttp.ts"
import { WellKnownRoutes } from "./webhooks/WellKnown.ts"
import { WebRoutes } from "./web/WebRoutes.ts"
import { MercureHubRoutes } from "./realtime/MercureHub.ts"
import { ProblemRouting } from "./platform/ProblemRouting.ts"
import { ValidationErrorsLive } from "./platform/Validation.ts"

/**
 * Every route of the service: the API under /api/v1, its OpenAPI document and the docs page,
 * the web inbox at /,
 * with the hot read path (GET /me, /storage from caches) in front of them. Needs StoreLive's
 * services, which must be built outside `HttpRouter.serve` (what it builds itself stays private
 * to the server: the harness and other roles would see other instances).
 */
export const HttpRoutes = Layer.mergeAll(
  HotReadsMiddleware,
  // The document's security schemes and operations' requirements, and this service's site URL as its server.
  Layer.unwrap(Effect.gen(function*() {
    const config = yield* BurnboxConfig
    const api = withOpenApiSecurity(BurnboxApi, [{ url: config.siteUrl, description: "this burnbox" }])
    return Layer.mergeAll(
      HttpApiBuilder.layer(api, { openapiPath: "/api/v1/openapi.json" }).pipe(
        Layer.provide([AuthHttp, TokensHttp, AccountHttp, TagsHttp, AliasesHttp, SharingHttp, MessagesHttp, TestMailHttp, WebhooksHttp, NoticesHttp, DesksHttp, RulesHttp, ExportsHttp, PushHttp]),
        Layer.provide([AuthenticationLive, ValidationErrorsLive])
      ),
      HttpApiScalar.layer(api, { path: "/docs" })
    )
  })),
  ProblemRouting,
  WellKnownRoutes,
  MercureHubRoutes,
  // The web inbox (#35): the built page and assets at {site_url}/.
  WebRoutes
)

/** Node's HTTP server on host:port. */
export const NodeServerLive = (options: { readonly port: number; readonly host: string }) => NodeHttpServer.layer(createServer, options)

/**
 * Built after the server, so closed before it: at shutdown the requests waiting for mail answer
 * what they have (their page, the empty page, the detail) instead of holding Node's close until
 * its grace period ends and then losing their connection.
 */
const ReleaseWaitsFirst = Layer.effectDiscard(Effect.gen(function*() {
  const waits = yield* MessageWaits
  yield* Effect.addFinalizer(() => waits.release)
}))

/**
 * The routes served on host:port. Answers the server (its bound address) and HotReads.
 * `disableListenLog` leaves out the "Listening on" line (the test harness).
 */
export const httpListener = (options: { readonly port: number; readonly host: string; readonly disableListenLog?: boolean }) =>
  ReleaseWaitsFirst.pipe(
    Layer.provideMerge(HttpRouter.serve(HttpRoutes, { disableLogger: true, disableListenLog: options.disableListenLog ?? false })),
    Layer.provideMerge(NodeServerLive({ port: options.port, host: options.host }))
  )

/** The HTTP role: every route on BURNBOX_HOST:BURNBOX_HTTP_PORT; needs StoreLive's services. */
export const HttpLive = Layer.unwrap(Effect.gen(function*() {
  const config = yield* BurnboxConfig
  return httpListener({ port: config.httpPort, host: config.host })
}))
