/**
 * Spec 4.8: the test mail group: a message injected into an alias through the API, as if it had
 * arrived over SMTP. Its resources are messages' (../messages/Message.ts).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Access, Authentication, requires } from "../auth/Access.ts"
import { InjectedTestMessage, TestMessageInput } from "../messages/Message.ts"
import { IdFromPath } from "../platform/Common.ts"
import { Errors as E } from "../platform/Problem.ts"

export class TestMailGroup extends HttpApiGroup.make("testMail")
  .add(
    HttpApiEndpoint.post("inject", "/test/messages", {
      query: { aliasId: Schema.optionalKey(IdFromPath) },
      payload: [TestMessageInput, Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: "message/rfc822" }))],
      success: InjectedTestMessage.pipe(HttpApiSchema.status(202)),
      error: [E.Forbidden, E.NotFound, E.Conflict, E.UnsupportedMediaType, E.ValidationFailed, E.RateLimited]
    }).annotate(Access, requires("test"))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Test mail" }))
{}
