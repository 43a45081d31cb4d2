/**
 * Aliases: reserve five candidates on a domain, shuffle within the plan's allowance, claim one
 * with a label and note (and a self-destruct time where the plan allows), then pause, resume or
 * burn (confirmed: irreversible), timers and storage, the per-alias push toggle (#32) and, for
 * a protected desk (`canSend`), its compose page.
 */
import type { Alias } from "@burnbox/client"
import type { CandidateReservation } from "@burnbox/domain/aliases/Alias"
import { useState } from "preact/hooks"
import { call, describe, raw } from "./api.ts"
import { bytes, fullDate } from "./format.ts"
import { AliasPushToggle } from "./Push.tsx"
import { loadSession, type Session } from "./state.ts"

type Style = "words" | "pronounceable" | "numeric"

const Reserve = (props: { readonly session: Session }) => {
  const { session } = props
  const claimable = session.domains.filter((d) => d.claimable)
  const [domainId, setDomainId] = useState(claimable[0]?.id ?? 0)
  const [style, setStyle] = useState<Style>("words")
  const [reservation, setReservation] = useState<CandidateReservation | undefined>()
  const [choice, setChoice] = useState<number | undefined>()
  const [label, setLabel] = useState("")
  const [note, setNote] = useState("")
  const [selfDestruct, setSelfDestruct] = useState("")
  const [message, setMessage] = useState<string | undefined>()
  const [busy, setBusy] = useState(false)

  const reserve = async () => {
    setBusy(true)
    setMessage(undefined)
    try {
      if (reservation !== undefined) await call(raw.aliases.releaseCandidatesPost({ payload: { reservationToken: reservation.reservationToken } }))
      const next = await call(raw.aliases.reserve({ payload: { domainId, style } }))
      setReservation(next)
      setChoice(next.candidates[0]?.id)
    } catch (e) {
      setMessage(describe(e))
    } finally {
      setBusy(false)
    }
  }
  const claim = async (event: Event) => {
    event.preventDefault()
    if (reservation === undefined || choice === undefined) return
    setBusy(true)
    try {
      const alias = await call(raw.aliases.claim({
        payload: {
          aliasId: choice,
          reservationToken: reservation.reservationToken,
          label: label === "" ? null : label,
          note: note === "" ? null : note,
          selfDestructAt: selfDestruct === "" ? null : new Date(selfDestruct).toISOString()
        }
      }))
      setMessage(`Claimed ${alias.address}. Mail to it appears in the inbox.`)
      setReservation(undefined)
      setLabel("")
      setNote("")
      await loadSession()
    } catch (e) {
      setMessage(describe(e))
    } finally {
      setBusy(false)
    }
  }
  const plan = session.user.plan
  return (
    <section class="card" aria-labelledby="reserve-title">
      <h2 id="reserve-title">New alias</h2>
      <p class="muted">
        {session.user.activeAliasCount} of {plan.activeAliasCap} active aliases on the {plan.name} plan;
        {plan.candidateShufflesUnlimited ? " unlimited shuffles." : ` ${plan.candidateShufflesPerHour} shuffles an hour.`}
      </p>
      <div class="row">
        <label>
          Domain
          <select value={domainId} onChange={(e) => setDomainId(Number(e.currentTarget.value))}>
            {session.domains.map((d) => (
              <option key={d.id} value={d.id} disabled={!d.claimable}>{d.name}{d.upgradeRequired ? " (upgrade)" : ""}</option>
            ))}
          </select>
        </label>
        <label>
          Style
          <select value={style} onChange={(e) => setStyle(e.currentTarget.value as Style)}>
            <option value="words">words</option>
            <option value="pronounceable">pronounceable</option>
            <option value="numeric">numeric</option>
          </select>
        </label>
        <button type="button" class="primary" onClick={reserve} disabled={busy || claimable.length === 0}>
          {reservation === undefined ? "Show five addresses" : "Shuffle"}
        </button>
      </div>
      {reservation !== undefined && (
        <form onSubmit={claim}>
          <fieldset>
            <legend>Pick an address (held until {new Date(reservation.expiresAt).toLocaleTimeString()})</legend>
            {reservation.candidates.map((c) => (
              <label key={c.id} class="check candidate">
                <input type="radio" name="candidate" checked={choice === c.id} onChange={() => setChoice(c.id)} />
                <code>{c.address}</code>
              </label>
            ))}
          </fieldset>
          <div class="row">
            <label>Label <input value={label} maxLength={160} onInput={(e) => setLabel(e.currentTarget.value)} /></label>
            <label>Note <input value={note} onInput={(e) => setNote(e.currentTarget.value)} /></label>
            {plan.selfDestructTimers && (
              <label>Self-destruct at <input type="datetime-local" value={selfDestruct} onInput={(e) => setSelfDestruct(e.currentTarget.value)} /></label>
            )}
          </div>
          <button type="submit" class="primary" disabled={busy}>Claim</button>
        </form>
      )}
      {message !== undefined && <p role="status" class="notice">{message}</p>}
    </section>
  )
}

const AliasRow = (props: { readonly alias: Alias; readonly timers: boolean; readonly onError: (text: string) => void }) => {
  const { alias } = props
  const act = async (what: "pause" | "resume" | "burn") => {
    if (what === "burn" && !confirm(`Burn ${alias.address}? It stops receiving mail for good; this cannot be undone.`)) return
    try {
      if (what === "pause") await call(raw.aliases.pause({ params: { id: alias.id } }))
      else if (what === "resume") await call(raw.aliases.resume({ params: { id: alias.id } }))
      else await call(raw.aliases.burn({ params: { id: alias.id } }))
      await loadSession()
    } catch (e) {
      props.onError(describe(e))
    }
  }
  const timer = async (value: string) => {
    try {
      if (value === "") await call(raw.aliases.clearTimer({ params: { id: alias.id } }))
      else await call(raw.aliases.setTimer({ params: { id: alias.id }, payload: { selfDestructAt: new Date(value).toISOString() } }))
      await loadSession()
    } catch (e) {
      props.onError(describe(e))
    }
  }
  return (
    <li class={`alias-row status-${alias.status}`}>
      <div>
        <a href={`#/alias/${alias.id}`}><strong>{alias.address}</strong></a>
        {alias.unreadCount > 0 && <span class="badge" aria-label={`${alias.unreadCount} unread`}>{alias.unreadCount}</span>}
        <div class="muted">
          {alias.label ?? ""} {alias.shared ? `shared by ${alias.ownerHandle ?? "another account"} (${alias.role})` : ""}
          {" · "}{alias.status}{alias.planPaused ? " (plan limit)" : ""} · {alias.receivedCount} received · {bytes(alias.storageUsedBytes)}
          {alias.selfDestructAt !== null && <> · burns {fullDate(alias.selfDestructAt)}{alias.selfDestructSuspended ? " (suspended)" : ""}</>}
        </div>
      </div>
      <div class="row">
        {alias.status !== "burned" && <AliasPushToggle aliasId={alias.id} address={alias.address} enabled={alias.pushEnabled} onError={props.onError} />}
        {alias.canSend === true && alias.status !== "burned" && <a class="button" href={`#/desk/${alias.id}`}>Desk: write mail</a>}
        {props.timers && !alias.shared && alias.status !== "burned" && (
          <label>
            Timer
            <input type="datetime-local" aria-label={`Self-destruct time of ${alias.address}`} onChange={(e) => void timer(e.currentTarget.value)} />
          </label>
        )}
        {alias.status === "active" && !alias.shared && <button type="button" onClick={() => void act("pause")}>Pause</button>}
        {alias.status === "paused" && !alias.shared && <button type="button" onClick={() => void act("resume")}>Resume</button>}
        {alias.status !== "burned" && !alias.shared && <button type="button" class="danger" onClick={() => void act("burn")}>Burn</button>}
        {alias.shared && <button type="button" onClick={() => void call(raw.sharing.leave({ params: { id: alias.id } })).then(() => loadSession(), (e) => props.onError(describe(e)))}>Leave</button>}
      </div>
    </li>
  )
}

export const Aliases = (props: { readonly session: Session }) => {
  const [error, setError] = useState<string | undefined>()
  return (
    <section class="aliases" aria-labelledby="aliases-title">
      <h1 id="aliases-title">Aliases</h1>
      <Reserve session={props.session} />
      {error !== undefined && <p class="error" role="alert">{error}</p>}
      <ul class="alias-list">
        {props.session.aliases.map((a) => <AliasRow key={a.id} alias={a} timers={props.session.user.plan.selfDestructTimers} onError={setError} />)}
      </ul>
      {props.session.aliases.length === 0 && <p class="empty">No alias yet: show five addresses above and claim one.</p>}
    </section>
  )
}
