/**
 * Settings, browser push (#32, decisions.md "Browser push"): turn push on for this browser (the
 * served /sw.js registered, PushManager.subscribe with the settings' VAPID publicKey, the
 * subscription sent to POST /push/subscriptions), turn it off, send a test, dismiss the nudge,
 * and the list of this account's subscribed browsers. The per-alias toggle is on the aliases page.
 */
import type { PushSettings } from "@burnbox/domain/push/Push"
import { useEffect, useState } from "preact/hooks"
import { call, describe, raw } from "./api.ts"
import { loadSession, type Session } from "./state.ts"

/** A VAPID key (base64url) as the bytes PushManager.subscribe takes. */
const keyBytes = (base64url: string): Uint8Array<ArrayBuffer> => {
  const base64 = base64url.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(base64url.length / 4) * 4, "=")
  const text = atob(base64)
  const bytes = new Uint8Array(new ArrayBuffer(text.length))
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i)
  return bytes
}

const supported = () => "serviceWorker" in navigator && "PushManager" in globalThis && "Notification" in globalThis

/** Registers /sw.js and subscribes this browser; the subscription as the API takes it. */
const subscribeBrowser = async (publicKey: string) => {
  if (Notification.permission !== "granted" && (await Notification.requestPermission()) !== "granted") {
    throw new Error("Notifications are blocked for this site in the browser's settings.")
  }
  const registration = await navigator.serviceWorker.register("/sw.js")
  await navigator.serviceWorker.ready
  const subscription = await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(publicKey) })
  const json = subscription.toJSON()
  const keys = json.keys ?? {}
  if (json.endpoint === undefined || keys.p256dh === undefined || keys.auth === undefined) throw new Error("The browser gave an incomplete push subscription.")
  return { endpoint: json.endpoint, keys: { p256dh: keys.p256dh, auth: keys.auth } }
}

export const Push = (props: { readonly session: Session }) => {
  const [settings, setSettings] = useState<PushSettings>(props.session.push)
  const [error, setError] = useState<string | undefined>()
  const [notice, setNotice] = useState<string | undefined>()
  const [busy, setBusy] = useState(false)
  const load = () => call(raw.account.pushSettings()).then(setSettings, (e) => setError(describe(e)))
  useEffect(() => void load(), [])
  const attempt = async (work: () => Promise<unknown>) => {
    setBusy(true)
    try {
      await work()
      setError(undefined)
    } catch (e) {
      setError(describe(e))
    } finally {
      setBusy(false)
      await load()
    }
  }
  const enable = () => attempt(async () => {
    await call(raw.push.setEnabled({ payload: { enabled: true } }))
    if (settings.publicKey === null) throw new Error("This server has no push key configured (BURNBOX_VAPID_*), so browsers cannot subscribe.")
    if (!supported()) throw new Error("This browser cannot receive push notifications.")
    const subscription = await subscribeBrowser(settings.publicKey)
    await call(raw.push.subscribe({ payload: subscription }))
    setNotice("Push is on for this browser.")
  })
  const disable = () => attempt(async () => {
    await call(raw.push.setEnabled({ payload: { enabled: false } }))
    setNotice("Push is off.")
  })
  return (
    <section class="card" aria-labelledby="push-title">
      <h2 id="push-title">Browser push</h2>
      {!settings.enabled && !settings.nudgeDismissed && (
        <div class="notice row" role="status" data-testid="push-nudge">
          <span>Get a notification when mail arrives, even with this tab closed.</span>
          <button type="button" onClick={() => void attempt(async () => setSettings(await call(raw.push.dismissNudge())))}>Not now</button>
        </div>
      )}
      <p>Push notifications are <strong data-testid="push-state">{settings.enabled ? "on" : "off"}</strong> for this account.</p>
      <div class="row">
        <button type="button" disabled={busy} onClick={() => void enable()}>Enable push in this browser</button>
        {settings.enabled && <button type="button" disabled={busy} onClick={() => void disable()}>Turn push off</button>}
      </div>
      {error !== undefined && <p class="error" role="alert">{error}</p>}
      {notice !== undefined && <p class="notice" role="status">{notice}</p>}
      {settings.subscriptions.length > 0 && (
        <ul class="plain">
          {settings.subscriptions.map((s) => (
            <li key={s.id} class="row">
              <span>Browser {s.endpointHash.slice(0, 8)} · since {s.createdAt}{s.lastSuccessAt !== null ? ` · last delivered ${s.lastSuccessAt}` : ""}</span>
              <button type="button" onClick={() => void attempt(async () => {
                await call(raw.push.test({ params: { id: s.id } }))
                setNotice("A test notification is on its way.")
              })}>Send test</button>
              <button type="button" class="danger" onClick={() => void attempt(() => call(raw.push.unsubscribe({ params: { id: s.id } })))}>Remove</button>
            </li>
          ))}
        </ul>
      )}
    </section>
  )
}

/** The per-alias push toggle (aliases page). */
export const AliasPushToggle = (props: { readonly aliasId: number; readonly address: string; readonly enabled: boolean; readonly onError: (text: string) => void }) => (
  <label class="check">
    <input type="checkbox" checked={props.enabled} onChange={(e) => {
      const enabled = e.currentTarget.checked
      void call(raw.push.aliasPreference({ params: { id: props.aliasId }, payload: { enabled } })).then(() => loadSession(), (err) => props.onError(describe(err)))
    }} aria-label={`Push for ${props.address}`} />
    Push
  </label>
)
