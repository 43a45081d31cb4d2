// The web inbox's service worker: shows browser-push notifications of new mail and opens the
// message (or the inbox) when one is clicked. It caches nothing. The push's payload is the JSON
// of README "Browser push": {type, messageId, alias, from, subject, otp} ("type":"test" for a test).
const text = (value) => (typeof value === "string" && value !== "" ? value : undefined)

/** A payload as a notification: the subject (or who it is to) as title, sender and code as body. */
const notificationOf = (data) => {
  if (data.type === "test") return { title: "burnbox test notification", body: "Push works in this browser.", url: "/#/inbox" }
  const title = text(data.subject) ?? (text(data.alias) ? `New mail to ${data.alias}` : text(data.title) ?? "New mail")
  const lines = [text(data.from) ? `From ${data.from}` : undefined, text(data.otp) ? `Code ${data.otp}` : undefined, text(data.body)]
  const url = typeof data.messageId === "number" ? `/#/m/${data.messageId}` : text(data.url) ?? "/#/inbox"
  return { title, body: lines.filter((l) => l !== undefined).join("\n"), url, tag: typeof data.messageId === "number" ? `message-${data.messageId}` : undefined }
}

self.addEventListener("push", (event) => {
  let data = {}
  try { data = event.data ? event.data.json() : {} } catch { data = { title: event.data ? event.data.text() : "New mail" } }
  const shown = notificationOf(data ?? {})
  event.waitUntil(self.registration.showNotification(shown.title, { body: shown.body, tag: shown.tag, data: { url: shown.url } }))
})
self.addEventListener("notificationclick", (event) => {
  event.notification.close()
  event.waitUntil(self.clients.openWindow(event.notification.data?.url ?? "/"))
})
