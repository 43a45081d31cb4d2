/** Spec 4.2: the tags group. */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Access, Authentication, IdParams, requires } from "../auth/Access.ts"
import { Errors as E } from "../platform/Problem.ts"
import { CreateTag, Tag, TagWithCount, UpdateTag } from "./Tag.ts"

export class TagsGroup extends HttpApiGroup.make("tags")
  .add(
    HttpApiEndpoint.get("list", "/tags", { success: Schema.Struct({ items: Schema.Array(TagWithCount) }) })
      .annotate(Access, requires("read")),
    HttpApiEndpoint.post("create", "/tags", {
      payload: CreateTag,
      success: Tag.pipe(HttpApiSchema.status(201)),
      error: [E.Conflict, E.ValidationFailed]
    }).annotate(Access, requires("session")),
    HttpApiEndpoint.patch("update", "/tags/:id", {
      params: IdParams,
      payload: UpdateTag,
      success: Tag,
      error: [E.NotFound, E.Conflict, E.ValidationFailed]
    }).annotate(Access, requires("session")),
    HttpApiEndpoint.delete("remove", "/tags/:id", {
      params: IdParams,
      success: HttpApiSchema.NoContent,
      error: E.NotFound
    }).annotate(Access, requires("session"))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Tags" }))
{}
