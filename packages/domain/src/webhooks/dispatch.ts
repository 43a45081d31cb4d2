/**
 * Dispatch (spec 6.2, 6.3; decisions.md "Webhook subscriptions"): which endpoints an outbox
 * event goes to, and the exact bytes each one is sent. Pure: the store reads the rows these
 * functions ask for and writes what `deliveriesFor` answers, in one transaction.
 *
 * A batch is dispatched in four steps, each read done once for the whole batch:
 * 1. `messagesToTag`: the messages whose tags selection needs (none unless an endpoint selects by tag);
 * 2. `selectEndpoints`: each event's endpoints (active ones of its account, registered by the event's time);
 * 3. `messagesToText`: the messages whose text body a selected endpoint asked for (`message.received` only);
 * 4. `deliveriesFor`: one delivery per (event, selected endpoint), with its payload.
 */
import type { EventType } from "./Events.ts"
import { smallCheckedHtml } from "../mail/limits.ts"
import { messageText } from "../mail/sanitize.ts"
import { envelopeBytes, payloadTextBody, selectsEvent, type WebhookSubscription } from "./Webhook.ts"

/** An event of the outbox, as dispatch reads it. */
export interface OutboxEvent {
  readonly id: string
  readonly accountId: number
  readonly aliasId: number | null
  readonly type: EventType
  readonly time: Date
  readonly data: Readonly<Record<string, unknown>>
}

/** An active endpoint, as dispatch reads it. */
export interface DispatchEndpoint {
  readonly id: number
  readonly accountId: number
  readonly subscription: WebhookSubscription
  readonly includeTextBody: boolean
  readonly includeMessageRestored: boolean
  readonly createdAt: Date
}

/** A tag a reader (`accountId`) put on a message. */
export interface MessageTag {
  readonly messageId: number
  readonly accountId: number
  readonly tagId: number
}

/** The stored bodies a message's text is made from. */
export interface MessageBodies {
  readonly id: number
  /** The `text_body` the pipeline made (MessageAnalysis.webhookTextBody); none in rows stored before it did. */
  readonly webhookTextBody?: string | null
  readonly textBody: string | null
  /** Read only without `webhookTextBody`, and only when small (the store may leave a larger one out). */
  readonly htmlOriginal: string | null
}

/**
 * A message's `text_body`: the one the pipeline made in its thread. Rows stored before it made
 * one have their text part, or the text of their HTML when it is small enough to read here,
 * on the main thread (smallCheckedHtml); a larger HTML gives nothing.
 */
const textBodyOf = (message: MessageBodies): string => {
  const made = message.webhookTextBody ?? null
  if (made !== null) return made
  const html = message.htmlOriginal === null ? undefined : smallCheckedHtml(message.htmlOriginal)
  return payloadTextBody(messageText(message.textBody, html ?? null))
}

/** An event and the endpoints it goes to (possibly none). */
export interface EventSelection {
  readonly event: OutboxEvent
  readonly messageId: number | null
  readonly endpoints: ReadonlyArray<DispatchEndpoint>
}

/** A delivery to write: due at the event's time, holding the exact body bytes every attempt sends. */
export interface NewDelivery {
  readonly webhookId: number
  readonly accountId: number
  readonly eventId: string
  readonly eventType: EventType
  readonly payload: Uint8Array
  readonly time: Date
}

/** The message an event is about, if any. */
export const eventMessageId = (event: OutboxEvent): number | null => {
  const id = event.data["message_id"]
  return typeof id === "number" ? id : null
}

/**
 * The events dispatch turns into deliveries, in outbox order (time, then id). `webhook.test`
 * events are left out: their one delivery is queued with the event.
 */
export const dispatchable = (events: ReadonlyArray<OutboxEvent>): ReadonlyArray<OutboxEvent> =>
  [...events]
    .sort((a, b) => a.time.getTime() - b.time.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .filter((event) => event.type !== "webhook.test")

/** The accounts whose endpoints a batch needs, each once. */
export const eventAccounts = (events: ReadonlyArray<OutboxEvent>): ReadonlyArray<number> => [...new Set(events.map((e) => e.accountId))]

const byAccount = (endpoints: ReadonlyArray<DispatchEndpoint>): ReadonlyMap<number, ReadonlyArray<DispatchEndpoint>> => {
  const map = new Map<number, Array<DispatchEndpoint>>()
  for (const endpoint of endpoints) {
    const list = map.get(endpoint.accountId)
    if (list === undefined) map.set(endpoint.accountId, [endpoint])
    else list.push(endpoint)
  }
  return map
}

const uniqueMessageIds = (events: ReadonlyArray<OutboxEvent>): ReadonlyArray<number> =>
  [...new Set(events.flatMap((event) => {
    const id = eventMessageId(event)
    return id === null ? [] : [id]
  }))]

/**
 * Step 1: the messages whose tags are needed: every message of the events that have endpoints,
 * when one of those endpoints selects by tag; none otherwise.
 */
export const messagesToTag = (events: ReadonlyArray<OutboxEvent>, endpoints: ReadonlyArray<DispatchEndpoint>): ReadonlyArray<number> => {
  const endpointsOf = byAccount(endpoints)
  const relevant = events.filter((event) => endpointsOf.has(event.accountId))
  const byTag = relevant.some((event) => endpointsOf.get(event.accountId)!.some((endpoint) => endpoint.subscription.mode === "tag"))
  return byTag ? uniqueMessageIds(relevant) : []
}

/**
 * Step 2: for each event of an account with endpoints, the endpoints that select it: registered
 * at or before the event's time, and subscribed to it (with the tags its account's reader put on
 * its message).
 */
export const selectEndpoints = (
  events: ReadonlyArray<OutboxEvent>,
  endpoints: ReadonlyArray<DispatchEndpoint>,
  tags: ReadonlyArray<MessageTag>
): ReadonlyArray<EventSelection> => {
  const endpointsOf = byAccount(endpoints)
  const tagsOf = new Map<string, Array<number>>()
  for (const tag of tags) {
    const key = `${tag.messageId}:${tag.accountId}`
    const list = tagsOf.get(key)
    if (list === undefined) tagsOf.set(key, [tag.tagId])
    else list.push(tag.tagId)
  }
  return events.filter((event) => endpointsOf.has(event.accountId)).map((event) => {
    const messageId = eventMessageId(event)
    const alias = event.data["alias"] as { label?: unknown } | undefined
    const selected = (endpointsOf.get(event.accountId) ?? []).filter((endpoint) =>
      endpoint.createdAt <= event.time &&
      selectsEvent(
        { subscription: endpoint.subscription, includeMessageRestored: endpoint.includeMessageRestored },
        {
          type: event.type,
          aliasId: event.aliasId,
          aliasLabel: typeof alias?.label === "string" ? alias.label : null,
          messageTagIds: messageId === null ? [] : tagsOf.get(`${messageId}:${event.accountId}`) ?? []
        }
      )
    )
    return { event, messageId, endpoints: selected }
  })
}

/** Step 3: the messages whose text body goes into a payload (a `message.received` event with an endpoint that asked). */
export const messagesToText = (selections: ReadonlyArray<EventSelection>): ReadonlyArray<number> =>
  [...new Set(selections.flatMap(({ endpoints, event, messageId }) =>
    messageId !== null && event.type === "message.received" && endpoints.some((e) => e.includeTextBody) ? [messageId] : []
  ))]

/**
 * Step 4: one delivery per (event, selected endpoint), in event order. Every endpoint of an
 * event gets the same envelope bytes; those that asked for it get the envelope with the
 * message's `text_body` (empty when the message is gone).
 */
export const deliveriesFor = (
  selections: ReadonlyArray<EventSelection>,
  bodies: ReadonlyArray<MessageBodies>
): ReadonlyArray<NewDelivery> => {
  const texts = new Map<number, string>()
  for (const message of bodies) texts.set(message.id, textBodyOf(message))
  const deliveries: Array<NewDelivery> = []
  for (const { endpoints, event, messageId } of selections) {
    if (endpoints.length === 0) continue
    const plain = envelopeBytes(event)
    let withText: Uint8Array | undefined
    for (const endpoint of endpoints) {
      let payload = plain
      if (endpoint.includeTextBody && event.type === "message.received" && messageId !== null) {
        withText ??= envelopeBytes({ ...event, data: { ...event.data, text_body: texts.get(messageId) ?? payloadTextBody("") } })
        payload = withText
      }
      deliveries.push({
        webhookId: endpoint.id,
        accountId: event.accountId,
        eventId: event.id,
        eventType: event.type,
        payload,
        time: event.time
      })
    }
  }
  return deliveries
}
