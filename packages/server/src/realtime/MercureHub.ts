/**
 * The Mercure hub (decisions.md "Realtime", issue #32): `GET {site_url}/.well-known/mercure`
 * speaks the Mercure subscriber protocol: Server-Sent Events for the `topic` query parameters,
 * resumption from `Last-Event-ID` (header, or the `lastEventID` query parameter) out of the
 * process's bounded history (Realtime.HistorySize), and a heartbeat comment every
 * HeartbeatSeconds. A browser session's cookie authorizes exactly its own topic
 * `{site_url}/accounts/{id}`; any other topic is refused (403). Each update names what changed
 * (type and ids), never a body: the page reads the API again.
 *
 * A guest's topic also hears the mail and alias updates of the mailboxes shared with it; a
 * share starting or stopping for it ends the stream after that update, so the browser's
 * EventSource reconnects (with its last id) and the new connection reads the mailboxes again.
 * With BURNBOX_MERCURE_URL an external hub serves browsers instead (MercurePublisher).
 */
import { problemBody, problemResponse, SessionCookie } from "@burnbox/domain"
import { BurnboxConfig, type HeardUpdate, MailboxAccess, Realtime, Sessions, type Update } from "@burnbox/store"
import { Deferred, Effect, Layer, Redacted, Stream } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"

export const HubPath = "/.well-known/mercure"

/** How often an idle stream carries a comment, so proxies and browsers keep it open. */
export const HeartbeatSeconds = 25

/** The topic of an account's updates. */
export const accountTopic = (siteUrl: string, accountId: number) => `${siteUrl}/accounts/${accountId}`

/** The update types after which a guest's stream ends (what it may read changed). */
const reach = new Set<Update["type"]>(["share.started", "share.stopped"])
/** Updates a guest's topic hears from a mailbox's owner (never another reader's own state). */
const ownersUpdates = new Set<Update["type"]>(["message.processed", "message.failed", "alias.claimed", "alias.paused", "alias.resumed", "alias.burned"])

/** One SSE event: its id line (when it has one) and its JSON data on one line. */
const sseEvent = (id: string | undefined, data: object) => `${id === undefined ? "" : `id: ${id}\n`}data: ${JSON.stringify(data)}\n\n`

const refuse = (status: number, code: string, message: string, headers: Record<string, string> = {}) =>
  problemResponse(status, problemBody({ code, message })).pipe(HttpServerResponse.setHeaders(headers))

export const MercureHubRoutes = Layer.unwrap(Effect.gen(function*() {
  const config = yield* BurnboxConfig
  const sessions = yield* Sessions
  const realtime = yield* Realtime
  const access = yield* MailboxAccess
  // At shutdown every stream ends (the server's close would otherwise wait for them).
  const closing = yield* Deferred.make<void>()
  yield* Effect.addFinalizer(() => Deferred.succeed(closing, undefined))

  // Each update is formatted once for all the subscribers of a topic (the same object reaches
  // each of them), not once per subscriber.
  const texts = new WeakMap<Update, { readonly topic: string; readonly text: string }>()
  const formatted = (topic: string, update: Update) => {
    const kept = texts.get(update)
    if (kept?.topic === topic) return kept.text
    const text = sseEvent(update.id, {
      topic,
      type: update.type,
      ...(update.aliasId === undefined ? {} : { aliasId: update.aliasId }),
      ...(update.messageId === undefined ? {} : { messageId: update.messageId }),
      ...(update.messageIds === undefined ? {} : { messageIds: update.messageIds })
    })
    texts.set(update, { topic, text })
    return text
  }

  const subscribe = (request: HttpServerRequest.HttpServerRequest) => Effect.gen(function*() {
    const cookie = request.cookies[SessionCookie]
    const session = cookie === undefined || cookie === "" ? undefined : yield* sessions.resolve(Redacted.make(cookie))
    if (session === undefined) {
      return refuse(401, "authentication_required", "Sign in: the hub authorizes a browser session's own topic.", { "www-authenticate": `Bearer realm="burnbox"` })
    }
    const url = new URL(request.url, config.siteUrl)
    const topics = url.searchParams.getAll("topic")
    if (topics.length === 0) return refuse(400, "topic_required", "Name at least one topic: ?topic={site_url}/accounts/{id}.")
    const own = accountTopic(config.siteUrl, session.accountId)
    if (topics.some((topic) => topic !== own)) return refuse(403, "topic_forbidden", "A session may subscribe to its own account's topic only.")
    const accountId = session.accountId
    const lastEventId = request.headers["last-event-id"] ?? url.searchParams.get("lastEventID") ?? undefined
    const shared = new Set((yield* access.shared(accountId)).map((mailbox) => mailbox.aliasId))
    const wants = (update: Update) =>
      update.accountId === accountId || (ownersUpdates.has(update.type) && update.aliasId !== undefined && shared.has(update.aliasId))
    const latest = yield* realtime.lastEventId
    const accounts = yield* access.accountsReadBy(accountId)

    // What the queue holds when the stream pulls (every update delivered since its last pull) is
    // one batch and one write: under load, a subscriber's events coalesce instead of costing a
    // socket write (and a pass through the stream) each. A batch ends at the first update after
    // which a guest's stream ends.
    const ends = (heard: HeardUpdate) => !("missed" in heard) && heard.accountId === accountId && reach.has(heard.type)
    const updates = Stream.unwrap(Effect.map(
      realtime.updates(accounts, wants, lastEventId === "" ? undefined : lastEventId),
      (queue) => Stream.fromQueue(queue)
    )).pipe(
      Stream.mapArray((heard) => {
        const last = heard.findIndex(ends)
        return [last === -1 ? { heard, ends: false } : { heard: heard.slice(0, last + 1), ends: true }] as const
      }),
      Stream.takeUntil((batch) => batch.ends),
      Stream.mapEffect(({ heard }) =>
        Effect.map(realtime.lastEventId, (latestId) =>
          heard.map((update) => "missed" in update ? sseEvent(latestId, { topic: own, type: "events.missed" }) : formatted(own, update)).join(""))
      )
    )
    // The first heartbeat goes at once: the browser knows the subscription holds.
    const heartbeats = Stream.tick(`${HeartbeatSeconds} seconds`).pipe(Stream.map(() => ":\n\n"))
    const body = Stream.merge(updates, heartbeats, { haltStrategy: "left" }).pipe(
      Stream.interruptWhen(Deferred.await(closing)),
      Stream.encodeText
    )
    return HttpServerResponse.stream(body, {
      contentType: "text/event-stream",
      headers: {
        "cache-control": "no-cache, no-store",
        "x-accel-buffering": "no",
        ...(latest === undefined ? {} : { "last-event-id": latest })
      }
    })
  })
  return HttpRouter.add<never, never>("GET", HubPath, subscribe)
}))
