/** The tokens group: API tokens, managed from a browser session only. */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Access, Authentication, IdParams, requires } from "../auth/Access.ts"
import { Errors as E } from "../platform/Problem.ts"
import { ApiToken, CreatedToken, CreateToken } from "./ApiToken.ts"

export class TokensGroup extends HttpApiGroup.make("tokens")
  .add(
    HttpApiEndpoint.get("list", "/tokens", { success: Schema.Struct({ items: Schema.Array(ApiToken) }) }),
    HttpApiEndpoint.post("create", "/tokens", {
      payload: CreateToken,
      success: CreatedToken.pipe(HttpApiSchema.status(201)),
      error: [E.Conflict, E.ValidationFailed]
    }),
    HttpApiEndpoint.delete("revoke", "/tokens/:id", {
      params: IdParams,
      success: HttpApiSchema.NoContent,
      error: E.NotFound
    })
  )
  .annotate(Access, requires("session"))
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "API tokens" }))
{}
