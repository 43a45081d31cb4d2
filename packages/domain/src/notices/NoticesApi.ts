import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Access, Authentication, requires } from "../auth/Access.ts"
import { DateTimeString, Id } from "../platform/Common.ts"

/**
 * Notices for the account owner (an additive resource): things the service did on its own
 * that the owner should learn about, such as a webhook endpoint disabled after three days of
 * failures (`kind` `webhook.disabled`). Newest first.
 */
export const Notice = Schema.Struct({
  id: Id,
  kind: Schema.String,
  data: Schema.Record(Schema.String, Schema.Unknown),
  createdAt: DateTimeString
}).annotate({ identifier: "Notice" })

export class NoticesGroup extends HttpApiGroup.make("notices")
  .add(
    HttpApiEndpoint.get("list", "/notices", { success: Schema.Struct({ items: Schema.Array(Notice) }) })
      .annotate(Access, requires("read"))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Notices" }))
{}
