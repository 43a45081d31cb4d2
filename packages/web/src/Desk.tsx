/**
 * A protected operator desk (spec 4.6, #34): for an alias with `canSend`, compose one plaintext
 * mail to one recipient, reply to a message of its mailbox (the form prefilled by
 * GET /desk-mail/{alias}/reply/{message}), and Sent, newest first.
 */
import { isBurnboxProblem } from "@burnbox/client"
import type { DeskSentMail } from "@burnbox/domain/desks/DeskMail"
import { useEffect, useState } from "preact/hooks"
import { call, describe, raw } from "./api.ts"
import { go } from "./route.ts"
import type { Session } from "./state.ts"

export const Desk = (props: { readonly session: Session; readonly aliasId: number; readonly replyTo?: number | undefined }) => {
  const alias = props.session.aliases.find((a) => a.id === props.aliasId)
  const [to, setTo] = useState("")
  const [subject, setSubject] = useState("")
  const [body, setBody] = useState("")
  const [messageId, setMessageId] = useState<number | null>(null)
  const [sent, setSent] = useState<ReadonlyArray<DeskSentMail>>([])
  const [error, setError] = useState<string | undefined>()
  const [notice, setNotice] = useState<string | undefined>()
  const [busy, setBusy] = useState(false)
  const loadSent = () => call(raw.desks.sent({ params: { aliasId: props.aliasId }, query: {} })).then((r) => setSent(r.items), (e) => setError(describe(e)))
  useEffect(() => void loadSent(), [props.aliasId])
  useEffect(() => {
    if (props.replyTo === undefined) return
    void call(raw.desks.reply({ params: { aliasId: props.aliasId, messageId: props.replyTo } })).then((reply) => {
      setTo(reply.to)
      setSubject(reply.subject)
      setMessageId(reply.message_id)
    }, (e) => setError(describe(e)))
  }, [props.aliasId, props.replyTo])
  if (alias === undefined || alias.canSend !== true) {
    return <section class="desk"><h1>Desk</h1><p class="error" role="alert">This alias is not a desk: it cannot send mail.</p></section>
  }
  const send = async (e: Event) => {
    e.preventDefault()
    setBusy(true)
    try {
      await call(raw.desks.send({ params: { aliasId: props.aliasId }, payload: { to, subject, body, message_id: messageId } }))
      setNotice(`Sent to ${to}.`)
      setError(undefined)
      setTo("")
      setSubject("")
      setBody("")
      setMessageId(null)
      if (props.replyTo !== undefined) go(`#/desk/${props.aliasId}`)
      await loadSent()
    } catch (err) {
      // 503: the relay refused or is down; the attempt is in Sent as failed (README: check Sent before retrying).
      setError(isBurnboxProblem(err) && err.status === 503 ? `${describe(err)} Not sent: it is listed in Sent as failed; check Sent before trying again.` : describe(err))
      setNotice(undefined)
      await loadSent()
    } finally {
      setBusy(false)
    }
  }
  return (
    <section class="desk" aria-labelledby="desk-title">
      <h1 id="desk-title">Desk {alias.address}</h1>
      <form class="card compose" onSubmit={send}>
        <h2>{messageId === null ? "New mail" : "Reply"}</h2>
        <label>To <input type="email" required maxLength={254} value={to} onInput={(e) => setTo(e.currentTarget.value)} /></label>
        <label>Subject <input required value={subject} onInput={(e) => setSubject(e.currentTarget.value)} /></label>
        <label>Message <textarea rows={10} value={body} onInput={(e) => setBody(e.currentTarget.value)} /></label>
        <p class="muted">Plain text, to one recipient, from {alias.address}.</p>
        <button type="submit" disabled={busy}>Send</button>
      </form>
      {error !== undefined && <p class="error" role="alert">{error}</p>}
      {notice !== undefined && <p class="notice" role="status">{notice}</p>}
      <section class="card" aria-labelledby="sent-title">
        <h2 id="sent-title">Sent</h2>
        {sent.length === 0 ? <p class="muted">Nothing sent yet.</p> : (
          <ul class="plain sent">
            {sent.map((m) => (
              <li key={m.id} data-testid="sent">
                <strong>{m.subject}</strong> to {m.recipient} · {m.status} · {m.sent_at}
              </li>
            ))}
          </ul>
        )}
      </section>
    </section>
  )
}
