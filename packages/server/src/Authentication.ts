import {
  Access,
  Authentication,
  CsrfHeader,
  CurrentPrincipal,
  Forbidden,
  type Principal,
  RateLimited,
  type Scope,
  Scopes,
  SessionCookie,
  TokenPrefix,
  Unauthorized
} from "@burnbox/domain"
import { AccountSnapshots, Keyring, RateLimiter, Sessions, type TokenGrant, Tokens } from "@burnbox/store"
import { type Decision } from "@burnbox/store/RateLimiter"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import { now } from "@burnbox/store/Time"

const allScopes: ReadonlySet<Scope> = new Set(Scopes)
const safeMethods = new Set(["GET", "HEAD", "OPTIONS"])
const realm = `Bearer realm="burnbox"`

/** Limits for requests that present no usable token, per client address. */
export const AnonymousWindows = [{ limit: 600, seconds: 60 }, { limit: 100_000, seconds: 86_400 }]

export const rateLimitHeaders = (decision: Decision, nowMs: number): Record<string, string> => {
  const { binding } = decision
  const headers: Record<string, string> = {
    "ratelimit-limit": String(binding.limit),
    "ratelimit-remaining": String(decision.remaining),
    "ratelimit-reset": String(binding.resetIn),
    "ratelimit-policy": `${binding.limit};w=${binding.seconds}`,
    "x-ratelimit-limit": String(binding.limit),
    "x-ratelimit-remaining": String(decision.remaining),
    "x-ratelimit-reset": String(Math.ceil(nowMs / 1000) + binding.resetIn)
  }
  if (!decision.allowed) headers["retry-after"] = String(decision.retryAfter)
  return headers
}

/** Adds headers to whatever response this request finally gets, error answers included. */
export const addResponseHeaders = (headers: Record<string, string>) =>
  HttpEffect.appendPreResponseHandler((_request, response) => Effect.succeed(HttpServerResponse.setHeaders(response, headers)))

/** A grant that authenticates at `at` (a suspended one authenticates, then is refused). */
export const usableGrant = (grant: TokenGrant | undefined, at: Date): grant is TokenGrant =>
  grant !== undefined && grant.status !== "revoked" && (grant.expiresAt === null || grant.expiresAt > at)

/** The request limits a token's requests count against. */
export const tokenWindows = (grant: TokenGrant) => [
  { limit: grant.requestsPerMinute, seconds: 60 },
  { limit: grant.requestsPerDay, seconds: 86_400 }
]

/** The access an endpoint requires, from its own annotation or its group's. */
export const requiredAccess = (endpoint: { readonly annotations: Context.Context<never> }, group: { readonly annotations: Context.Context<never> }) =>
  Context.getOrUndefined(endpoint.annotations, Access) ?? Context.getOrUndefined(group.annotations, Access)

export const bearerCredential = (header: string): string | undefined => {
  const match = /^Bearer +(\S+) *$/i.exec(header)
  return match?.[1]
}

export const clientAddress = (request: HttpServerRequest.HttpServerRequest): string =>
  Option.getOrElse(request.remoteAddress, () => "unknown")

export const AuthenticationLive = Layer.effect(Authentication, Effect.gen(function*() {
  const sessions = yield* Sessions
  const tokens = yield* Tokens
  const keyring = yield* Keyring
  const limiter = yield* RateLimiter
  const snapshots = yield* AccountSnapshots

  const limit = Effect.fnUntraced(function*(key: string, windows: ReadonlyArray<{ limit: number; seconds: number }>) {
    const decision = yield* limiter.hit(key, windows)
    const at = yield* now
    yield* addResponseHeaders(rateLimitHeaders(decision, at.getTime()))
    if (!decision.allowed) {
      return yield* new RateLimited({ code: "rate_limited", message: `Request limit reached; retry in ${decision.retryAfter} s.` })
    }
  })

  const refuse = <E>(error: E, challenge: string) =>
    addResponseHeaders({ "www-authenticate": challenge }).pipe(Effect.andThen(Effect.fail(error)))

  const bearer = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest, header: string, required: Scope | "session") {
    const secret = bearerCredential(header)
    const grant = secret !== undefined && secret.startsWith(TokenPrefix) ? yield* tokens.resolve(Redacted.make(secret)) : undefined
    const at = yield* now
    if (!usableGrant(grant, at)) {
      yield* limit(`anon:${clientAddress(request)}`, AnonymousWindows)
      return yield* refuse(Unauthorized.invalidToken(), `${realm}, error="invalid_token"`)
    }
    yield* limit(`token:${grant.id}`, tokenWindows(grant))
    if (grant.status === "suspended") return yield* Effect.fail(Forbidden.tokenSuspended())
    if (required === "session") return yield* Effect.fail(Forbidden.sessionRequired())
    if (!grant.scopes.includes(required)) {
      return yield* refuse(Forbidden.insufficientScope(required), `${realm}, error="insufficient_scope", scope="${required}"`)
    }
    yield* tokens.touch(grant.id)
    return {
      accountId: grant.accountId,
      kind: "bearer",
      tokenId: grant.id,
      sessionId: null,
      scopes: new Set(grant.scopes)
    } satisfies Principal
  })

  const session = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const cookie = request.cookies[SessionCookie]
    const secret = cookie === undefined || cookie === "" ? undefined : Redacted.make(cookie)
    const record = secret === undefined ? undefined : yield* sessions.resolve(secret)
    if (secret === undefined || record === undefined) {
      return yield* refuse(Unauthorized.authenticationRequired(), realm)
    }
    if (!safeMethods.has(request.method) && !keyring.checkCsrf(secret, request.headers[CsrfHeader])) {
      return yield* Effect.fail(Forbidden.csrf())
    }
    return {
      accountId: record.accountId,
      kind: "session",
      tokenId: null,
      sessionId: record.id,
      scopes: allScopes
    } satisfies Principal
  })

  return Authentication.of((httpEffect, { endpoint, group }) =>
    Effect.gen(function*() {
      const access = requiredAccess(endpoint, group)
      if (access === undefined) return yield* Effect.die(new Error(`endpoint ${endpoint.identifier} has no Access annotation`))
      const request = yield* HttpServerRequest.HttpServerRequest
      const authorization = request.headers["authorization"]
      const principal = authorization !== undefined
        ? yield* bearer(request, authorization, access.scope)
        : yield* session(request)
      const handled = Effect.provideService(httpEffect, CurrentPrincipal, principal)
      // A change this request makes to the account shows in the caller's next read at once.
      return yield* safeMethods.has(request.method)
        ? handled
        : Effect.ensuring(handled, Effect.sync(() => snapshots.forget(principal.accountId)))
    })
  )
}))
