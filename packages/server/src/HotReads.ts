/**
 * The hottest authenticated reads, GET /api/v1/me and GET /api/v1/storage with a bearer token,
 * answered straight from the caches the full stack keeps in this process: the token grant
 * (Tokens), the request-limit lease (RateLimiter) and the account snapshot (AccountSnapshots).
 * The rules are the full stack's own (`usableGrant`, `tokenWindows`, the endpoint's Access
 * annotation, `rateLimitHeaders`, the endpoint's success schema), and so are the body and the
 * headers. Whenever an input is not cached, something would have to be written (a new lease,
 * `lastUsedAt`), or the answer would not be a 200, the request goes to the full HttpApi stack
 * instead, which also fills the caches for the next one.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { Account, BurnboxApi, StorageUsage, TokenPrefix } from "@burnbox/domain"
import { type AccountRow, AccountSnapshots, RateLimiter, toAccount, Tokens } from "@burnbox/store"
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { bearerCredential, rateLimitHeaders, requiredAccess, tokenWindows, usableGrant } from "./Authentication.ts"
import { accountStorage } from "./http/AccountHttp.ts"

const group = BurnboxApi.groups.account

const route = (endpoint: (typeof group.endpoints)[keyof typeof group.endpoints], encode: (account: AccountRow) => string) => {
  const access = requiredAccess(endpoint, group)
  // Snapshots are immutable: each one's body is encoded once.
  const bodies = new WeakMap<AccountRow, string>()
  /**
   * The body, or undefined when the stored account does not encode (a row its schema refuses).
   * This runs inside Node's request dispatch, where a throw would take the process down: such a
   * request goes to the full stack, which answers it as it answers any other failure.
   */
  const body = (account: AccountRow): string | undefined => {
    let encoded = bodies.get(account)
    if (encoded === undefined) {
      try {
        encoded = encode(account)
      } catch {
        return undefined
      }
      bodies.set(account, encoded)
    }
    return encoded
  }
  return { scope: access === undefined || access.scope === "session" ? undefined : access.scope, body }
}

const encodeAccount = Schema.encodeSync(Account)
const encodeStorage = Schema.encodeSync(StorageUsage)

const routes = new Map<string, ReturnType<typeof route>>([
  [group.endpoints.me.path, route(group.endpoints.me, (account) => JSON.stringify(encodeAccount(toAccount(account))))],
  [group.endpoints.storage.path, route(group.endpoints.storage, (account) => JSON.stringify(encodeStorage(accountStorage(account))))]
])

export class HotReads extends Context.Service<HotReads, {
  /** Answers the request and says true, or says false and leaves it untouched. */
  readonly serve: (request: IncomingMessage, response: ServerResponse) => boolean
  /** How many requests this path answered (for tests and diagnostics). */
  readonly served: () => number
}>()("burnbox/HotReads") {
  static readonly layer = Layer.effect(HotReads, Effect.gen(function*() {
    const tokens = yield* Tokens
    const limiter = yield* RateLimiter
    const snapshots = yield* AccountSnapshots
    const clock = yield* Clock.Clock
    let served = 0

    const serve = (request: IncomingMessage, response: ServerResponse): boolean => {
      if (request.method !== "GET") return false
      const found = request.url === undefined ? undefined : routes.get(request.url)
      const header = request.headers.authorization
      if (found === undefined || found.scope === undefined || header === undefined) return false
      const secret = bearerCredential(header)
      if (secret === undefined || !secret.startsWith(TokenPrefix)) return false
      const at = clock.currentTimeMillisUnsafe()
      const grant = tokens.cachedGrant(secret, at)
      if (!usableGrant(grant, new Date(at)) || grant.status !== "active" || !grant.scopes.includes(found.scope)) return false
      if (tokens.touchDue(grant.id, at)) return false
      const account = snapshots.peek(grant.accountId, at)
      if (account === undefined) return false
      const body = found.body(account)
      if (body === undefined) return false
      // Last: counting the request is the one step that changes something.
      const decision = limiter.tryHit(`token:${grant.id}`, tokenWindows(grant), at)
      if (decision === undefined || !decision.allowed) return false
      response.writeHead(200, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
        ...rateLimitHeaders(decision, at)
      })
      response.end(body)
      served++
      return true
    }

    return HotReads.of({ serve, served: () => served })
  }))
}

/**
 * A Node HTTP server that offers each request to the hot path before its `request` listeners
 * (the Effect HTTP server's handler) see it.
 */
export const withHotReads = (server: Server, hot: HotReads["Service"]): Server => {
  const emit = server.emit.bind(server)
  server.emit = ((event: string | symbol, ...args: Array<unknown>) =>
    event === "request" && hot.serve(args[0] as IncomingMessage, args[1] as ServerResponse)
      ? true
      : emit(event as string, ...args)) as Server["emit"]
  return server
}

/** Node's HTTP server on host:port, with the hot read path in front of the routes. */
export const NodeServerLive = (options: { readonly port: number; readonly host: string }) =>
  Layer.unwrap(Effect.gen(function*() {
    const hot = yield* HotReads
    return NodeHttpServer.layer(() => withHotReads(createServer(), hot), options)
  })).pipe(Layer.provideMerge(HotReads.layer))
