/**
 * Dispatch (spec 6.2, 6.3; decisions.md "Webhook subscriptions"): which endpoints an outbox
 * event goes to, and the exact bytes each one is sent. Pure: the store reads the rows these
 * functions ask for and writes what `deliveriesFor` answers, in one transaction.
 *
 * A batch is dispatched in four steps, each read done once for the whole batch:
 * 1. `messagesToTag`: the messages whose tags selection needs (none unless an endpoint selects by tag);
 * 2. `selectEndpoints`: each event's endpoints (active ones of its account, registered by the event's time),
 *    and on a shared mailbox its live guests' endpoints, selected on the guest's view (spec 6.5 rule 6);
 * 3. `messagesToText`: the messages whose text body a selected endpoint asked for (`message.received` only);
 * 4. `deliveriesFor`: one delivery per (event, selected endpoint), with its payload.
 */
import type { EventType } from "./Events.ts"
import { smallCheckedHtml } from "../mail/limits.ts"
import { messageText, textPartPayload } from "../mail/sanitize.ts"
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
  /** The endpoint's URL: a revoked guest endpoint is recognised by it when registered again. */
  readonly url?: string
}

/** A live guest of a shared mailbox, as dispatch reads it, with the owner's handle its envelopes name. */
export interface MailboxGuest {
  readonly aliasId: number
  readonly guestId: number
  readonly ownerHandle: string
}

/**
 * A guest endpoint the owner revoked on a mailbox (ShareGrant): it receives nothing of that
 * mailbox again, nor does another endpoint of the same guest at the same URL.
 */
export interface RevokedEndpoint {
  readonly aliasId: number
  readonly guestId: number
  readonly webhookId: number
  readonly url: string
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
 * A message's `text_body`: the one the pipeline made in its thread from the HTML, else the one
 * its text part makes (the pipeline stores none then: `textPartPayload`). Rows stored before the
 * pipeline made one and without a text part have the text of their HTML when it is small enough
 * to read here, on the main thread (smallCheckedHtml); a larger HTML gives nothing.
 */
const textBodyOf = (message: MessageBodies): string => {
  const made = message.webhookTextBody ?? textPartPayload(message.textBody)
  if (made !== null) return made
  const html = message.htmlOriginal === null ? undefined : smallCheckedHtml(message.htmlOriginal)
  return payloadTextBody(messageText(message.textBody, html ?? null))
}

/** An event and the endpoints it goes to (possibly none). */
export interface EventSelection {
  readonly event: OutboxEvent
  readonly messageId: number | null
  readonly endpoints: ReadonlyArray<DispatchEndpoint>
  /** Guests' endpoints the event of a shared mailbox goes to, with the owner's handle. */
  readonly guestEndpoints?: ReadonlyArray<{ readonly endpoint: DispatchEndpoint; readonly ownerHandle: string }>
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
export const messagesToTag = (
  events: ReadonlyArray<OutboxEvent>,
  endpoints: ReadonlyArray<DispatchEndpoint>,
  guests: ReadonlyArray<MailboxGuest> = []
): ReadonlyArray<number> => {
  const endpointsOf = byAccount(endpoints)
  const readersOf = (event: OutboxEvent) => [event.accountId, ...guests.filter((g) => g.aliasId === event.aliasId).map((g) => g.guestId)]
  const relevant = events.filter((event) => readersOf(event).some((reader) => endpointsOf.has(reader)))
  const byTag = relevant.some((event) =>
    readersOf(event).some((reader) => (endpointsOf.get(reader) ?? []).some((endpoint) => endpoint.subscription.mode === "tag"))
  )
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
  tags: ReadonlyArray<MessageTag>,
  guests: ReadonlyArray<MailboxGuest> = [],
  revoked: ReadonlyArray<RevokedEndpoint> = []
): ReadonlyArray<EventSelection> => {
  const endpointsOf = byAccount(endpoints)
  const tagsOf = new Map<string, Array<number>>()
  for (const tag of tags) {
    const key = `${tag.messageId}:${tag.accountId}`
    const list = tagsOf.get(key)
    if (list === undefined) tagsOf.set(key, [tag.tagId])
    else list.push(tag.tagId)
  }
  /** The endpoints of `reader` that select the event, as `reader` sees it (a guest sees no label). */
  const selecting = (event: OutboxEvent, messageId: number | null, reader: number, aliasLabel: string | null) =>
    (endpointsOf.get(reader) ?? []).filter((endpoint) =>
      endpoint.createdAt <= event.time &&
      selectsEvent(
        { subscription: endpoint.subscription, includeMessageRestored: endpoint.includeMessageRestored },
        {
          type: event.type,
          aliasId: event.aliasId,
          aliasLabel,
          messageTagIds: messageId === null ? [] : tagsOf.get(`${messageId}:${reader}`) ?? []
        }
      )
    )
  const isRevoked = (aliasId: number, guestId: number, endpoint: DispatchEndpoint) =>
    revoked.some((r) =>
      r.aliasId === aliasId && r.guestId === guestId && (r.webhookId === endpoint.id || (endpoint.url !== undefined && r.url === endpoint.url))
    )
  return events.flatMap((event) => {
    const messageId = eventMessageId(event)
    const alias = event.data["alias"] as { label?: unknown } | undefined
    // alias.expiring is about the owner's timer, which a guest never sees (spec 2.7).
    const readers = event.aliasId === null || event.type === "alias.expiring"
      ? []
      : guests.filter((g) => g.aliasId === event.aliasId && g.guestId !== event.accountId)
    if (!endpointsOf.has(event.accountId) && !readers.some((g) => endpointsOf.has(g.guestId))) return []
    const selected = selecting(event, messageId, event.accountId, typeof alias?.label === "string" ? alias.label : null)
    const guestEndpoints = readers.flatMap((guest) =>
      selecting(event, messageId, guest.guestId, null)
        .filter((endpoint) => !isRevoked(guest.aliasId, guest.guestId, endpoint))
        .map((endpoint) => ({ endpoint, ownerHandle: guest.ownerHandle }))
    )
    return [guestEndpoints.length === 0 ? { event, messageId, endpoints: selected } : { event, messageId, endpoints: selected, guestEndpoints }]
  })
}

/** An event's data as a guest's endpoint receives it: the owner's label never crosses the account boundary (spec 5, rule 7). */
const guestData = (data: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const alias = data["alias"]
  return typeof alias === "object" && alias !== null ? { ...data, alias: { ...alias, label: null } } : { ...data }
}

/** Step 3: the messages whose text body goes into a payload (a `message.received` event with an endpoint that asked). */
export const messagesToText = (selections: ReadonlyArray<EventSelection>): ReadonlyArray<number> =>
  [...new Set(selections.flatMap(({ endpoints, event, guestEndpoints = [], messageId }) =>
    messageId !== null && event.type === "message.received" &&
      (endpoints.some((e) => e.includeTextBody) || guestEndpoints.some((g) => g.endpoint.includeTextBody))
      ? [messageId]
      : []
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
  for (const { endpoints, event, guestEndpoints = [], messageId } of selections) {
    // A guest's endpoint: the envelope names the owner's handle, the data no owner label.
    for (const { endpoint, ownerHandle } of guestEndpoints) {
      const withText = endpoint.includeTextBody && event.type === "message.received" && messageId !== null
      const data = guestData(withText ? { ...event.data, text_body: texts.get(messageId) ?? payloadTextBody("") } : event.data)
      deliveries.push({
        webhookId: endpoint.id,
        accountId: endpoint.accountId,
        eventId: event.id,
        eventType: event.type,
        payload: envelopeBytes({ ...event, data }, { ownerHandle }),
        time: event.time
      })
    }
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
