// The web inbox's service worker: shows browser-push notifications of new mail and opens the
// inbox when one is clicked. It caches nothing.
self.addEventListener("push", (event) => {
  let data = {}
  try { data = event.data ? event.data.json() : {} } catch { data = { title: event.data ? event.data.text() : "New mail" } }
  const title = typeof data.title === "string" ? data.title : "New mail"
  const body = typeof data.body === "string" ? data.body : ""
  event.waitUntil(self.registration.showNotification(title, { body, data: { url: typeof data.url === "string" ? data.url : "/" } }))
})
self.addEventListener("notificationclick", (event) => {
  event.notification.close()
  event.waitUntil(self.clients.openWindow(event.notification.data?.url ?? "/"))
})
