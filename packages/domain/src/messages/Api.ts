/** Spec 4.5: the messages group: lists, reading, reader state, trash, attachments. */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Access, Authentication, IdParams, requires } from "../auth/Access.ts"
import { Errors as E } from "../platform/Problem.ts"
import {
  AttachmentParams,
  AttachmentQuery,
  BulkMessageInput,
  BulkMessageResult,
  DeleteMessageQuery,
  EmptyTrashQuery,
  EmptyTrashResult,
  GetMessageQuery,
  ListMessagesQuery,
  MessageDetail,
  MessageHtmlQuery,
  MessagePage,
  MessageState,
  RemoteImagePreference,
  RemoteImagePreferenceInput,
  UpdateMessageState
} from "./Message.ts"

export class MessagesGroup extends HttpApiGroup.make("messages")
  .add(
    HttpApiEndpoint.get("list", "/messages", {
      query: ListMessagesQuery,
      success: MessagePage,
      error: [E.ValidationFailed, E.ServiceUnavailable]
    }).annotate(Access, requires("read")),
    HttpApiEndpoint.get("get", "/messages/:id", { params: IdParams, query: GetMessageQuery, success: MessageDetail, error: E.NotFound })
      .annotate(Access, requires("read")),
    HttpApiEndpoint.get("raw", "/messages/:id/raw", {
      params: IdParams,
      success: Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: "message/rfc822" })),
      error: E.NotFound
    }).annotate(Access, requires("read")),
    HttpApiEndpoint.patch("updateState", "/messages/:id", {
      params: IdParams,
      payload: UpdateMessageState,
      success: MessageState,
      error: [E.NotFound, E.Conflict, E.ValidationFailed]
    }).annotate(Access, requires("read")),
    HttpApiEndpoint.post("bulk", "/messages/bulk", {
      payload: BulkMessageInput,
      success: BulkMessageResult,
      error: [E.NotFound, E.Conflict, E.ValidationFailed]
    }).annotate(Access, requires("session")),
    HttpApiEndpoint.post("emptyTrash", "/messages/trash/empty", {
      query: EmptyTrashQuery,
      success: EmptyTrashResult,
      error: [E.NotFound, E.ValidationFailed]
    }).annotate(Access, requires("delete")),
    HttpApiEndpoint.delete("remove", "/messages/:id", {
      params: IdParams,
      query: DeleteMessageQuery,
      success: HttpApiSchema.NoContent,
      error: [E.NotFound, E.ValidationFailed]
    }).annotate(Access, requires("delete")),
    HttpApiEndpoint.post("restore", "/messages/:id/restore", {
      params: IdParams,
      success: HttpApiSchema.NoContent,
      error: E.NotFound
    }).annotate(Access, requires("delete")),
    HttpApiEndpoint.get("html", "/messages/:id/html", {
      params: IdParams,
      query: MessageHtmlQuery,
      success: Schema.String.pipe(HttpApiSchema.asText({ contentType: "text/html" })),
      error: [E.NotFound, E.ValidationFailed]
    }).annotate(Access, requires("read")),
    HttpApiEndpoint.put("remoteImagePreference", "/messages/:id/remote-images/preference", {
      params: IdParams,
      payload: RemoteImagePreferenceInput,
      success: RemoteImagePreference,
      error: [E.NotFound, E.ValidationFailed]
    }).annotate(Access, requires("session")),
    HttpApiEndpoint.get("attachment", "/messages/:messageId/attachments/:attachmentId", {
      params: AttachmentParams,
      query: AttachmentQuery,
      success: Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: "application/octet-stream" })),
      error: [E.NotFound, E.Conflict, E.ValidationFailed]
    }).annotate(Access, requires("read")),
    HttpApiEndpoint.get("attachmentPreview", "/messages/:messageId/attachments/:attachmentId/preview", {
      params: AttachmentParams,
      success: Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: "application/octet-stream" })),
      error: E.NotFound
    }).annotate(Access, requires("read"))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Messages" }))
{}
