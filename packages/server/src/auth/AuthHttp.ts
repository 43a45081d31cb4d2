import { BurnboxApi, CurrentPrincipal } from "@burnbox/domain"
import { BurnboxConfig, Sessions, type SignedIn, SignIns, toAccount } from "@burnbox/store"
import { Effect } from "effect"
import { HttpServerRequest } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { clientAddress } from "../platform/Authentication.ts"
import { withProblems } from "../platform/ProblemMapping.ts"
import { clearSessionCookie, setSessionCookie } from "../platform/Cookies.ts"

export const AuthHttp = HttpApiBuilder.group(BurnboxApi, "auth", Effect.fn(function*(handlers) {
  const signIns = yield* SignIns
  const sessions = yield* Sessions
  const config = yield* BurnboxConfig
  const secure = config.siteUrl.startsWith("https://")

  /** The signed-in account's answer, with its session's cookie. */
  const withSession = (signedIn: SignedIn) => Effect.as(setSessionCookie(signedIn.session, secure), toAccount(signedIn.account))

  return handlers
    .handle("signup", ({ payload }) => withProblems(signIns.signUp(payload.email, payload.password)).pipe(Effect.flatMap(withSession)))
    .handle("login", ({ payload }) =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        return yield* withProblems(signIns.signIn(payload.email, payload.password, clientAddress(request))).pipe(Effect.flatMap(withSession))
      }))
    .handle("logout", () =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        if (principal.sessionId !== null) yield* sessions.remove(principal.sessionId)
        yield* clearSessionCookie(secure)
      }))
}))
