/** decisions.md "Mail rules": the rules group (Session + CSRF, or bearer `manage-aliases`; GET: `read`). */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Access, Authentication, IdParams, requires } from "../auth/Access.ts"
import { Errors as E } from "../platform/Problem.ts"
import { CreateRule, Rule, RuleList, UpdateRule } from "./Rule.ts"

export class RulesGroup extends HttpApiGroup.make("rules")
  .add(
    HttpApiEndpoint.get("list", "/rules", { success: RuleList }).annotate(Access, requires("read")),
    HttpApiEndpoint.post("create", "/rules", {
      payload: CreateRule,
      success: Rule.pipe(HttpApiSchema.status(201)),
      error: [E.Conflict, E.ValidationFailed]
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.patch("update", "/rules/:id", {
      params: IdParams,
      payload: UpdateRule,
      success: Rule,
      error: [E.NotFound, E.ValidationFailed]
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.delete("remove", "/rules/:id", {
      params: IdParams,
      success: HttpApiSchema.NoContent,
      error: E.NotFound
    }).annotate(Access, requires("manage-aliases"))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Mail rules" }))
{}
