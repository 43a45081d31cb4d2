/** Spec 4.6: protected operator desks, for browser sessions only (bearer tokens are refused with 403). */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Access, Authentication, requires } from "../auth/Access.ts"
import { Errors as E } from "../platform/Problem.ts"
import { Id } from "../platform/Common.ts"
import { DeskParams, DeskReply, DeskReplyParams, DeskSentPage, DeskSentQuery, SendDeskMail } from "./DeskMail.ts"

export class DesksGroup extends HttpApiGroup.make("desks")
  .add(
    HttpApiEndpoint.get("sent", "/desk-mail/:aliasId", {
      params: DeskParams,
      query: DeskSentQuery,
      success: DeskSentPage,
      error: [E.NotFound, E.ValidationFailed]
    }).annotate(Access, requires("session")),
    HttpApiEndpoint.post("send", "/desk-mail/:aliasId", {
      params: DeskParams,
      payload: SendDeskMail,
      success: Schema.Struct({ id: Id }).pipe(HttpApiSchema.status(201)),
      error: [E.NotFound, E.ValidationFailed, E.RateLimited, E.ServiceUnavailable]
    }).annotate(Access, requires("session")),
    HttpApiEndpoint.get("reply", "/desk-mail/:aliasId/reply/:messageId", {
      params: DeskReplyParams,
      success: DeskReply,
      error: [E.NotFound, E.ValidationFailed]
    }).annotate(Access, requires("session"))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Protected operator desks" }))
{}
