/** The auth group: sign-up, login and logout of a browser session. */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Account, Credentials, LoginCredentials } from "../accounts/Account.ts"
import { Errors as E } from "../platform/Problem.ts"
import { Access, Authentication, requires } from "./Access.ts"

export class AuthGroup extends HttpApiGroup.make("auth")
  .add(
    HttpApiEndpoint.post("signup", "/auth/signup", {
      payload: Credentials,
      success: Account.pipe(HttpApiSchema.status(201)),
      error: [E.Conflict, E.ValidationFailed, E.RateLimited]
    }),
    HttpApiEndpoint.post("login", "/auth/login", {
      payload: LoginCredentials,
      success: Account,
      error: [E.Unauthorized, E.ValidationFailed, E.RateLimited]
    }),
    HttpApiEndpoint.post("logout", "/auth/logout", { success: HttpApiSchema.NoContent })
      .annotate(Access, requires("session"))
      .middleware(Authentication)
  )
  .annotateMerge(OpenApi.annotations({ title: "Authentication" }))
{}
