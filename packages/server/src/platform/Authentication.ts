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
import { type Decision, type Window } from "@burnbox/store/platform/RateLimiter"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import { now } from "@burnbox/store/platform/Time"

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

/** The secret an Authorization header presents, when it has the shape of one of our tokens. */
export const tokenSecret = (header: string): string | undefined => {
  const secret = bearerCredential(header)
  return secret !== undefined && secret.startsWith(TokenPrefix) ? secret : undefined
}

/** Which counter a request counts against, and its windows. */
export interface RequestLimit {
  readonly key: string
  readonly windows: ReadonlyArray<Window>
}

/** Why a request is refused, and the challenge its answer carries (`WWW-Authenticate`), if any. */
export interface Refusal {
  readonly error: Unauthorized | Forbidden
  readonly challenge: string | undefined
}

/**
 * The one judgement of a bearer token for an endpoint requiring `required`, at `at`: whether it
 * authenticates, which counter the request counts against, and whether it is let through, as
 * which principal. The full stack (the security middleware) and the hot read path both act on
 * it; only how they get the grant and count the request differs (waiting for the database, or
 * from this process's caches).
 */
export type BearerJudgement =
  /** No usable token: the request counts against its client address, and is refused. */
  | { readonly _tag: "InvalidToken"; readonly refusal: Refusal }
  /** A usable token that may not make this request: counted against the token, then refused. */
  | { readonly _tag: "Refused"; readonly grant: TokenGrant; readonly limit: RequestLimit; readonly refusal: Refusal }
  /** Counted against the token, then let through. */
  | { readonly _tag: "Granted"; readonly grant: TokenGrant; readonly limit: RequestLimit; readonly principal: Principal }

export const judgeBearer = (grant: TokenGrant | undefined, at: Date, required: Scope | "session"): BearerJudgement => {
  if (!usableGrant(grant, at)) {
    return { _tag: "InvalidToken", refusal: { error: Unauthorized.invalidToken(), challenge: `${realm}, error="invalid_token"` } }
  }
  const limit = { key: `token:${grant.id}`, windows: tokenWindows(grant) }
  const refused = (error: Unauthorized | Forbidden, challenge?: string): BearerJudgement =>
    ({ _tag: "Refused", grant, limit, refusal: { error, challenge } })
  if (grant.status === "suspended") return refused(Forbidden.tokenSuspended())
  if (required === "session") return refused(Forbidden.sessionRequired())
  if (!grant.scopes.includes(required)) {
    return refused(Forbidden.insufficientScope(required), `${realm}, error="insufficient_scope", scope="${required}"`)
  }
  return {
    _tag: "Granted",
    grant,
    limit,
    principal: {
      accountId: grant.accountId,
      kind: "bearer",
      tokenId: grant.id,
      sessionId: null,
      scopes: new Set(grant.scopes)
    }
  }
}

/** Fails with the refusal's error, its challenge (if any) in the answer's `WWW-Authenticate`. */
const refuse = ({ error, challenge }: Refusal) =>
  challenge === undefined ? Effect.fail(error) : addResponseHeaders({ "www-authenticate": challenge }).pipe(Effect.andThen(Effect.fail(error)))

/** What a request without a usable credential counts against: its client address. */
export const anonymousLimit = (request: HttpServerRequest.HttpServerRequest): RequestLimit =>
  ({ key: `anon:${clientAddress(request)}`, windows: AnonymousWindows })

export const clientAddress = (request: HttpServerRequest.HttpServerRequest): string =>
  Option.getOrElse(request.remoteAddress, () => "unknown")

export const AuthenticationLive = Layer.effect(Authentication, Effect.gen(function*() {
  const sessions = yield* Sessions
  const tokens = yield* Tokens
  const keyring = yield* Keyring
  const limiter = yield* RateLimiter
  const snapshots = yield* AccountSnapshots

  const limit = Effect.fnUntraced(function*({ key, windows }: RequestLimit) {
    const decision = yield* limiter.hit(key, windows)
    const at = yield* now
    yield* addResponseHeaders(rateLimitHeaders(decision, at.getTime()))
    if (!decision.allowed) {
      return yield* new RateLimited({ code: "rate_limited", message: `Request limit reached; retry in ${decision.retryAfter} s.` })
    }
  })

  const bearer = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest, header: string, required: Scope | "session") {
    const secret = tokenSecret(header)
    const grant = secret === undefined ? undefined : yield* tokens.resolve(Redacted.make(secret))
    const judgement = judgeBearer(grant, yield* now, required)
    yield* limit(judgement._tag === "InvalidToken" ? anonymousLimit(request) : judgement.limit)
    if (judgement._tag !== "Granted") return yield* refuse(judgement.refusal)
    yield* tokens.touch(judgement.grant.id)
    return judgement.principal
  })

  const session = Effect.fnUntraced(function*(request: HttpServerRequest.HttpServerRequest) {
    const cookie = request.cookies[SessionCookie]
    const secret = cookie === undefined || cookie === "" ? undefined : Redacted.make(cookie)
    const record = secret === undefined ? undefined : yield* sessions.resolve(secret)
    if (secret === undefined || record === undefined) {
      return yield* refuse({ error: Unauthorized.authenticationRequired(), challenge: realm })
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
