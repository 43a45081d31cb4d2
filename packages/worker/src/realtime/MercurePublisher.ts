/**
 * With BURNBOX_MERCURE_URL (BurnboxConfig.externalHub), the worker POSTs every realtime update to that hub
 * (the Mercure publish protocol: a form with topic, data, id and private=on, under a publisher
 * JWT), on the account's topic `{site_url}/accounts/{id}`: the same updates the project's own
 * hub streams (server/realtime/MercureHub.ts), in the order heard. A failed POST is logged and
 * the update dropped: the browser reads again on its next reconnect. Without the setting it does
 * nothing.
 */
import { BurnboxConfig, publisherJwt, Realtime, type Update } from "@burnbox/store"
import { Effect, Layer, Option, Queue } from "effect"

/** The update as the hub's data: what changed and its ids, never a body (as MercureHub sends it). */
export const updateData = (topic: string, update: Update) => ({
  topic,
  type: update.type,
  ...(update.aliasId === undefined ? {} : { aliasId: update.aliasId }),
  ...(update.messageId === undefined ? {} : { messageId: update.messageId }),
  ...(update.messageIds === undefined ? {} : { messageIds: update.messageIds })
})

export const MercurePublisherLive = Layer.effectDiscard(Effect.gen(function*() {
  const config = yield* BurnboxConfig
  const hub = config.externalHub
  if (Option.isNone(hub)) return
  const realtime = yield* Realtime
  const authorization = `Bearer ${publisherJwt(hub.value.key)}`
  const updates = yield* realtime.everyUpdate
  const publish = (update: Update) =>
    Effect.tryPromise(async () => {
      const topic = `${config.siteUrl}/accounts/${update.accountId}`
      const body = new URLSearchParams({ topic, id: update.id, private: "on", data: JSON.stringify(updateData(topic, update)) })
      const response = await fetch(hub.value.url, { method: "POST", headers: { authorization }, body, signal: AbortSignal.timeout(10_000) })
      if (!response.ok) throw new Error(`the hub answered ${response.status}`)
      await response.body?.cancel()
    }).pipe(Effect.catchCause((cause) => Effect.logWarning("mercure: an update was not published", cause)))
  yield* Queue.take(updates).pipe(
    Effect.flatMap((heard) => ("missed" in heard ? Effect.void : publish(heard))),
    Effect.forever,
    Effect.forkScoped
  )
  yield* Effect.logInfo(`mercure: publishing updates to ${new URL(hub.value.url).origin}`)
}))
