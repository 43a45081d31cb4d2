import { BurnboxApi, CurrentPrincipal, RateLimited, Unauthorized } from "@burnbox/domain"
import { Accounts, BurnboxConfig, emailKey, RateLimiter, Sessions, toAccount } from "@burnbox/store"
import { Effect } from "effect"
import { HttpServerRequest } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { addResponseHeaders, clientAddress } from "../platform/Authentication.ts"
import { withProblems } from "../platform/ProblemMapping.ts"
import { clearSessionCookie, setSessionCookie } from "../platform/Cookies.ts"

/** Failed logins allowed per email and per client address before answers slow to 429. */
export const LoginThrottle = {
  perEmail: [{ limit: 10, seconds: 900 }],
  perAddress: [{ limit: 100, seconds: 900 }]
}

export const AuthHttp = HttpApiBuilder.group(BurnboxApi, "auth", Effect.fn(function*(handlers) {
  const accounts = yield* Accounts
  const sessions = yield* Sessions
  const limiter = yield* RateLimiter
  const config = yield* BurnboxConfig
  const secure = config.siteUrl.startsWith("https://")

  const startSession = Effect.fnUntraced(function*(accountId: number) {
    const secret = yield* sessions.create(accountId)
    yield* setSessionCookie(secret, secure)
  })

  return handlers
    .handle("signup", ({ payload }) =>
      Effect.gen(function*() {
        const account = yield* withProblems(accounts.create({ email: payload.email, password: payload.password }))
        yield* startSession(account.id)
        return toAccount(account)
      }))
    .handle("login", ({ payload }) =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const emailWindowKey = `login:email:${emailKey(payload.email)}`
        const addressWindowKey = `login:addr:${clientAddress(request)}`
        for (const [key, windows] of [[emailWindowKey, LoginThrottle.perEmail], [addressWindowKey, LoginThrottle.perAddress]] as const) {
          const decision = yield* limiter.peek(key, windows)
          if (!decision.allowed) {
            yield* addResponseHeaders({ "retry-after": String(decision.retryAfter) })
            return yield* new RateLimited({ code: "too_many_login_attempts", message: `Too many failed sign-ins; retry in ${decision.retryAfter} s.` })
          }
        }
        const account = yield* accounts.authenticate(payload.email, payload.password)
        if (account === undefined) {
          yield* limiter.hit(emailWindowKey, LoginThrottle.perEmail)
          yield* limiter.hit(addressWindowKey, LoginThrottle.perAddress)
          return yield* Effect.fail(Unauthorized.invalidCredentials())
        }
        yield* startSession(account.id)
        return toAccount(account)
      }))
    .handle("logout", () =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        if (principal.sessionId !== null) yield* sessions.remove(principal.sessionId)
        yield* clearSessionCookie(secure)
      }))
}))
