/**
 * One message: the codes and the best verification link first (one click copies), then the
 * sanitized HTML in a sandboxed iframe (no allow-scripts) behind the remote-images bar, or the
 * text, the headers, SPF/DKIM/DMARC verdicts, the raw download and the attachments (dangerous
 * ones only after a confirmation).
 */
import type { MessageDetail } from "@burnbox/client"
import { useEffect, useState } from "preact/hooks"
import { apiUrl, call, describe, raw } from "./api.ts"
import { bytes, copy, fullDate } from "./format.ts"
import { outcomeText } from "./Inbox.tsx"
import { liveTick } from "./live.ts"
import { go } from "./route.ts"
import { useSignal } from "./signal.ts"
import { refreshSession, session } from "./state.ts"

type Tab = "html" | "text" | "headers"

const CopyButton = (props: { readonly text: string; readonly label: string }) => {
  const [done, setDone] = useState<boolean | undefined>()
  return (
    <button type="button" class="copy" onClick={async () => setDone(await copy(props.text))}>
      {done === true ? "Copied" : done === false ? "Copy failed: select it" : props.label}
    </button>
  )
}

export const MessageView = (props: { readonly id: number }) => {
  const [message, setMessage] = useState<MessageDetail | undefined>()
  const [error, setError] = useState<string | undefined>()
  const [notice, setNotice] = useState<string | undefined>()
  const [tab, setTab] = useState<Tab>("html")
  const [remote, setRemote] = useState(false)
  const tick = useSignal(liveTick)
  const current = useSignal(session)

  const load = async () => {
    try {
      const detail = await call(raw.messages.get({ params: { id: props.id }, query: {} }))
      setMessage(detail)
      setRemote(detail.remoteImages?.alwaysLoadFromSender ?? false)
      if (detail.htmlUrl === null) setTab("text")
      if (!detail.isRead) {
        await call(raw.messages.updateState({ params: { id: props.id }, payload: { isRead: true } }))
        refreshSession()
      }
    } catch (e) {
      setError(describe(e))
    }
  }
  useEffect(() => void load(), [props.id])
  useEffect(() => {
    if (tick > 0) void call(raw.messages.get({ params: { id: props.id }, query: {} })).then(setMessage, () => {})
  }, [tick])

  const patch = async (payload: { starred?: boolean; archived?: boolean; isRead?: boolean; pinned?: boolean }) => {
    try {
      const state = await call(raw.messages.updateState({ params: { id: props.id }, payload }))
      setMessage((m) => (m === undefined ? m : { ...m, ...state, unread: !state.isRead }))
      if (payload.archived === true) go("#/inbox")
      refreshSession()
    } catch (e) {
      setNotice(describe(e))
    }
  }
  const remove = async () => {
    try {
      const result = await call(raw.messages.bulk({ payload: { ids: [props.id], action: message?.trashed === true ? "delete_forever" : "delete" } }))
      setNotice(outcomeText(result))
      go("#/inbox")
    } catch (e) {
      setNotice(describe(e))
    }
  }
  const alwaysLoad = async () => {
    try {
      await call(raw.messages.remoteImagePreference({ params: { id: props.id }, payload: { alwaysLoad: true } }))
      setRemote(true)
    } catch (e) {
      setNotice(describe(e))
    }
  }

  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      const target = event.target as HTMLElement | null
      if (target !== null && (target.tagName === "INPUT" || target.tagName === "TEXTAREA")) return
      if (event.ctrlKey || event.metaKey || event.altKey || message === undefined) return
      if (event.key === "u" || event.key === "Escape") go("#/inbox")
      else if (event.key === "e") void patch({ archived: !message.archived })
      else if (event.key === "s") void patch({ starred: !message.starred })
      else if (event.key === "#") void remove()
    }
    addEventListener("keydown", onKey)
    return () => removeEventListener("keydown", onKey)
  }, [message])

  if (error !== undefined) return <section class="message"><p class="error" role="alert">{error}</p><a href="#/inbox">Back to the inbox</a></section>
  if (message === undefined) return <section class="message"><p>Loading…</p></section>
  const link = message.verificationLinks[0]
  // A protected desk's mail can be answered from the desk (#34).
  const desk = current?.aliases.some((a) => a.id === message.alias.id && a.canSend === true) === true
  const htmlSrc = message.remoteImages === null || message.htmlUrl === null ? undefined : apiUrl(remote ? message.remoteImages.loadUrl : message.remoteImages.blockedUrl)

  return (
    <article class="message" aria-labelledby="message-subject">
      <div class="message-actions">
        <a href="#/inbox" class="button">← Inbox</a>
        <button type="button" aria-pressed={message.starred} onClick={() => void patch({ starred: !message.starred })}>{message.starred ? "★ Starred" : "☆ Star"}</button>
        <button type="button" onClick={() => void patch({ archived: !message.archived })}>{message.archived ? "Unarchive" : "Archive"}</button>
        <button type="button" onClick={() => void patch({ isRead: false }).then(() => go("#/inbox"))}>Mark unread</button>
        {message.trashed
          ? <button type="button" onClick={() => void call(raw.messages.restore({ params: { id: props.id } })).then(() => load(), (e) => setNotice(describe(e)))}>Restore</button>
          : null}
        <button type="button" class="danger" onClick={() => void remove()}>{message.trashed ? "Delete forever" : "Delete"}</button>
        {desk && <a class="button" href={`#/desk/${message.alias.id}/reply/${message.id}`}>Reply</a>}
      </div>
      {notice !== undefined && <p class="notice" role="status">{notice}</p>}
      <h1 id="message-subject">{message.subject === "" ? "(no subject)" : message.subject}</h1>
      <p class="from">
        From <strong>{message.sender.name ?? ""}</strong> &lt;{message.sender.address}&gt; to {message.alias.address}
        {" · "}<time dateTime={message.receivedAt}>{fullDate(message.receivedAt)}</time>
      </p>

      {(message.otpCodes.length > 0 || link !== undefined) && (
        <section class="codes" aria-label="Codes and verification link">
          {message.otpCodes.map((code, i) => (
            <div key={code} class={i === 0 ? "code first" : "code"}>
              <span class="code-value" data-testid="otp">{code}</span>
              <CopyButton text={code} label="Copy code" />
            </div>
          ))}
          {link !== undefined && (
            <div class="code link">
              <a href={link} target="_blank" rel="noopener noreferrer nofollow" class="verify">Open verification link</a>
              <CopyButton text={link} label="Copy link" />
            </div>
          )}
          {message.verificationLinks.slice(1).map((other) => (
            <p key={other} class="other-link"><a href={other} target="_blank" rel="noopener noreferrer nofollow">{other}</a></p>
          ))}
        </section>
      )}

      <p class="auth-verdicts" aria-label="Sender authentication">
        {(["spf", "dkim", "dmarc"] as const).map((k) => (
          <span key={k} class={`verdict ${message.auth[k] ?? "none"}`}>{k.toUpperCase()}: {message.auth[k] ?? "none"}</span>
        ))}
        {message.spamScore !== null && <span class="verdict">spam score {message.spamScore}</span>}
      </p>

      <div class="tabs">
      <div role="tablist" aria-label="Message body" class="tabs">
        {message.htmlUrl !== null && <button type="button" role="tab" aria-selected={tab === "html"} onClick={() => setTab("html")}>HTML</button>}
        <button type="button" role="tab" aria-selected={tab === "text"} onClick={() => setTab("text")}>Text</button>
        <button type="button" role="tab" aria-selected={tab === "headers"} onClick={() => setTab("headers")}>Headers</button>
      </div>
        <a class="button" href={apiUrl(message.rawUrl)} download={`message-${message.id}.eml`}>Download raw</a>
      </div>

      {tab === "html" && htmlSrc !== undefined && (
        <>
          {!remote && (
            <p class="remote-bar" role="status">
              Remote images are blocked to keep trackers out.
              <button type="button" onClick={() => setRemote(true)}>Load once</button>
              <button type="button" onClick={() => void alwaysLoad()}>Always from this sender</button>
            </p>
          )}
          <iframe class="html-body" title="Message body (HTML)" sandbox="" src={htmlSrc} referrerpolicy="no-referrer" />
        </>
      )}
      {tab === "text" && <pre class="text-body">{message.textBody ?? "(no text part)"}</pre>}
      {tab === "headers" && (
        <table class="headers">
          <tbody>
            {Object.entries(message.headers).map(([name, value]) => (
              <tr key={name}><th scope="row">{name}</th><td>{typeof value === "string" ? value : JSON.stringify(value)}</td></tr>
            ))}
          </tbody>
        </table>
      )}

      {message.attachments.length > 0 && (
        <section class="attachments" aria-label="Attachments">
          <h2>Attachments</h2>
          <ul>
            {message.attachments.map((a) => (
              <li key={a.id}>
                <a
                  href={apiUrl(a.dangerous ? `${a.downloadUrl}?confirm=1` : a.downloadUrl)}
                  download={a.filename}
                  onClick={(e) => {
                    if (a.dangerous && !confirm(`${a.filename} could harm your computer (${a.mimeType}). Download it anyway?`)) e.preventDefault()
                  }}
                >
                  {a.filename}
                </a>
                {" "}<span class="muted">{a.mimeType} · {bytes(a.sizeBytes)}</span>
                {a.dangerous && <strong class="warn"> dangerous file type</strong>}
                {a.previewUrl !== null && <> · <a href={apiUrl(a.previewUrl)} target="_blank" rel="noopener">Preview</a></>}
              </li>
            ))}
          </ul>
        </section>
      )}
    </article>
  )
}
