/** The notices group: what the service did on its own that the account owner should learn about. */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Access, Authentication, requires } from "../auth/Access.ts"
import { Notice } from "./Notice.ts"

export class NoticesGroup extends HttpApiGroup.make("notices")
  .add(
    HttpApiEndpoint.get("list", "/notices", { success: Schema.Struct({ items: Schema.Array(Notice) }) })
      .annotate(Access, requires("read"))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Notices" }))
{}
