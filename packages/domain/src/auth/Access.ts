import { Context } from "effect"
import { IdFromPath } from "../platform/Common.ts"
import { HttpApiMiddleware } from "effect/http-api"
import type { Scope } from "../tokens/ApiToken.ts"
import { Errors } from "../platform/Problem.ts"

/**
 * Who may call an endpoint: a bearer token holding `scope` (sessions may call it too), or
 * only a browser session. Every authenticated endpoint carries this annotation; the
 * Authentication middleware enforces it, with CSRF for every state-changing session call.
 */
export class Access extends Context.Service<Access, { readonly scope: Scope | "session" }>()("burnbox/Access") {}

export const requires = (scope: Scope | "session") => ({ scope }) as const

/** The caller, as the Authentication middleware resolved it. */
export interface Principal {
  readonly accountId: number
  readonly kind: "bearer" | "session"
  /** Set for bearer callers. */
  readonly tokenId: number | null
  /** Set for session callers. */
  readonly sessionId: number | null
  readonly scopes: ReadonlySet<Scope>
}

export class CurrentPrincipal extends Context.Service<CurrentPrincipal, Principal>()("burnbox/CurrentPrincipal") {}

export class Authentication extends HttpApiMiddleware.Service<Authentication, { provides: CurrentPrincipal }>()(
  "burnbox/Authentication",
  { error: [Errors.Unauthorized, Errors.Forbidden, Errors.RateLimited] }
) {}

/** Turns request-decoding failures into 422 validation_failed for every endpoint. */
export class ValidationErrors extends HttpApiMiddleware.Service<ValidationErrors>()("burnbox/ValidationErrors", {
  error: Errors.ValidationFailed
}) {}

/** The cookie carrying a browser session (decisions.md). */
export const SessionCookie = "service_session"
export const CsrfHeader = "x-csrf-token"

export const IdParams = { id: IdFromPath }
