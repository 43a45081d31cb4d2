/**
 * Spec 4.4 and decisions.md "Sharing a mailbox": the sharing group. The owner invites, lists,
 * changes and ends the shares of a mailbox; the invited account lists its invitations and
 * accepts or declines them; a guest leaves; each side reads what it may oversee.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Access, Authentication, IdParams, requires } from "../auth/Access.ts"
import { Errors as E } from "../platform/Problem.ts"
import { CreateShare, RevokedShareGrant, Share, ShareGrant, ShareGrantParams, ShareInvitation, ShareParams, UpdateShare } from "./Share.ts"

export class SharingGroup extends HttpApiGroup.make("sharing")
  .add(
    HttpApiEndpoint.post("invite", "/aliases/:id/shares", {
      params: IdParams,
      payload: CreateShare,
      success: Share.pipe(HttpApiSchema.status(201)),
      error: [E.NotFound, E.Conflict, E.Forbidden, E.ValidationFailed]
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.get("list", "/aliases/:id/shares", {
      params: IdParams,
      success: Schema.Struct({ items: Schema.Array(Share) }),
      error: E.NotFound
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.patch("update", "/aliases/:id/shares/:shareId", {
      params: ShareParams,
      payload: UpdateShare,
      success: Share,
      error: [E.NotFound, E.ValidationFailed]
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.delete("end", "/aliases/:id/shares/:shareId", {
      params: ShareParams,
      success: HttpApiSchema.NoContent,
      error: E.NotFound
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.get("invitations", "/shares/invitations", {
      success: Schema.Struct({ items: Schema.Array(ShareInvitation) })
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.post("accept", "/shares/invitations/:id/accept", {
      params: IdParams,
      success: HttpApiSchema.NoContent,
      error: E.NotFound
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.post("decline", "/shares/invitations/:id/decline", {
      params: IdParams,
      success: HttpApiSchema.NoContent,
      error: E.NotFound
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.delete("leave", "/aliases/:id/share", {
      params: IdParams,
      success: HttpApiSchema.NoContent,
      error: E.NotFound
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.get("grants", "/aliases/:id/share-grants", {
      params: IdParams,
      success: Schema.Struct({ items: Schema.Array(ShareGrant) }),
      error: E.NotFound
    }).annotate(Access, requires("read")),
    HttpApiEndpoint.post("acknowledgeGrants", "/aliases/:id/share-grants/acknowledge", {
      params: IdParams,
      success: HttpApiSchema.NoContent,
      error: E.NotFound
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.delete("revokeGrant", "/aliases/:id/share-grants/:kind/:subjectId", {
      params: ShareGrantParams,
      success: HttpApiSchema.NoContent,
      error: E.NotFound
    }).annotate(Access, requires("manage-aliases")),
    HttpApiEndpoint.get("revoked", "/share-grants/revoked", {
      success: Schema.Struct({ items: Schema.Array(RevokedShareGrant) })
    }).annotate(Access, requires("read"))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Sharing" }))
{}
