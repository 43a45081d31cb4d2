/**
 * Settings, exports (#33): request a ZIP of every mailbox or of one, follow its progress (the
 * `Export-Progress` header, through the client's `exports.get`), download it when ready, and the
 * list of past exports with their states. Without the plan's developer access the API answers 403
 * and the section shows the plan hint instead.
 */
import { type ExportProgress, isBurnboxProblem } from "@burnbox/client"
import type { ExportListItem } from "@burnbox/domain/exports/Export"
import { useEffect, useState } from "preact/hooks"
import { apiUrl, call, client, describe, raw } from "./api.ts"
import type { Session } from "./state.ts"

type Item = ExportListItem

const unfinished = (item: Item) => item.status === "pending" || item.status === "processing"

export const Exports = (props: { readonly session: Session }) => {
  const own = props.session.aliases.filter((a) => !a.shared && a.status !== "burned")
  const [items, setItems] = useState<ReadonlyArray<Item>>([])
  const [progress, setProgress] = useState<ReadonlyMap<number, ExportProgress>>(new Map())
  const [downloads, setDownloads] = useState<ReadonlyMap<number, string>>(new Map())
  const [aliasId, setAliasId] = useState(0)
  const [error, setError] = useState<string | undefined>()
  const [planHint, setPlanHint] = useState(false)
  const load = () => call(raw.exports.list()).then((r) => {
    setItems(r.items)
    setPlanHint(false)
  }, (e) => {
    // 403: the plan has no exports.
    if (isBurnboxProblem(e) && e.status === 403) setPlanHint(true)
    else setError(describe(e))
  })
  useEffect(() => void load(), [])
  // While one is under way, read its state and progress each second.
  const pending = items.filter(unfinished).map((i) => i.id)
  useEffect(() => {
    if (pending.length === 0) return
    const timer = setInterval(() => {
      void Promise.all(pending.map(async (id) => {
        const state = await client.exports.get(id)
        setProgress((old) => new Map(old).set(id, state.progress))
        if (state.export.downloadUrl !== null) setDownloads((old) => new Map(old).set(id, state.export.downloadUrl ?? ""))
        return state.export.status
      })).then((statuses) => {
        if (statuses.some((s) => s !== "pending" && s !== "processing")) void load()
      }, (e) => setError(describe(e)))
    }, 1000)
    return () => clearInterval(timer)
  }, [pending.join(",")])
  // A ready export's download URL comes with GET /exports/{id}.
  useEffect(() => {
    for (const item of items) {
      if (item.status === "ready" && !downloads.has(item.id)) {
        void client.exports.get(item.id).then((state) => {
          if (state.export.downloadUrl !== null) setDownloads((old) => new Map(old).set(item.id, state.export.downloadUrl ?? ""))
        }, () => undefined)
      }
    }
  }, [items])
  const request = async (e: Event) => {
    e.preventDefault()
    try {
      await call(raw.exports.create({ payload: aliasId === 0 ? null : { aliasId } }))
      setError(undefined)
      await load()
    } catch (err) {
      if (isBurnboxProblem(err) && err.status === 403) setPlanHint(true)
      else setError(describe(err))
    }
  }
  if (planHint) {
    return (
      <section class="card" aria-labelledby="exports-title">
        <h2 id="exports-title">Exports</h2>
        <p class="muted" data-testid="exports-plan">Exports come with the Pro plan. Upgrade to download your mailboxes as a ZIP of .eml files.</p>
      </section>
    )
  }
  return (
    <section class="card" aria-labelledby="exports-title">
      <h2 id="exports-title">Exports</h2>
      <form class="row" onSubmit={request}>
        <label>Mailboxes to export
          <select value={aliasId} onChange={(e) => setAliasId(Number(e.currentTarget.value))}>
            <option value={0}>all mailboxes</option>
            {own.map((a) => <option key={a.id} value={a.id}>{a.address}</option>)}
          </select>
        </label>
        <button type="submit">Request export</button>
      </form>
      {error !== undefined && <p class="error" role="alert">{error}</p>}
      <ul class="plain exports">
        {items.map((item) => {
          const p = progress.get(item.id)
          const url = downloads.get(item.id)
          return (
            <li key={item.id} class="row" data-testid="export">
              <span>
                #{item.id} {item.alias ?? "all mailboxes"} · <span data-testid="export-status">{item.status}</span>
                {item.error !== null ? ` · ${item.error}` : ""}
                {item.expires_at !== null && item.status === "ready" ? ` · until ${item.expires_at}` : ""}
              </span>
              {unfinished(item) && (
                <progress aria-label={`Export ${item.id} progress`} max={p?.total ?? undefined} value={p?.done ?? 0}>
                  {p === undefined ? "" : `${p.done} of ${p.total ?? "?"}`}
                </progress>
              )}
              {item.status === "ready" && url !== undefined && <a class="button" href={apiUrl(url)} download>Download export {item.id}</a>}
            </li>
          )
        })}
      </ul>
      {items.length === 0 && <p class="muted">No exports yet.</p>}
    </section>
  )
}
