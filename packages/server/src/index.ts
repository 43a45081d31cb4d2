/**
 * @burnbox/server: the HTTP API (HttpApi handlers over the contract of @burnbox/domain).
 *
 * One folder per feature with its thin handlers (`<Feature>Http.ts`): accounts, auth, tokens,
 * tags, aliases, messages, testmail, webhooks (and the /.well-known key document), notices.
 * `platform/` holds what cuts across them: authentication (bearer scopes, cookie session and
 * CSRF), validation and Problem mapping, unknown routes, the hot read path.
 * `HttpApp.ts` holds the routes and the one wired layer, `HttpLive` (the HTTP role on
 * BurnboxConfig's host and port), which needs StoreLive's services; `httpListener` is the same
 * routes on a host and port of one's own (the test harness).
 */
export * from "./platform/Authentication.ts"
export * from "./platform/HotReads.ts"
export * from "./HttpApp.ts"
export * from "./platform/ProblemRouting.ts"
export * from "./platform/Validation.ts"
