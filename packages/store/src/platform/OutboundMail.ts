/**
 * The one way mail leaves burnbox: nodemailer over BURNBOX_OUTBOUND_SMTP_URL (`smtp://user:pass@relay:587`
 * or `smtps://...`), for protected-desk sends. Without the setting nothing can be sent (`configured` false).
 */
import { randomUUID } from "node:crypto"
import { Context, Data, Effect, Layer, Option, Redacted } from "effect"
import nodemailer from "nodemailer"
import { BurnboxConfig } from "./Config.ts"

/** One plaintext message to one recipient. */
export interface OutboundMessage {
  readonly from: string
  readonly to: string
  readonly subject: string
  readonly text: string
  /** The Message-ID of the message this replies to, and the References chain ending with it. */
  readonly inReplyTo?: string | undefined
  readonly references?: string | undefined
}

/** The relay could not be reached, or refused the message; `detail` names why, never the credentials. */
export class OutboundMailFailed extends Data.TaggedError("OutboundMailFailed")<{ readonly detail: string }> {}

/** How long a send may wait on the relay at each step. */
const timeouts = { connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 30_000 }

/** A relay on this machine: its traffic never leaves it. */
const isLoopback = (url: string): boolean => {
  try {
    const host = new URL(url).hostname.replace(/^\[|\]$/g, "")
    return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/u.test(host)
  } catch {
    return false
  }
}

/**
 * The transport's options: the URL (nodemailer reads `smtp://`, `smtps://`, credentials and query
 * options such as `?tls.rejectUnauthorized=false` or `?requireTLS=true` from it; they win over the
 * rest), the timeouts, and for a relay on this machine no certificate check of its STARTTLS (a
 * self-signed certificate of a local relay protects nothing there, and would refuse every send).
 */
export const transportOptions = (url: string) => ({
  url,
  ...timeouts,
  ...(isLoopback(url) ? { tls: { rejectUnauthorized: false } } : {})
})

/** What a relay failure is recorded as: the error code and the relay's answer, without the URL. */
const failureDetail = (error: unknown, url: string): string => {
  const e = error as { code?: unknown; response?: unknown; message?: unknown }
  // The relay's answer starts with its reply code.
  const parts = [e.code, typeof e.response === "string" ? e.response : e.message]
    .filter((p) => p !== undefined && p !== null && String(p).length > 0)
    .map(String)
  return parts.join(" ").split(url).join("[relay]").slice(0, 500) || "relay failure"
}

export class OutboundMail extends Context.Service<OutboundMail, {
  /** Whether a relay is configured at all. */
  readonly configured: boolean
  /** Hands one message to the relay; answers its Message-ID once the relay accepted it. */
  readonly send: (message: OutboundMessage) => Effect.Effect<{ readonly messageId: string }, OutboundMailFailed>
}>()("burnbox/OutboundMail") {
  /** Scoped: the transport closes with the scope that built it. */
  static readonly layer = Layer.effect(OutboundMail, Effect.gen(function*() {
    const config = yield* BurnboxConfig
    if (Option.isNone(config.outboundSmtpUrl)) {
      return OutboundMail.of({
        configured: false,
        send: () => Effect.fail(new OutboundMailFailed({ detail: "BURNBOX_OUTBOUND_SMTP_URL is not set" }))
      })
    }
    const url = Redacted.value(config.outboundSmtpUrl.value)
    const transport = yield* Effect.acquireRelease(
      Effect.sync(() => nodemailer.createTransport(transportOptions(url))),
      (opened) => Effect.sync(() => opened.close())
    )
    const send = Effect.fn("OutboundMail.send")(function*(message: OutboundMessage) {
      const domain = message.from.slice(message.from.lastIndexOf("@") + 1)
      const messageId = `<${randomUUID()}@${domain}>`
      yield* Effect.tryPromise({
        try: () =>
          transport.sendMail({
            from: message.from,
            to: message.to,
            envelope: { from: message.from, to: [message.to] },
            subject: message.subject,
            text: message.text,
            messageId,
            ...(message.inReplyTo === undefined ? {} : { inReplyTo: message.inReplyTo }),
            ...(message.references === undefined ? {} : { references: message.references }),
            disableFileAccess: true,
            disableUrlAccess: true
          }),
        catch: (error) => new OutboundMailFailed({ detail: failureDetail(error, url) })
      })
      return { messageId }
    })
    return OutboundMail.of({ configured: true, send })
  }))
}
