/**
 * The hottest authenticated reads, GET /api/v1/me and GET /api/v1/storage with a bearer token,
 * answered by a global router middleware, in front of the API's routes, from the caches the full
 * stack keeps in this process: the token grant (Tokens), the request-limit lease (RateLimiter)
 * and the account snapshot (AccountSnapshots).
 *
 * It decides nothing of its own: the token is judged by `judgeBearer` against the endpoint's
 * Access annotation, as the security middleware judges it; the request is counted against the
 * judgement's limit and answered with `rateLimitHeaders`; the body is the handler's mapping
 * (`AccountReads`) encoded with the endpoint's success schema. Whenever an input is not cached,
 * something would have to be written (a new lease, `lastUsedAt`), or the answer would not be a
 * 200, the request goes on to the routes unchanged, which also fill the caches for the next one.
 */
import { Account, BurnboxApi, StorageUsage } from "@burnbox/domain"
import { type AccountRow, AccountSnapshots, RateLimiter, Tokens } from "@burnbox/store"
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { judgeBearer, rateLimitHeaders, requiredAccess, tokenSecret } from "./Authentication.ts"
import { AccountReads } from "../accounts/AccountHttp.ts"

const group = BurnboxApi.groups.account

/**
 * The endpoint's success encoder, as the routes use it: HttpApi encodes a JSON success with the
 * JSON codec of the declared schema. Checked against the endpoint itself, so the two cannot drift.
 */
const successEncoder = <S extends Schema.Codec<unknown, unknown, never, never>>(
  endpoint: { readonly identifier: string; readonly success: ReadonlySet<Schema.Top> },
  declared: S
) => {
  const codec = Schema.toCodecJson(declared)
  const [schema, ...others] = endpoint.success
  if (schema?.ast !== codec.ast || others.length > 0) throw new Error(`hot read ${endpoint.identifier}: its success is not the declared schema`)
  return Schema.encodeSync(codec)
}

const textEncoder = new TextEncoder()

const route = <S extends Schema.Codec<unknown, unknown, never, never>>(
  endpoint: (typeof group.endpoints)["me" | "storage"],
  declared: S,
  read: (account: AccountRow) => S["Type"]
) => {
  const access = requiredAccess(endpoint, group)
  if (access === undefined || access.scope === "session") throw new Error(`hot read ${endpoint.identifier}: not a bearer endpoint`)
  const encode = successEncoder(endpoint, declared)
  // Snapshots are immutable: each one's body is encoded once (null: its schema refuses it).
  const bodies = new WeakMap<AccountRow, Uint8Array | null>()
  /** The body, or undefined when the stored account does not encode; the routes answer that as any other failure. */
  const body = (account: AccountRow): Uint8Array | undefined => {
    let encoded = bodies.get(account)
    if (encoded === undefined) {
      try {
        encoded = textEncoder.encode(JSON.stringify(encode(read(account))))
      } catch {
        encoded = null
      }
      bodies.set(account, encoded)
    }
    return encoded ?? undefined
  }
  return { path: endpoint.path, scope: access.scope, body }
}

const routes = new Map<string, ReturnType<typeof route>>([
  route(group.endpoints.me, Account, AccountReads.me),
  route(group.endpoints.storage, StorageUsage, AccountReads.storage)
].map((r) => [r.path, r]))

export class HotReads extends Context.Service<HotReads, {
  /** The answer from this process's caches at `atMs`, counted; undefined, counting nothing, to leave the request to the routes. */
  readonly answer: (request: HttpServerRequest.HttpServerRequest, atMs: number) => HttpServerResponse.HttpServerResponse | undefined
  /** How many requests this path answered (for tests and diagnostics). */
  readonly served: () => number
}>()("burnbox/HotReads") {
  static readonly layer = Layer.effect(HotReads, Effect.gen(function*() {
    const tokens = yield* Tokens
    const limiter = yield* RateLimiter
    const snapshots = yield* AccountSnapshots
    let served = 0

    const answer = (request: HttpServerRequest.HttpServerRequest, at: number) => {
      if (request.method !== "GET") return undefined
      const found = routes.get(request.url)
      const header = request.headers["authorization"]
      if (found === undefined || header === undefined) return undefined
      const secret = tokenSecret(header)
      if (secret === undefined) return undefined
      const judgement = judgeBearer(tokens.cachedGrant(secret, at), new Date(at), found.scope)
      if (judgement._tag !== "Granted" || tokens.touchDue(judgement.grant.id, at)) return undefined
      const account = snapshots.peek(judgement.principal.accountId, at)
      if (account === undefined) return undefined
      const body = found.body(account)
      if (body === undefined) return undefined
      // Last: counting the request is the one step that changes something.
      const decision = limiter.tryHit(judgement.limit.key, judgement.limit.windows, at)
      if (decision === undefined || !decision.allowed) return undefined
      served++
      return HttpServerResponse.uint8Array(body, { contentType: "application/json", headers: rateLimitHeaders(decision, at) })
    }

    return HotReads.of({ answer, served: () => served })
  }))
}

/**
 * The hot read path in front of every route: a global router middleware, so a request it leaves
 * alone goes through the same stack as any other.
 */
export const HotReadsMiddleware = HttpRouter.middleware(Effect.gen(function*() {
  const hot = yield* HotReads
  return (httpEffect) =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => {
        const answer = hot.answer(request, at)
        return answer === undefined ? httpEffect : Effect.succeed(answer)
      }))
}), { global: true }).pipe(Layer.provideMerge(HotReads.layer))
