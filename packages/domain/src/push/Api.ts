/**
 * Spec 4.1 (push endpoints) and decisions.md "Browser push": the push group, browser session
 * only. GET /push/settings is in the account group, beside the bootstrap that carries it too.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Access, Authentication, IdParams, requires } from "../auth/Access.ts"
import { Alias } from "../aliases/Alias.ts"
import { Errors as E } from "../platform/Problem.ts"
import { CreatePushSubscription, PushEnabledInput, PushSettings, PushSubscription, PushTestQueued } from "./Push.ts"

export class PushGroup extends HttpApiGroup.make("push")
  .add(
    HttpApiEndpoint.put("setEnabled", "/push/settings", {
      payload: PushEnabledInput,
      success: PushSettings,
      error: E.ValidationFailed
    }).annotate(Access, requires("session")),
    HttpApiEndpoint.delete("dismissNudge", "/push/nudge", { success: PushSettings, error: E.NotFound })
      .annotate(Access, requires("session")),
    HttpApiEndpoint.post("subscribe", "/push/subscriptions", {
      payload: CreatePushSubscription,
      success: PushSubscription.pipe(HttpApiSchema.status(201)),
      error: [E.Conflict, E.ValidationFailed]
    }).annotate(Access, requires("session")),
    HttpApiEndpoint.delete("unsubscribe", "/push/subscriptions/:id", {
      params: IdParams,
      success: HttpApiSchema.NoContent,
      error: E.NotFound
    }).annotate(Access, requires("session")),
    HttpApiEndpoint.post("test", "/push/subscriptions/:id/test", {
      params: IdParams,
      success: PushTestQueued.pipe(HttpApiSchema.status(202)),
      error: [E.NotFound, E.RateLimited, E.ServiceUnavailable]
    }).annotate(Access, requires("session")),
    HttpApiEndpoint.put("aliasPreference", "/push/aliases/:id", {
      params: IdParams,
      payload: PushEnabledInput,
      success: Alias,
      error: [E.NotFound, E.ValidationFailed]
    }).annotate(Access, requires("session"))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Push" }))
{}
