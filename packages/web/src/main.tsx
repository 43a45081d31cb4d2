/** The web inbox's entry: the session, the routes and the shell (header, mailbox list). */
import { render } from "preact"
import { useEffect, useState } from "preact/hooks"
import { call, onSignedOut, raw, setCsrfToken } from "./api.ts"
import { Aliases } from "./Aliases.tsx"
import { AuthForm } from "./Auth.tsx"
import { Desk } from "./Desk.tsx"
import { Inbox, prefetchFirstPage } from "./Inbox.tsx"
import { connectLive, disconnectLive, liveConnected } from "./live.ts"
import { MessageView } from "./Message.tsx"
import { go, route } from "./route.ts"
import { Settings } from "./Settings.tsx"
import { useSignal } from "./signal.ts"
import { loadSession, type Session, session as sessionSignal } from "./state.ts"

const signOut = async () => {
  try {
    await call(raw.auth.logout())
  } finally {
    disconnectLive()
    setCsrfToken(undefined)
    sessionSignal.set(null)
    go("#/signin")
  }
}

const Shell = (props: { readonly session: Session }) => {
  const current = useSignal(route)
  const connected = useSignal(liveConnected)
  const { session } = props
  const [menu, setMenu] = useState(false)
  useEffect(() => {
    connectLive(session.mercure.hubUrl, session.mercure.topic)
  }, [session.mercure.hubUrl, session.mercure.topic])
  useEffect(() => setMenu(false), [current])
  const unread = session.aliases.reduce((n, a) => n + a.unreadCount, 0)
  const activeAlias = current.page === "inbox" ? current.alias : undefined
  return (
    <div class="shell">
      <header class="top">
        <button type="button" class="menu-button" aria-expanded={menu} aria-controls="mailboxes" onClick={() => setMenu(!menu)}>Mailboxes</button>
        <a href="#/inbox" class="brand">burnbox</a>
        <nav aria-label="Main">
          <a href="#/inbox" aria-current={current.page === "inbox" || current.page === "message" ? "page" : undefined}>Inbox{unread > 0 ? ` (${unread})` : ""}</a>
          <a href="#/aliases" aria-current={current.page === "aliases" ? "page" : undefined}>Aliases</a>
          <a href="#/settings" aria-current={current.page === "settings" ? "page" : undefined}>Settings</a>
          <button type="button" class="link" onClick={() => void signOut()}>Sign out</button>
        </nav>
        <span class={connected ? "live on" : "live"} title={connected ? "Live updates on" : "Live updates reconnecting"} role="img" aria-label={connected ? "Live" : "Offline"} />
      </header>
      <aside id="mailboxes" class={menu ? "mailboxes open" : "mailboxes"} aria-label="Mailboxes">
        <a href="#/inbox" aria-current={current.page === "inbox" && activeAlias === undefined ? "page" : undefined}>
          All mailboxes{unread > 0 && <span class="badge">{unread}</span>}
        </a>
        {session.aliases.filter((a) => a.status !== "burned").map((a) => (
          <a key={a.id} href={`#/alias/${a.id}`} aria-current={activeAlias === a.id ? "page" : undefined} title={a.address}>
            <span class="alias-name">{a.label ?? a.address}</span>
            {a.status === "paused" && <span class="muted"> paused</span>}
            {a.unreadCount > 0 && <span class="badge" aria-label={`${a.unreadCount} unread`}>{a.unreadCount}</span>}
          </a>
        ))}
        <a href="#/aliases" class="new-alias">+ New alias</a>
      </aside>
      <main class="content" id="content">
        {current.page === "message" ? <MessageView id={current.id} />
          : current.page === "aliases" ? <Aliases session={session} />
          : current.page === "settings" ? <Settings session={session} />
          : current.page === "desk" ? <Desk key={`${current.aliasId}/${current.replyTo ?? ""}`} session={session} aliasId={current.aliasId} replyTo={current.replyTo} />
          : <Inbox session={session} alias={current.page === "inbox" ? current.alias : undefined} />}
      </main>
    </div>
  )
}

const App = () => {
  const session = useSignal(sessionSignal)
  const current = useSignal(route)
  const [expired, setExpired] = useState(false)
  useEffect(() => {
    void loadSession()
    return onSignedOut(() => {
      const now = sessionSignal.get()
      if (now !== null && now !== undefined) setExpired(true)
    })
  }, [])
  useEffect(() => {
    if (session === null && current.page !== "signin" && current.page !== "signup") go("#/signin")
    if (session !== null && session !== undefined && (current.page === "signin" || current.page === "signup")) go("#/inbox")
  }, [session, current])
  if (session === undefined) return <p class="loading">Loading…</p>
  if (session === null) return <AuthForm key={current.page} mode={current.page === "signup" ? "signup" : "signin"} />
  return (
    <>
      <Shell session={session} />
      {/* A lost session: sign in again over the page, so nothing typed is lost. */}
      {expired && <div class="dialog"><AuthForm mode="signin" overlay onDone={() => setExpired(false)} /></div>}
    </>
  )
}

const root = document.getElementById("app")
if (root !== null) {
  const opening = route.get()
  if (opening.page === "inbox") prefetchFirstPage(opening.alias)
  root.textContent = ""
  render(<App />, root)
}
