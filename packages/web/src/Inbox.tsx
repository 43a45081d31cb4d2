/**
 * The inbox: one list across every mailbox (or one alias), filters, search with the `q` syntax,
 * infinite scroll over the cursor, density, multi-select with the bulk actions of spec 4.5 and
 * their outcomes, the trash with purge dates, restore and empty. Keyboard: j/k move, o/Enter
 * open, e archive, # delete, s star, x select, / search, ? help.
 */
import type { MessagePage, MessageSummary } from "@burnbox/client"
import type { BulkAction } from "@burnbox/domain/messages/Message"
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from "preact/hooks"
import { call, describe, raw } from "./api.ts"
import { fullDate, when } from "./format.ts"
import { liveConnected, liveTick } from "./live.ts"
import { go } from "./route.ts"
import { useSignal } from "./signal.ts"
import { refreshSession, type Session } from "./state.ts"

export type View = "inbox" | "unread" | "starred" | "pinned" | "attachments" | "archived" | "trash"
const views: ReadonlyArray<readonly [View, string]> = [
  ["inbox", "Inbox"], ["unread", "Unread"], ["starred", "Starred"], ["pinned", "Pinned"],
  ["attachments", "With attachments"], ["archived", "Archived"], ["trash", "Trash"]
]

export interface Filters {
  readonly view: View
  readonly alias: number | undefined
  readonly tag: number | undefined
  readonly excludeShared: boolean
  readonly q: string
}

const PageSize = 50
/** Without a live connection the first page is re-read this often. */
const FallbackPollMs = 5_000

const queryOf = (filters: Filters, cursor?: string) => ({
  limit: PageSize,
  ...(cursor === undefined ? {} : { cursor }),
  ...(filters.q.trim() === "" ? {} : { q: filters.q.trim() }),
  ...(filters.alias === undefined ? {} : { alias: filters.alias }),
  ...(filters.tag === undefined ? {} : { tag: filters.tag }),
  ...(filters.excludeShared ? { excludeShared: "true" as const } : {}),
  ...(filters.view === "unread" ? { unread: "true" as const } : {}),
  ...(filters.view === "starred" ? { starred: "true" as const } : {}),
  ...(filters.view === "pinned" ? { pinned: "true" as const } : {}),
  ...(filters.view === "attachments" ? { hasAttachment: "true" as const } : {}),
  ...(filters.view === "archived" ? { archived: "true" as const } : {}),
  ...(filters.view === "trash" ? { trashed: "true" as const } : {})
})

const listPage = (filters: Filters, cursor?: string): Promise<MessagePage> =>
  call(raw.messages.list({ query: queryOf(filters, cursor) }))

export const defaultFilters = (alias: number | undefined): Filters => ({ view: "inbox", alias, tag: undefined, excludeShared: false, q: "" })

/**
 * The first page asked for while the bootstrap is still on its way (the page opened on the
 * inbox), so the two requests overlap; taken once by the inbox's first load.
 */
let prefetched: { readonly key: string; readonly page: Promise<MessagePage> } | undefined
export const prefetchFirstPage = (alias: number | undefined) => {
  const filters = defaultFilters(alias)
  const page = listPage(filters)
  page.catch(() => {}) // a signed-out visitor: the inbox is not shown, nothing to report
  prefetched = { key: JSON.stringify(queryOf(filters)), page }
}
const takePrefetched = (filters: Filters): Promise<MessagePage> | undefined => {
  const taken = prefetched
  prefetched = undefined
  return taken !== undefined && taken.key === JSON.stringify(queryOf(filters)) ? taken.page : undefined
}

const searchHints = [
  ["from:alice", "sender"], ["subject:code", "subject"], ["to:me+ci", "recipient"], ["\"exact phrase\"", "phrase"],
  ["-word", "exclude"], ["has:attachment", ""], ["is:unread", ""], ["tag:work", ""], ["after:2026-01-31", "date"]
] as const

const bulkActions = (view: View): ReadonlyArray<readonly [BulkAction, string]> =>
  view === "trash"
    ? [["restore", "Restore"], ["delete_forever", "Delete forever"]]
    : [
      ["mark_read", "Mark read"], ["mark_unread", "Mark unread"], ["star", "Star"], ["unstar", "Unstar"],
      ["pin", "Pin"], ["unpin", "Unpin"], [view === "archived" ? "unarchive" : "archive", view === "archived" ? "Unarchive" : "Archive"],
      ["delete", "Delete"]
    ]

export const outcomeText = (r: { updated: number; deleted: number; trashed: number; restored: number }) => {
  const parts: Array<string> = []
  if (r.updated > 0) parts.push(`${r.updated} updated`)
  if (r.trashed > 0) parts.push(`${r.trashed} moved to trash`)
  if (r.deleted - r.trashed > 0) parts.push(`${r.deleted - r.trashed} deleted permanently`)
  if (r.restored > 0) parts.push(`${r.restored} restored`)
  return parts.length === 0 ? "Nothing changed." : `${parts.join(", ")}.`
}

export const Inbox = (props: { readonly session: Session; readonly alias: number | undefined }) => {
  const { session } = props
  const [filters, setFilters] = useState<Filters>(defaultFilters(props.alias))
  const [search, setSearch] = useState("")
  const [items, setItems] = useState<ReadonlyArray<MessageSummary>>([])
  const [total, setTotal] = useState(0)
  const [cursor, setCursor] = useState<string | null>(null)
  const [loading, setLoading] = useState(true)
  /** First pages rendered so far: lets a benchmark see that a new answer is on screen. */
  const [loads, setLoads] = useState(0)
  const [error, setError] = useState<string | undefined>()
  const [notice, setNotice] = useState<string | undefined>()
  const [selected, setSelected] = useState<ReadonlySet<number>>(new Set())
  const [focus, setFocus] = useState(0)
  const [help, setHelp] = useState(false)
  const [hints, setHints] = useState(false)
  const [bulkTag, setBulkTag] = useState<number | undefined>()
  const searchRef = useRef<HTMLInputElement>(null)
  const sentinel = useRef<HTMLLIElement>(null)
  const generation = useRef(0)
  const tick = useSignal(liveTick)
  const connected = useSignal(liveConnected)

  useEffect(() => setFilters((f) => (f.alias === props.alias ? f : { ...f, alias: props.alias })), [props.alias])

  /** Reads the first page again (filters changed, live update, after an action). */
  const reload = useCallback(async (quiet = false) => {
    const mine = ++generation.current
    if (!quiet) setLoading(true)
    try {
      const page = await (takePrefetched(filters) ?? listPage(filters))
      if (mine !== generation.current) return
      setItems(page.items)
      setLoads((n) => n + 1)
      setTotal(page.total)
      setCursor(page.nextCursor)
      setError(undefined)
    } catch (e) {
      if (mine === generation.current) setError(describe(e))
    } finally {
      if (mine === generation.current) setLoading(false)
    }
  }, [filters])

  useEffect(() => {
    setSelected(new Set())
    setFocus(0)
    void reload()
  }, [reload])
  useEffect(() => {
    if (tick > 0) void reload(true)
  }, [tick])
  useEffect(() => {
    if (connected) return
    const timer = setInterval(() => void reload(true), FallbackPollMs)
    return () => clearInterval(timer)
  }, [connected, reload])

  const loadMore = useCallback(async () => {
    if (cursor === null || loading) return
    const mine = generation.current
    setLoading(true)
    try {
      const page = await listPage(filters, cursor)
      if (mine !== generation.current) return
      setItems((old) => [...old, ...page.items.filter((m) => !old.some((o) => o.id === m.id))])
      setCursor(page.nextCursor)
    } catch (e) {
      setError(describe(e))
    } finally {
      setLoading(false)
    }
  }, [cursor, loading, filters])

  useEffect(() => {
    const node = sentinel.current
    if (node === null) return
    const observer = new IntersectionObserver((entries) => {
      if (entries.some((entry) => entry.isIntersecting)) void loadMore()
    }, { rootMargin: "400px" })
    observer.observe(node)
    return () => observer.disconnect()
  }, [loadMore])

  const bulk = async (action: BulkAction, ids: ReadonlyArray<number>, tagId?: number) => {
    if (ids.length === 0) return
    if (action === "delete_forever" && !confirm(`Delete ${ids.length} message(s) forever? This cannot be undone.`)) return
    try {
      const result = await call(raw.messages.bulk({ payload: { ids: [...ids], action, ...(tagId === undefined ? {} : { tagId }) } }))
      setNotice(outcomeText(result))
      setSelected(new Set())
      await reload(true)
      refreshSession()
    } catch (e) {
      setNotice(describe(e))
    }
  }

  const emptyTrash = async () => {
    if (!confirm("Empty the trash? Every message in it is deleted forever.")) return
    try {
      let deleted = 0
      for (;;) {
        const result = await call(raw.messages.emptyTrash({ query: filters.alias === undefined ? {} : { alias: filters.alias } }))
        deleted += result.deleted
        if (result.remaining === 0) break
      }
      setNotice(`Trash emptied: ${deleted} deleted permanently.`)
      await reload(true)
    } catch (e) {
      setNotice(describe(e))
    }
  }

  const toggle = (id: number) => setSelected((old) => {
    const next = new Set(old)
    if (next.has(id)) next.delete(id)
    else next.add(id)
    return next
  })

  // Keyboard shortcuts (Gmail/Mailpit); none while typing in a field. A layout effect, so the
  // listener sees the focus just drawn (a key pressed right after `k` acts on the row shown).
  useLayoutEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      const target = event.target as HTMLElement | null
      if (target !== null && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.tagName === "SELECT")) {
        if (event.key === "Escape") target.blur()
        return
      }
      if (event.ctrlKey || event.metaKey || event.altKey) return
      const current = items[focus]
      switch (event.key) {
        case "j": setFocus((f) => Math.min(f + 1, items.length - 1)); break
        case "k": setFocus((f) => Math.max(f - 1, 0)); break
        case "o":
        case "Enter": if (current !== undefined) go(`#/m/${current.id}`); break
        case "x": if (current !== undefined) toggle(current.id); break
        case "e": if (current !== undefined) void bulk(filters.view === "archived" ? "unarchive" : "archive", [current.id]); break
        case "#": if (current !== undefined) void bulk(filters.view === "trash" ? "delete_forever" : "delete", [current.id]); break
        case "s": if (current !== undefined) void bulk(current.starred ? "unstar" : "star", [current.id]); break
        case "u": if (current !== undefined) void bulk(current.isRead ? "mark_unread" : "mark_read", [current.id]); break
        case "/": event.preventDefault(); searchRef.current?.focus(); break
        case "?": setHelp((h) => !h); break
        case "Escape": setHelp(false); setSelected(new Set()); break
        default: return
      }
    }
    addEventListener("keydown", onKey)
    return () => removeEventListener("keydown", onKey)
  }, [items, focus, filters.view])

  useEffect(() => {
    document.querySelector(`[data-index="${focus}"]`)?.scrollIntoView({ block: "nearest" })
  }, [focus])

  const density = session.user.mailboxDensity
  const aliasName = filters.alias === undefined ? undefined : session.aliases.find((a) => a.id === filters.alias)?.address
  const allSelected = items.length > 0 && items.every((m) => selected.has(m.id))

  return (
    <section class={`inbox density-${density}`} aria-label="Messages">
      <form class="search" role="search" onSubmit={(e) => {
        e.preventDefault()
        setHints(false)
        setFilters((f) => ({ ...f, q: search }))
      }}>
        <label class="visually-hidden" for="search">Search mail</label>
        <input
          id="search"
          ref={searchRef}
          type="search"
          placeholder="Search mail (press / )"
          value={search}
          onInput={(e) => setSearch(e.currentTarget.value)}
          onFocus={() => setHints(true)}
          onBlur={() => setTimeout(() => setHints(false), 200)}
          aria-describedby="search-hints"
        />
        <button type="submit">Search</button>
        {filters.q !== "" && <button type="button" onClick={() => {
          setSearch("")
          setFilters((f) => ({ ...f, q: "" }))
        }}>Clear</button>}
        <ul id="search-hints" class={hints ? "hints" : "hints hidden"} aria-label="Search syntax">
          {searchHints.map(([example, what]) => (
            <li key={example}>
              <button type="button" onMouseDown={(e) => {
                e.preventDefault()
                setSearch((s) => `${s}${s === "" || s.endsWith(" ") ? "" : " "}${example}`)
              }}><code>{example}</code> {what}</button>
            </li>
          ))}
        </ul>
      </form>

      <nav class="filters" aria-label="Filters">
        {views.map(([view, label]) => (
          <button key={view} type="button" aria-pressed={filters.view === view} onClick={() => setFilters((f) => ({ ...f, view }))}>{label}</button>
        ))}
        <label>
          Tag
          <select value={filters.tag ?? ""} onChange={(e) => {
            const value = e.currentTarget.value
            setFilters((f) => ({ ...f, tag: value === "" ? undefined : Number(value) }))
          }}>
            <option value="">any</option>
            {session.tags.map((t) => <option key={t.id} value={t.id}>{t.name} ({t.messageCount})</option>)}
          </select>
        </label>
        <label class="check">
          <input type="checkbox" checked={filters.excludeShared} onChange={(e) => {
            const excludeShared = e.currentTarget.checked
            setFilters((f) => ({ ...f, excludeShared }))
          }} />
          Own mailboxes only
        </label>
      </nav>

      <div class="list-head">
        <h2>
          {aliasName ?? views.find(([v]) => v === filters.view)?.[1]}
          {filters.q !== "" && <> · results for “{filters.q}”</>}
          <span class="count"> {total} message{total === 1 ? "" : "s"}</span>
        </h2>
        {filters.view === "trash" && <button type="button" class="danger" onClick={emptyTrash} disabled={items.length === 0}>Empty trash</button>}
      </div>

      <div class="toolbar" role="toolbar" aria-label="Bulk actions">
        <label class="check">
          <input type="checkbox" checked={allSelected} onChange={() => setSelected(allSelected ? new Set() : new Set(items.map((m) => m.id)))} />
          Select all
        </label>
        {selected.size > 0 && (
          <>
            <span>{selected.size} selected</span>
            {bulkActions(filters.view).map(([action, label]) => (
              <button key={action} type="button" onClick={() => void bulk(action, [...selected])}>{label}</button>
            ))}
            {filters.view !== "trash" && session.tags.length > 0 && (
              <>
                <label class="visually-hidden" for="bulk-tag">Tag</label>
                <select id="bulk-tag" value={bulkTag ?? ""} onChange={(e) => setBulkTag(e.currentTarget.value === "" ? undefined : Number(e.currentTarget.value))}>
                  <option value="">tag…</option>
                  {session.tags.map((t) => <option key={t.id} value={t.id}>{t.name}</option>)}
                </select>
                <button type="button" disabled={bulkTag === undefined} onClick={() => void bulk("add_tag", [...selected], bulkTag)}>Add tag</button>
                <button type="button" disabled={bulkTag === undefined} onClick={() => void bulk("remove_tag", [...selected], bulkTag)}>Remove tag</button>
              </>
            )}
          </>
        )}
      </div>
      {notice !== undefined && <p class="notice" role="status">{notice} <button type="button" class="link" onClick={() => setNotice(undefined)}>Dismiss</button></p>}
      {error !== undefined && <p class="error" role="alert">{error}</p>}

      <ul class="messages" aria-busy={loading} data-loads={loads}>
        {items.map((m, index) => (
          <li
            key={m.id}
            data-index={index}
            data-id={m.id}
            class={`message-row${m.isRead ? "" : " unread"}${index === focus ? " focused" : ""}${selected.has(m.id) ? " selected" : ""}`}
          >
            <input type="checkbox" aria-label={`Select “${m.subject}”`} checked={selected.has(m.id)} onChange={() => toggle(m.id)} />
            <button type="button" class="star" aria-label={m.starred ? "Unstar" : "Star"} aria-pressed={m.starred} onClick={() => void bulk(m.starred ? "unstar" : "star", [m.id])}>{m.starred ? "★" : "☆"}</button>
            <a href={`#/m/${m.id}`} class="row-link" onFocus={() => setFocus(index)}>
              <span class="sender">{m.sender.name ?? m.sender.address}</span>
              <span class="subject">{m.pinned ? "📌 " : ""}{m.subject === "" ? "(no subject)" : m.subject}</span>
              <span class="snippet">{m.otpCodes[0] !== undefined ? `Code ${m.otpCodes[0]} · ` : ""}{m.snippet}</span>
              <span class="meta">
                <span class="alias">{m.alias.label ?? m.alias.address}</span>
                {m.tags.map((t) => <span key={t.id} class="tag">{t.name}</span>)}
                {m.hasAttachments && <span aria-label="has attachments">📎</span>}
                {filters.view === "trash" && m.trashPurgeAt !== null
                  ? <time dateTime={m.trashPurgeAt} title={fullDate(m.trashPurgeAt)}>purged {when(m.trashPurgeAt)}</time>
                  : <time dateTime={m.receivedAt} title={fullDate(m.receivedAt)}>{when(m.receivedAt)}</time>}
              </span>
            </a>
          </li>
        ))}
        <li ref={sentinel} class="sentinel" aria-hidden="true">{cursor !== null ? "Loading more…" : ""}</li>
      </ul>
      {!loading && items.length === 0 && (
        <p class="empty">{filters.q !== "" ? "No message matches this search." : filters.view === "trash" ? "The trash is empty." : "No mail here yet. Send something to one of your aliases."}</p>
      )}
      {help && <ShortcutHelp onClose={() => setHelp(false)} />}
    </section>
  )
}

export const ShortcutHelp = (props: { readonly onClose: () => void }) => (
  <div class="dialog" role="dialog" aria-modal="true" aria-labelledby="help-title">
    <div class="card">
      <h2 id="help-title">Keyboard shortcuts</h2>
      <dl class="shortcuts">
        <dt>j / k</dt><dd>next / previous message</dd>
        <dt>o or Enter</dt><dd>open</dd>
        <dt>u</dt><dd>mark read or unread (in a message: back to the list)</dd>
        <dt>e</dt><dd>archive</dd>
        <dt>#</dt><dd>delete</dd>
        <dt>s</dt><dd>star</dd>
        <dt>x</dt><dd>select</dd>
        <dt>/</dt><dd>search</dd>
        <dt>?</dt><dd>this help</dd>
      </dl>
      <button type="button" onClick={props.onClose}>Close</button>
    </div>
  </div>
)
