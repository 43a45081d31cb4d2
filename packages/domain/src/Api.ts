import { Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Access, Authentication, IdParams, requires, ValidationErrors } from "./auth/Access.ts"
import { Account, Credentials, DensityInput, LoginCredentials, MailboxDensity, StorageUsage } from "./accounts/Account.ts"
import {
  Alias,
  AliasTimer,
  CandidateRelease,
  CandidateReservation,
  ClaimAlias,
  ListAliasesQuery,
  ReleaseCandidates,
  ReserveCandidates,
  SetTimer,
  UpdateAlias
} from "./aliases/Alias.ts"
import { ApiToken, CreatedToken, CreateToken } from "./tokens/ApiToken.ts"
import { Bootstrap } from "./accounts/Bootstrap.ts"
import { IdFromPath } from "./platform/Common.ts"
import { MailDomain } from "./domains/MailDomain.ts"
import {
  AttachmentParams,
  AttachmentQuery,
  BulkMessageInput,
  BulkMessageResult,
  DeleteMessageQuery,
  EmptyTrashQuery,
  EmptyTrashResult,
  InjectedTestMessage,
  ListMessagesQuery,
  MessageDetail,
  MessageHtmlQuery,
  MessagePage,
  MessageState,
  RemoteImagePreference,
  RemoteImagePreferenceInput,
  TestMessageInput,
  UpdateMessageState
} from "./messages/Message.ts"
import { Errors } from "./platform/Problem.ts"
import { PushSettings } from "./push/Push.ts"
import { CreateTag, Tag, TagWithCount, UpdateTag } from "./tags/Tag.ts"
import { NoticesGroup } from "./notices/NoticesApi.ts"
import { WebhooksGroup } from "./webhooks/WebhooksApi.ts"

const E = Errors

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

export class AccountGroup extends HttpApiGroup.make("account")
  .add(
    HttpApiEndpoint.get("bootstrap", "/bootstrap", { success: Bootstrap }).annotate(Access, requires("read")),
    HttpApiEndpoint.get("me", "/me", { success: Account }).annotate(Access, requires("read")),
    HttpApiEndpoint.get("storage", "/storage", { success: StorageUsage }).annotate(Access, requires("read")),
    HttpApiEndpoint.get("domains", "/domains", { success: Schema.Struct({ items: Schema.Array(MailDomain) }) })
      .annotate(Access, requires("read")),
    HttpApiEndpoint.put("density", "/mailbox/density", {
      payload: DensityInput,
      success: Schema.Struct({ density: MailboxDensity }),
      error: E.ValidationFailed
    }).annotate(Access, requires("session")),
    HttpApiEndpoint.get("pushSettings", "/push/settings", { success: PushSettings }).annotate(Access, requires("session"))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Account" }))
{}

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

export class AliasesGroup extends HttpApiGroup.make("aliases")
  .add(
    HttpApiEndpoint.get("list", "/aliases", {
      query: ListAliasesQuery,
      success: Schema.Struct({ items: Schema.Array(Alias) })
    }).annotate(Access, requires("read")),
    HttpApiEndpoint.post("claim", "/aliases", {
      payload: ClaimAlias,
      success: Alias.pipe(HttpApiSchema.status(201)),
      error: [E.Forbidden, E.Conflict, E.ValidationFailed, E.RateLimited]
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.post("reserve", "/aliases/candidates", {
      payload: ReserveCandidates,
      success: CandidateReservation,
      error: [E.Forbidden, E.NotFound, E.Conflict, E.ValidationFailed, E.RateLimited]
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.delete("releaseCandidates", "/aliases/candidates", {
      payload: [ReleaseCandidates, Schema.Null],
      success: CandidateRelease,
      error: E.ValidationFailed
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.post("releaseCandidatesPost", "/aliases/candidates/release", {
      payload: [ReleaseCandidates, Schema.Null],
      success: CandidateRelease,
      error: E.ValidationFailed
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.patch("update", "/aliases/:id", {
      params: IdParams,
      payload: UpdateAlias,
      success: Alias,
      error: [E.NotFound, E.Conflict, E.ValidationFailed]
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.delete("remove", "/aliases/:id", { params: IdParams, success: Alias, error: [E.NotFound, E.Conflict] })
      .annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.post("pause", "/aliases/:id/pause", { params: IdParams, success: Alias, error: [E.NotFound, E.Conflict] })
      .annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.post("resume", "/aliases/:id/resume", { params: IdParams, success: Alias, error: [E.NotFound, E.Conflict] })
      .annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.post("burn", "/aliases/:id/burn", { params: IdParams, success: Alias, error: [E.NotFound, E.Conflict] })
      .annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.put("setTimer", "/aliases/:id/timer", {
      params: IdParams,
      payload: SetTimer,
      success: AliasTimer,
      error: [E.NotFound, E.Forbidden, E.Conflict, E.ValidationFailed]
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.delete("clearTimer", "/aliases/:id/timer", {
      params: IdParams,
      success: AliasTimer,
      error: [E.NotFound, E.Conflict]
    }).annotate(Access, requires("manage-aliases"))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Aliases" }))
{}

export class MessagesGroup extends HttpApiGroup.make("messages")
  .add(
    HttpApiEndpoint.get("list", "/messages", {
      query: ListMessagesQuery,
      success: MessagePage,
      error: [E.ValidationFailed, E.ServiceUnavailable]
    }).annotate(Access, requires("read")),
    HttpApiEndpoint.get("get", "/messages/:id", { params: IdParams, success: MessageDetail, error: E.NotFound })
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

/** The whole contract, served under {base_url} = {site_url}/api/v1. */
export class BurnboxApi extends HttpApi.make("burnbox")
  .add(AuthGroup)
  .add(TokensGroup)
  .add(AccountGroup)
  .add(TagsGroup)
  .add(AliasesGroup)
  .add(MessagesGroup)
  .add(TestMailGroup)
  .add(WebhooksGroup)
  .add(NoticesGroup)
  .middleware(ValidationErrors)
  .prefix("/api/v1")
  .annotate(HttpApi.PayloadParseOptions, { onExcessProperty: "error", errors: "all" })
  .annotate(HttpApi.QueryParseOptions, { errors: "all" })
  .annotateMerge(OpenApi.annotations({
    title: "burnbox API",
    version: "2026-08-31",
    description: "Receive-only disposable email with an automation API."
  }))
{}
