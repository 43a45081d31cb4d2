/**
 * Settings, mail rules (decisions.md "Mail rules"): the account's rules in position order, a form
 * to create or edit one (match fields, up to five actions, stop, enabled, one alias or all), move
 * up/down (a PATCH of `position`), delete; the plan's `limit` and the 409 over it, in words.
 */
import type { Rule } from "@burnbox/client"
import { isBurnboxProblem } from "@burnbox/client"
import type { RuleAction, RuleMarkType, RuleMatch } from "@burnbox/domain/rules/Rule"
import { useEffect, useState } from "preact/hooks"
import { call, describe, raw } from "./api.ts"
import type { Session } from "./state.ts"

const marks: ReadonlyArray<RuleMarkType> = ["star", "pin", "archive", "mark_read", "trash"]
const textFields = ["from", "to", "subject", "body"] as const

interface Draft {
  readonly name: string
  readonly enabled: boolean
  readonly stop: boolean
  readonly aliasId: number
  readonly text: Readonly<Record<(typeof textFields)[number], string>>
  readonly hasAttachment: boolean
  readonly hasOtp: boolean
  readonly marks: ReadonlyArray<RuleMarkType>
  readonly tagId: number
}

const empty: Draft = {
  name: "", enabled: true, stop: false, aliasId: 0,
  text: { from: "", to: "", subject: "", body: "" }, hasAttachment: false, hasOtp: false, marks: [], tagId: 0
}

const draftOf = (rule: Rule): Draft => ({
  name: rule.name,
  enabled: rule.enabled,
  stop: rule.stop,
  aliasId: rule.aliasId ?? 0,
  text: { from: rule.match.from ?? "", to: rule.match.to ?? "", subject: rule.match.subject ?? "", body: rule.match.body ?? "" },
  hasAttachment: rule.match.hasAttachment === true,
  hasOtp: rule.match.hasOtp === true,
  marks: rule.actions.flatMap((a) => (a.type === "tag" ? [] : [a.type])),
  tagId: rule.actions.find((a) => a.type === "tag")?.tagId ?? 0
})

const matchOf = (draft: Draft): RuleMatch => {
  const match: { -readonly [K in keyof RuleMatch]: RuleMatch[K] } = {}
  for (const field of textFields) if (draft.text[field].trim() !== "") match[field] = draft.text[field].trim()
  if (draft.hasAttachment) match.hasAttachment = true
  if (draft.hasOtp) match.hasOtp = true
  return match
}

const actionsOf = (draft: Draft): Array<RuleAction> => [
  ...(draft.tagId > 0 ? [{ type: "tag" as const, tagId: draft.tagId }] : []),
  ...draft.marks.map((type) => ({ type }))
]

/** One line for a rule: what it matches and does. */
const summary = (rule: Rule, session: Session): string => {
  const match = Object.entries(rule.match).map(([k, v]) => (typeof v === "boolean" ? k : `${k} contains “${v}”`)).join(", ")
  const actions = rule.actions.map((a) => (a.type === "tag" ? `tag ${session.tags.find((t) => t.id === a.tagId)?.name ?? a.tagId}` : a.type.replace("_", " "))).join(", ")
  const alias = rule.aliasId === null ? "every mailbox" : session.aliases.find((a) => a.id === rule.aliasId)?.address ?? `alias ${rule.aliasId}`
  return `${match === "" ? "every message" : match} → ${actions} · ${alias}${rule.stop ? " · stop" : ""}`
}

const RuleForm = (props: { readonly session: Session; readonly initial: Draft; readonly submit: string; readonly onSave: (draft: Draft) => Promise<void>; readonly onCancel?: () => void }) => {
  const [draft, setDraft] = useState<Draft>(props.initial)
  const set = (patch: Partial<Draft>) => setDraft((old) => ({ ...old, ...patch }))
  return (
    <form class="rule-form" onSubmit={(e) => {
      e.preventDefault()
      void props.onSave(draft).then(() => setDraft(props.initial), () => undefined)
    }}>
      <div class="row">
        <label>Rule name <input required maxLength={80} value={draft.name} onInput={(e) => set({ name: e.currentTarget.value })} /></label>
        <label>Applies to
          <select value={draft.aliasId} onChange={(e) => set({ aliasId: Number(e.currentTarget.value) })}>
            <option value={0}>every mailbox</option>
            {props.session.aliases.filter((a) => !a.shared && a.status !== "burned").map((a) => <option key={a.id} value={a.id}>{a.address}</option>)}
          </select>
        </label>
      </div>
      <fieldset class="row">
        <legend>When the message (all that are filled)</legend>
        {textFields.map((field) => (
          <label key={field}>{field[0]?.toUpperCase()}{field.slice(1)} contains
            <input maxLength={200} value={draft.text[field]} onInput={(e) => set({ text: { ...draft.text, [field]: e.currentTarget.value } })} />
          </label>
        ))}
        <label class="check"><input type="checkbox" checked={draft.hasAttachment} onChange={(e) => set({ hasAttachment: e.currentTarget.checked })} /> has an attachment</label>
        <label class="check"><input type="checkbox" checked={draft.hasOtp} onChange={(e) => set({ hasOtp: e.currentTarget.checked })} /> has a code</label>
      </fieldset>
      <fieldset class="row">
        <legend>Then</legend>
        {marks.map((m) => (
          <label key={m} class="check">
            <input type="checkbox" checked={draft.marks.includes(m)} onChange={(e) => {
              const on = e.currentTarget.checked
              set({ marks: on ? [...draft.marks, m] : draft.marks.filter((x) => x !== m) })
            }} /> {m.replace("_", " ")}
          </label>
        ))}
        <label>Add tag
          <select value={draft.tagId} onChange={(e) => set({ tagId: Number(e.currentTarget.value) })}>
            <option value={0}>none</option>
            {props.session.tags.map((t) => <option key={t.id} value={t.id}>{t.name}</option>)}
          </select>
        </label>
      </fieldset>
      <div class="row">
        <label class="check"><input type="checkbox" checked={draft.stop} onChange={(e) => set({ stop: e.currentTarget.checked })} /> Stop after this rule</label>
        <label class="check"><input type="checkbox" checked={draft.enabled} onChange={(e) => set({ enabled: e.currentTarget.checked })} /> Enabled</label>
        <button type="submit">{props.submit}</button>
        {props.onCancel !== undefined && <button type="button" onClick={props.onCancel}>Cancel</button>}
      </div>
    </form>
  )
}

export const Rules = (props: { readonly session: Session }) => {
  const [rules, setRules] = useState<ReadonlyArray<Rule>>([])
  const [limit, setLimit] = useState<number | undefined>()
  const [editing, setEditing] = useState<number | undefined>()
  const [error, setError] = useState<string | undefined>()
  const load = () => call(raw.rules.list()).then((r) => {
    setRules([...r.items].sort((a, b) => a.position - b.position))
    setLimit(r.limit)
  }, (e) => setError(describe(e)))
  useEffect(() => void load(), [])
  const attempt = async (work: () => Promise<unknown>) => {
    try {
      await work()
      setError(undefined)
    } catch (e) {
      setError(isBurnboxProblem(e) && e.status === 409
        ? `You have reached your plan's limit of ${limit ?? 0} mail rules: delete one, or upgrade your plan, to add another.`
        : describe(e))
      throw e
    } finally {
      await load()
    }
  }
  const save = (id: number | undefined) => (draft: Draft) => {
    const actions = actionsOf(draft)
    if (actions.length === 0) {
      setError("Choose at least one action.")
      return Promise.reject(new Error("no action"))
    }
    const payload = { name: draft.name, enabled: draft.enabled, stop: draft.stop, aliasId: draft.aliasId === 0 ? null : draft.aliasId, match: matchOf(draft), actions }
    return attempt(async () => {
      if (id === undefined) await call(raw.rules.create({ payload }))
      else await call(raw.rules.update({ params: { id }, payload }))
      setEditing(undefined)
    })
  }
  // Positions may repeat (ties go by id): a move writes each rule's index in the new order.
  const move = (rule: Rule, by: -1 | 1) => {
    const index = rules.indexOf(rule)
    const other = rules[index + by]
    if (other === undefined) return
    const order = [...rules]
    order[index] = other
    order[index + by] = rule
    void attempt(async () => {
      for (const [position, r] of order.entries()) {
        if (r.position !== position) await call(raw.rules.update({ params: { id: r.id }, payload: { position } }))
      }
    }).catch(() => undefined)
  }
  if (limit === 0) {
    return (
      <section class="card" aria-labelledby="rules-title">
        <h2 id="rules-title">Mail rules</h2>
        <p class="muted" data-testid="rules-plan">Mail rules come with a paid plan. Upgrade to tag, star or archive mail as it arrives.</p>
      </section>
    )
  }
  return (
    <section class="card" aria-labelledby="rules-title">
      <h2 id="rules-title">Mail rules</h2>
      <p class="muted" data-testid="rules-limit">{rules.length} of {limit ?? "?"} rules used. They run in this order on each new message.</p>
      {error !== undefined && <p class="error" role="alert">{error}</p>}
      <ol class="plain rules">
        {rules.map((rule, index) => (
          <li key={rule.id} data-testid="rule">
            {editing === rule.id ? (
              <RuleForm session={props.session} initial={draftOf(rule)} submit="Save rule" onSave={save(rule.id)} onCancel={() => setEditing(undefined)} />
            ) : (
              <div class="row">
                <span><strong>{rule.name}</strong>{rule.enabled ? "" : " (disabled)"} <span class="muted">{summary(rule, props.session)}</span></span>
                <button type="button" aria-label={`Move ${rule.name} up`} disabled={index === 0} onClick={() => move(rule, -1)}>↑</button>
                <button type="button" aria-label={`Move ${rule.name} down`} disabled={index === rules.length - 1} onClick={() => move(rule, 1)}>↓</button>
                <button type="button" onClick={() => setEditing(rule.id)}>Edit {rule.name}</button>
                <button type="button" class="danger" onClick={() => confirm(`Delete rule ${rule.name}?`) && void attempt(() => call(raw.rules.remove({ params: { id: rule.id } }))).catch(() => undefined)}>Delete {rule.name}</button>
              </div>
            )}
          </li>
        ))}
      </ol>
      {editing === undefined && (
        <>
          <h3>New rule</h3>
          <RuleForm session={props.session} initial={empty} submit="Create rule" onSave={save(undefined)} />
        </>
      )}
    </section>
  )
}
