/** The rules of browser push subscriptions (spec 2.20, 4.1, 7). */
import { Schema } from "effect"

/** No subscription of the account has this id. */
export class PushSubscriptionNotFound extends Schema.TaggedError<PushSubscriptionNotFound>()("PushSubscriptionNotFound", {
  subscriptionId: Schema.Int
}) {}

/** The account has a subscription with this endpoint already. */
export class PushSubscriptionExists extends Schema.TaggedError<PushSubscriptionExists>()("PushSubscriptionExists", {}) {}

/** Where a push may not go, or keys a push cannot be encrypted for: `field` and its reason. */
export class PushSubscriptionRefused extends Schema.TaggedError<PushSubscriptionRefused>()("PushSubscriptionRefused", {
  field: Schema.String,
  reason: Schema.String
}) {}

/** A test push refused by an allowance: the account's, the source address's, or outstanding tests. */
export class PushTestLimited extends Schema.TaggedError<PushTestLimited>()("PushTestLimited", {
  allowance: Schema.Literals(["account", "address", "outstanding"]),
  retryAfter: Schema.Int
}) {}

/** The test push could not be queued (the queue's database refused it). */
export class PushQueueUnavailable extends Schema.TaggedError<PushQueueUnavailable>()("PushQueueUnavailable", {}) {}

export type PushError = PushSubscriptionNotFound | PushSubscriptionExists | PushSubscriptionRefused | PushTestLimited | PushQueueUnavailable
