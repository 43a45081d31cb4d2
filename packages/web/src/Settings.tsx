/**
 * Settings: mailbox density, storage, tags, API tokens (secret shown once), webhooks (secret
 * once, edit, pause, rotate, deliveries, redeliver, test) and sharing (invite, invitations,
 * guests, leave), exports, mail rules and browser push (their own files).
 */
import type { ApiToken, Scope } from "@burnbox/domain/tokens/ApiToken"
import { Scopes } from "@burnbox/domain/tokens/ApiToken"
import type { Webhook, WebhookDelivery, WebhookSubscription } from "@burnbox/domain/webhooks/Webhook"
import type { Share, ShareInvitation, ShareRole } from "@burnbox/domain/sharing/Share"
import { useEffect, useState } from "preact/hooks"
import { call, describe, raw } from "./api.ts"
import { bytes, copy, fullDate } from "./format.ts"
import { Exports } from "./Exports.tsx"
import { Push } from "./Push.tsx"
import { Rules } from "./Rules.tsx"
import { loadSession, type Session } from "./state.ts"

const Secret = (props: { readonly label: string; readonly secret: string; readonly onDone: () => void }) => {
  const [copied, setCopied] = useState(false)
  return (
    <div class="secret" role="status">
      <p><strong>{props.label}</strong> It is shown only this once: copy it now.</p>
      <code data-testid="secret">{props.secret}</code>
      <button type="button" onClick={async () => setCopied(await copy(props.secret))}>{copied ? "Copied" : "Copy"}</button>
      <button type="button" onClick={props.onDone}>Done</button>
    </div>
  )
}

const Density = (props: { readonly session: Session }) => (
  <section class="card" aria-labelledby="density-title">
    <h2 id="density-title">Display</h2>
    <label>
      Mailbox density
      <select value={props.session.user.mailboxDensity} onChange={async (e) => {
        const density = e.currentTarget.value as "default" | "comfortable" | "compact"
        await call(raw.account.density({ payload: { density } }))
        await loadSession()
      }}>
        <option value="default">default</option>
        <option value="comfortable">comfortable</option>
        <option value="compact">compact</option>
      </select>
    </label>
    <p>
      Storage: {bytes(props.session.user.storageUsedBytes)} of {bytes(props.session.user.storageQuotaBytes)} used
      <meter min={0} max={props.session.user.storageQuotaBytes} value={props.session.user.storageUsedBytes} aria-label="Storage used" />
    </p>
    <p class="muted">Plan: {props.session.user.plan.name}. Signed in as {props.session.user.email}.</p>
  </section>
)

const Tags = (props: { readonly session: Session }) => {
  const [name, setName] = useState("")
  const [color, setColor] = useState("#3366CC")
  const [error, setError] = useState<string | undefined>()
  const run = async (work: Promise<unknown>) => {
    try {
      await work
      setError(undefined)
      await loadSession()
    } catch (e) {
      setError(describe(e))
    }
  }
  return (
    <section class="card" aria-labelledby="tags-title">
      <h2 id="tags-title">Tags</h2>
      <form class="row" onSubmit={(e) => {
        e.preventDefault()
        void run(call(raw.tags.create({ payload: { name, color } }))).then(() => setName(""))
      }}>
        <label>Name <input required maxLength={64} value={name} onInput={(e) => setName(e.currentTarget.value)} /></label>
        <label>Colour <input type="color" value={color} onInput={(e) => setColor(e.currentTarget.value)} /></label>
        <button type="submit">Create tag</button>
      </form>
      {error !== undefined && <p class="error" role="alert">{error}</p>}
      <ul class="plain">
        {props.session.tags.map((t) => (
          <li key={t.id} class="row">
            <input aria-label={`Name of tag ${t.name}`} value={t.name} onChange={(e) => void run(call(raw.tags.update({ params: { id: t.id }, payload: { name: e.currentTarget.value } })))} />
            <input type="color" aria-label={`Colour of tag ${t.name}`} value={t.color ?? "#888888"} onChange={(e) => void run(call(raw.tags.update({ params: { id: t.id }, payload: { color: e.currentTarget.value } })))} />
            <span class="muted">{t.messageCount} messages</span>
            <button type="button" class="danger" onClick={() => confirm(`Delete tag ${t.name}?`) && void run(call(raw.tags.remove({ params: { id: t.id } })))}>Delete</button>
          </li>
        ))}
      </ul>
    </section>
  )
}

const Tokens = () => {
  const [tokens, setTokens] = useState<ReadonlyArray<ApiToken>>([])
  const [name, setName] = useState("")
  const [scopes, setScopes] = useState<ReadonlyArray<Scope>>(["read"])
  const [secret, setSecret] = useState<string | undefined>()
  const [error, setError] = useState<string | undefined>()
  const load = () => call(raw.tokens.list()).then((r) => setTokens(r.items), (e) => setError(describe(e)))
  useEffect(() => void load(), [])
  const create = async (e: Event) => {
    e.preventDefault()
    try {
      const created = await call(raw.tokens.create({ payload: { name, scopes: [...scopes] } }))
      setSecret(created.secret)
      setName("")
      setError(undefined)
      await load()
    } catch (err) {
      setError(describe(err))
    }
  }
  return (
    <section class="card" aria-labelledby="tokens-title">
      <h2 id="tokens-title">API tokens</h2>
      <form onSubmit={create}>
        <label>Token name <input required maxLength={80} value={name} onInput={(e) => setName(e.currentTarget.value)} /></label>
        <fieldset class="row">
          <legend>Scopes</legend>
          {Scopes.map((s) => (
            <label key={s} class="check">
              <input type="checkbox" checked={scopes.includes(s)} onChange={(e) => {
                const on = e.currentTarget.checked
                setScopes((old) => (on ? [...old, s] : old.filter((x) => x !== s)))
              }} />
              {s}
            </label>
          ))}
        </fieldset>
        <button type="submit">Create token</button>
      </form>
      {secret !== undefined && <Secret label="Your new token." secret={secret} onDone={() => setSecret(undefined)} />}
      {error !== undefined && <p class="error" role="alert">{error}</p>}
      <ul class="plain">
        {tokens.map((t) => (
          <li key={t.id} class="row">
            <span><strong>{t.name}</strong> <code>{t.prefix}…</code> {t.scopes.join(", ")} · {t.status}{t.lastUsedAt !== null ? ` · used ${fullDate(t.lastUsedAt)}` : ""}</span>
            {t.status !== "revoked" && (
              <button type="button" class="danger" onClick={() => confirm(`Revoke ${t.name}?`) && void call(raw.tokens.revoke({ params: { id: t.id } })).then(load, (e) => setError(describe(e)))}>Revoke</button>
            )}
          </li>
        ))}
      </ul>
    </section>
  )
}

type Mode = WebhookSubscription["mode"]

const subscriptionOf = (mode: Mode, value: string): WebhookSubscription => {
  switch (mode) {
    case "aliases": return { mode, alias_ids: value.split(",").map((v) => Number(v.trim())).filter((n) => n > 0) }
    case "label": return { mode, label: value }
    case "tag": return { mode, tag_id: Number(value) }
    default: return { mode }
  }
}

const Deliveries = (props: { readonly webhook: Webhook }) => {
  const [items, setItems] = useState<ReadonlyArray<WebhookDelivery>>([])
  const [error, setError] = useState<string | undefined>()
  const load = () => call(raw.webhooks.deliveries({ params: { id: props.webhook.id }, query: {} })).then((r) => setItems(r.items), (e) => setError(describe(e)))
  useEffect(() => void load(), [props.webhook.id])
  return (
    <div class="deliveries">
      {error !== undefined && <p class="error">{error}</p>}
      {items.length === 0 ? <p class="muted">No deliveries yet.</p> : (
        <table>
          <thead><tr><th>Event</th><th>Status</th><th>Attempts</th><th>Last</th><th /></tr></thead>
          <tbody>
            {items.map((d) => (
              <tr key={d.id}>
                <td>{d.eventType}</td>
                <td>{d.status}{d.lastHttpStatus !== null ? ` (${d.lastHttpStatus})` : ""}{d.lastError !== null ? ` ${d.lastError}` : ""}</td>
                <td>{d.attemptCount}</td>
                <td>{fullDate(d.lastAttemptAt)}</td>
                <td><button type="button" onClick={() => void call(raw.webhooks.redeliver({ params: { id: d.id } })).then(load, (e) => setError(describe(e)))}>Redeliver</button></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  )
}

const Webhooks = (props: { readonly session: Session }) => {
  const [hooks, setHooks] = useState<ReadonlyArray<Webhook>>([])
  const [name, setName] = useState("")
  const [url, setUrl] = useState("")
  const [mode, setMode] = useState<Mode>("all")
  const [value, setValue] = useState("")
  const [secret, setSecret] = useState<string | undefined>()
  const [open, setOpen] = useState<number | undefined>()
  const [error, setError] = useState<string | undefined>()
  const [notice, setNotice] = useState<string | undefined>()
  const load = () => call(raw.webhooks.list()).then((r) => setHooks(r.items), (e) => setError(describe(e)))
  useEffect(() => void load(), [])
  const attempt = async (work: () => Promise<unknown>) => {
    try {
      await work()
      setError(undefined)
      await load()
    } catch (e) {
      setError(describe(e))
    }
  }
  if (!props.session.user.plan.developerAccess) {
    return (
      <section class="card" aria-labelledby="hooks-title">
        <h2 id="hooks-title">Webhooks</h2>
        <p class="muted">Webhooks come with the Pro plan. Upgrade to receive mail as signed HTTP events.</p>
      </section>
    )
  }
  return (
    <section class="card" aria-labelledby="hooks-title">
      <h2 id="hooks-title">Webhooks</h2>
      <form onSubmit={(e) => {
        e.preventDefault()
        void attempt(async () => {
          const created = await call(raw.webhooks.create({ payload: { name, url, subscription: subscriptionOf(mode, value) } }))
          setSecret(created.secret)
          setName("")
          setUrl("")
        })
      }}>
        <div class="row">
          <label>Webhook name <input required maxLength={80} value={name} onInput={(e) => setName(e.currentTarget.value)} /></label>
          <label>HTTPS URL <input required type="url" placeholder="https://example.com/hooks/burnbox" value={url} onInput={(e) => setUrl(e.currentTarget.value)} /></label>
        </div>
        <div class="row">
          <label>
            Events for
            <select value={mode} onChange={(e) => setMode(e.currentTarget.value as Mode)}>
              <option value="all">every mailbox</option>
              <option value="aliases">some aliases</option>
              <option value="label">aliases with a label</option>
              <option value="tag">a tag</option>
              <option value="otp">codes only</option>
            </select>
          </label>
          {mode === "aliases" && (
            <label>Aliases
              <select multiple onChange={(e) => setValue([...e.currentTarget.selectedOptions].map((o) => o.value).join(","))}>
                {props.session.aliases.map((a) => <option key={a.id} value={a.id} selected={value.split(",").includes(String(a.id))}>{a.address}</option>)}
              </select>
            </label>
          )}
          {mode === "label" && <label>Label <input value={value} onInput={(e) => setValue(e.currentTarget.value)} /></label>}
          {mode === "tag" && (
            <label>Tag
              <select value={value} onChange={(e) => setValue(e.currentTarget.value)}>
                <option value="">choose</option>
                {props.session.tags.map((t) => <option key={t.id} value={t.id}>{t.name}</option>)}
              </select>
            </label>
          )}
        </div>
        <button type="submit">Create webhook</button>
      </form>
      {secret !== undefined && <Secret label="The webhook's signing secret." secret={secret} onDone={() => setSecret(undefined)} />}
      {error !== undefined && <p class="error" role="alert">{error}</p>}
      {notice !== undefined && <p class="notice" role="status">{notice}</p>}
      <ul class="plain">
        {hooks.map((h) => (
          <li key={h.id}>
            <div class="row">
              <span><strong>{h.name}</strong> {h.url} · {h.subscription.mode} · {h.status}{h.failureCount > 0 ? ` · ${h.failureCount} failures` : ""}</span>
              <button type="button" onClick={() => {
                const next = prompt("New URL", h.url)
                if (next !== null && next !== h.url) void attempt(() => call(raw.webhooks.update({ params: { id: h.id }, payload: { url: next } })))
              }}>Edit URL</button>
              <button type="button" onClick={() => void attempt(() => call(raw.webhooks.update({ params: { id: h.id }, payload: { status: h.status === "active" ? "paused" : "active" } })))}>
                {h.status === "active" ? "Pause" : "Resume"}
              </button>
              <button type="button" onClick={() => void attempt(async () => {
                const rotated = await call(raw.webhooks.rotateSecret({ params: { id: h.id } }))
                setSecret(rotated.secret)
              })}>Rotate secret</button>
              <button type="button" onClick={() => void attempt(async () => {
                await call(raw.webhooks.test({ params: { id: h.id } }))
                setNotice(`A test event is queued for ${h.name}.`)
              })}>Send test</button>
              <button type="button" aria-expanded={open === h.id} onClick={() => setOpen(open === h.id ? undefined : h.id)}>Deliveries</button>
              <button type="button" class="danger" onClick={() => confirm(`Delete webhook ${h.name}?`) && void attempt(() => call(raw.webhooks.remove({ params: { id: h.id } })))}>Delete</button>
            </div>
            {open === h.id && <Deliveries webhook={h} />}
          </li>
        ))}
      </ul>
    </section>
  )
}

const Sharing = (props: { readonly session: Session }) => {
  const own = props.session.aliases.filter((a) => !a.shared && a.status !== "burned")
  const [aliasId, setAliasId] = useState(own[0]?.id ?? 0)
  const [email, setEmail] = useState("")
  const [role, setRole] = useState<ShareRole>("viewer")
  const [guests, setGuests] = useState<ReadonlyArray<Share>>([])
  const [invitations, setInvitations] = useState<ReadonlyArray<ShareInvitation>>([])
  const [error, setError] = useState<string | undefined>()
  const loadGuests = () => (aliasId === 0 ? Promise.resolve() : call(raw.sharing.list({ params: { id: aliasId } })).then((r) => setGuests(r.items), () => setGuests([])))
  const loadInvitations = () => call(raw.sharing.invitations()).then((r) => setInvitations(r.items), () => setInvitations([]))
  useEffect(() => void loadGuests(), [aliasId])
  useEffect(() => void loadInvitations(), [])
  const attempt = async (work: () => Promise<unknown>) => {
    try {
      await work()
      setError(undefined)
      await Promise.all([loadGuests(), loadInvitations(), loadSession()])
    } catch (e) {
      setError(describe(e))
    }
  }
  return (
    <section class="card" aria-labelledby="sharing-title">
      <h2 id="sharing-title">Sharing</h2>
      {invitations.length > 0 && (
        <>
          <h3>Invitations to you</h3>
          <ul class="plain">
            {invitations.map((i) => (
              <li key={i.id} class="row">
                <span>{i.aliasAddress} from {i.ownerHandle} as {i.role}</span>
                <button type="button" onClick={() => void attempt(() => call(raw.sharing.accept({ params: { id: i.id } })))}>Accept</button>
                <button type="button" onClick={() => void attempt(() => call(raw.sharing.decline({ params: { id: i.id } })))}>Decline</button>
              </li>
            ))}
          </ul>
        </>
      )}
      {own.length === 0 ? <p class="muted">Claim an alias to share it.</p> : (
        <>
          <form class="row" onSubmit={(e) => {
            e.preventDefault()
            void attempt(() => call(raw.sharing.invite({ params: { id: aliasId }, payload: { email, role } }))).then(() => setEmail(""))
          }}>
            <label>Mailbox
              <select value={aliasId} onChange={(e) => setAliasId(Number(e.currentTarget.value))}>
                {own.map((a) => <option key={a.id} value={a.id}>{a.address}</option>)}
              </select>
            </label>
            <label>Guest email <input type="email" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} /></label>
            <label>Role
              <select value={role} onChange={(e) => setRole(e.currentTarget.value as ShareRole)}>
                <option value="viewer">viewer</option>
                <option value="collaborator">collaborator</option>
              </select>
            </label>
            <button type="submit">Invite</button>
          </form>
          <ul class="plain">
            {guests.map((g) => (
              <li key={g.id} class="row">
                <span>{g.guestHandle} · {g.role} · {g.status}</span>
                <button type="button" class="danger" onClick={() => void attempt(() => call(raw.sharing.end({ params: { id: aliasId, shareId: g.id } })))}>Stop sharing</button>
              </li>
            ))}
          </ul>
        </>
      )}
      {error !== undefined && <p class="error" role="alert">{error}</p>}
    </section>
  )
}

export const Settings = (props: { readonly session: Session }) => (
  <section class="settings" aria-labelledby="settings-title">
    <h1 id="settings-title">Settings</h1>
    <Density session={props.session} />
    <Tags session={props.session} />
    <Tokens />
    <Webhooks session={props.session} />
    <Sharing session={props.session} />
    <Exports session={props.session} />
    <Rules session={props.session} />
    <Push session={props.session} />
  </section>
)
