/** The rules of webhook endpoints and their deliveries (spec 2.21, 3.3, 4.9, 6.5). */
import { Schema } from "effect"
import { WebhookStatus } from "./Webhook.ts"

/** No live endpoint of the account has this id. */
export class WebhookNotFound extends Schema.TaggedError<WebhookNotFound>()("WebhookNotFound", {
  webhookId: Schema.Int
}) {}

/** Where an endpoint may not lead: `reason` is the URL rule or address check that refused it. */
export class WebhookUrlRefused extends Schema.TaggedError<WebhookUrlRefused>()("WebhookUrlRefused", {
  reason: Schema.String
}) {}

/** The plan's number of endpoints is reached; one must be deleted first. */
export class WebhookLimitReached extends Schema.TaggedError<WebhookLimitReached>()("WebhookLimitReached", {
  limit: Schema.Int
}) {}

/** What only an active endpoint gets: a test event or a redelivery. */
export const ActiveEndpointRequest = Schema.Literals(["test", "redelivery"])
export type ActiveEndpointRequest = typeof ActiveEndpointRequest.Type

/** Tests and redeliveries go only to an active endpoint. */
export class WebhookInactive extends Schema.TaggedError<WebhookInactive>()("WebhookInactive", {
  webhookId: Schema.Int,
  status: WebhookStatus,
  refused: ActiveEndpointRequest
}) {}

/** No delivery of the account's live endpoints has this id. */
export class DeliveryNotFound extends Schema.TaggedError<DeliveryNotFound>()("DeliveryNotFound", {
  deliveryId: Schema.Int
}) {}

/** A delivery's payload is kept for the retention window only; after it, there is nothing to redeliver. */
export class DeliveryPayloadExpired extends Schema.TaggedError<DeliveryPayloadExpired>()("DeliveryPayloadExpired", {
  deliveryId: Schema.Int
}) {}

/** A delivery being attempted right now cannot be redelivered. */
export class DeliveryInProgress extends Schema.TaggedError<DeliveryInProgress>()("DeliveryInProgress", {
  deliveryId: Schema.Int
}) {}

export type WebhookError =
  | WebhookNotFound
  | WebhookUrlRefused
  | WebhookLimitReached
  | WebhookInactive
  | DeliveryNotFound
  | DeliveryPayloadExpired
  | DeliveryInProgress
