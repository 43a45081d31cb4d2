/** Spec 4.9: the webhooks group (scope `webhooks`). */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Access, Authentication, IdParams, requires } from "../auth/Access.ts"
import { Errors as E } from "../platform/Problem.ts"
import {
  CreateWebhook,
  DeliveriesQuery,
  UpdateWebhook,
  Webhook,
  WebhookDeliveryPage,
  WebhookDeliveryQueued,
  WebhookList,
  WebhookWithSecret
} from "./Webhook.ts"

export class WebhooksGroup extends HttpApiGroup.make("webhooks")
  .add(
    HttpApiEndpoint.get("list", "/webhooks", { success: WebhookList }),
    HttpApiEndpoint.post("create", "/webhooks", {
      payload: CreateWebhook,
      success: WebhookWithSecret.pipe(HttpApiSchema.status(201)),
      error: [E.Forbidden, E.Conflict, E.ValidationFailed]
    }),
    HttpApiEndpoint.get("allDeliveries", "/webhooks/deliveries", {
      query: DeliveriesQuery,
      success: WebhookDeliveryPage,
      error: E.ValidationFailed
    }),
    HttpApiEndpoint.post("redeliver", "/webhooks/deliveries/:id/redeliver", {
      params: IdParams,
      success: WebhookDeliveryQueued.pipe(HttpApiSchema.status(202)),
      error: [E.NotFound, E.Conflict, E.Gone]
    }),
    HttpApiEndpoint.patch("update", "/webhooks/:id", {
      params: IdParams,
      payload: UpdateWebhook,
      success: Webhook,
      error: [E.NotFound, E.ValidationFailed]
    }),
    HttpApiEndpoint.delete("remove", "/webhooks/:id", { params: IdParams, success: HttpApiSchema.NoContent, error: E.NotFound }),
    HttpApiEndpoint.post("rotateSecret", "/webhooks/:id/rotate-secret", {
      params: IdParams,
      success: WebhookWithSecret,
      error: E.NotFound
    }),
    HttpApiEndpoint.get("deliveries", "/webhooks/:id/deliveries", {
      params: IdParams,
      query: DeliveriesQuery,
      success: WebhookDeliveryPage,
      error: [E.NotFound, E.ValidationFailed]
    }),
    HttpApiEndpoint.post("test", "/webhooks/:id/test", {
      params: IdParams,
      success: WebhookDeliveryQueued.pipe(HttpApiSchema.status(202)),
      error: [E.NotFound, E.Conflict]
    })
  )
  .annotate(Access, requires("webhooks"))
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Webhooks" }))
{}
