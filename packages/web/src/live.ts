/**
 * Live updates: an EventSource on the bootstrap's Mercure hub (`mercure.hubUrl`, subscribed to
 * `mercure.topic`, with the session cookie). Every update (new mail, read/star changes made
 * elsewhere, alias counts) tells the subscribers to re-read what they show; the data itself
 * always comes from the API.
 */
import { signal } from "./signal.ts"

/** Bumped on every update the hub pushes. */
export const liveTick = signal(0)
export const liveConnected = signal(false)

let source: EventSource | undefined

export const connectLive = (hubUrl: string, topic: string) => {
  if (source !== undefined || typeof EventSource === "undefined") return
  const url = new URL(hubUrl, location.origin)
  // The service's own hub (on its site URL, as the topic is): reach it on the origin this page
  // came from, which may name the same server differently (127.0.0.1 for localhost), so the
  // session cookie goes along and the page's CSP (connect-src 'self') allows it.
  if (url.origin === new URL(topic).origin) url.host = location.host
  url.searchParams.append("topic", topic)
  source = new EventSource(url, { withCredentials: true })
  source.addEventListener("open", () => liveConnected.set(true))
  source.addEventListener("error", () => liveConnected.set(false))
  source.addEventListener("message", () => liveTick.set(liveTick.get() + 1))
}

export const disconnectLive = () => {
  source?.close()
  source = undefined
  liveConnected.set(false)
}
