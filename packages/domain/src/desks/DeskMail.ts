/**
 * Spec 2.22 and 4.6, decisions.md "Protected operator desks": what a protected desk sends and
 * keeps. A desk is an alias an operator granted (`burnbox admin desk grant`); its owner composes
 * plaintext mail to one recipient from a browser session, and reads what it sent (Sent).
 */
import { Schema } from "effect"
import { Id, IdFromPath, intFromDigits } from "../platform/Common.ts"

/** Spec 8: the desk limits. */
export const DeskLimits = {
  subjectBytes: 998,
  bodyBytes: 65_536,
  sendsPerAccountPerHour: 10,
  sendsPerHour: 60,
  sentPageSize: 50,
  sentRetentionDays: 90
} as const

/** Bytes of `text` as UTF-8 (what the limits count); a lone surrogate counts as the 3 bytes of U+FFFD. */
export const utf8Bytes = (text: string): number => {
  let bytes = 0
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i)
    if (unit < 0x80) bytes += 1
    else if (unit < 0x800) bytes += 2
    else if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      bytes += 4
      i++
    } else bytes += 3
  }
  return bytes
}

/**
 * One recipient, as an SMTP envelope and a `To:` header take it unquoted: a dot-atom local part
 * (no comma, semicolon, angle bracket, quote or space, so it cannot name a second address or a
 * display name) at a domain of labels. At most 254 characters.
 */
export const isSingleRecipient = (to: string): boolean =>
  to.length <= 254 &&
  /^[\p{L}\p{N}!#$%&'*+/=?^_`{|}~-]+(?:\.[\p{L}\p{N}!#$%&'*+/=?^_`{|}~-]+)*@[\p{L}\p{N}](?:[\p{L}\p{N}-]*[\p{L}\p{N}])?(?:\.[\p{L}\p{N}](?:[\p{L}\p{N}-]*[\p{L}\p{N}])?)+$/u.test(to)

const Recipient = Schema.String.check(Schema.makeFilter(isSingleRecipient, { message: "invalid_recipient" }))
  .annotate({ format: "email", description: "One recipient address, without a display name." })

const Subject = Schema.String.check(
  Schema.makeFilter((s: string) => !/[\r\n]/u.test(s), { message: "line_break_not_allowed" }),
  Schema.makeFilter((s: string) => utf8Bytes(s) <= DeskLimits.subjectBytes, { message: "too_long" })
).annotate({ description: `UTF-8, at most ${DeskLimits.subjectBytes} bytes, no CR or LF.` })

const Body = Schema.String.check(
  Schema.makeFilter((s: string) => utf8Bytes(s) <= DeskLimits.bodyBytes, { message: "too_long" })
).annotate({ description: `Plain text, UTF-8, at most ${DeskLimits.bodyBytes} bytes.` })

/** POST /desk-mail/{aliasId}: one plaintext message; extra fields (attachments, cc...) are refused by the API's parse options. */
export const SendDeskMail = Schema.Struct({
  to: Recipient,
  subject: Subject,
  body: Body,
  message_id: Schema.optionalKey(Schema.NullOr(Id).annotate({ description: "The message of this desk's mailbox this replies to, or null." }))
}).annotate({ identifier: "SendDeskMail" })
export type SendDeskMail = typeof SendDeskMail.Type

export const DeskSentStatus = Schema.Literals(["pending", "failed", "sent"])
export type DeskSentStatus = typeof DeskSentStatus.Type

/** Spec 2.22: a Sent record. */
export const DeskSentMail = Schema.Struct({
  id: Id,
  recipient: Schema.String.annotate({ format: "email" }),
  subject: Schema.String,
  body: Schema.String,
  status: DeskSentStatus,
  sent_at: Schema.String
}).annotate({ identifier: "DeskSentMail" })
export type DeskSentMail = typeof DeskSentMail.Type

export const DeskSentPage = Schema.Struct({ items: Schema.Array(DeskSentMail) }).annotate({ identifier: "DeskSentPage" })

/** GET /desk-mail/{aliasId}/reply/{messageId}: the reply form, prefilled. */
export const DeskReply = Schema.Struct({
  to: Schema.String.annotate({ format: "email" }),
  subject: Schema.String,
  message_id: Id
}).annotate({ identifier: "DeskReply" })
export type DeskReply = typeof DeskReply.Type

export const DeskParams = { aliasId: IdFromPath }
export const DeskReplyParams = { aliasId: IdFromPath, messageId: IdFromPath }
export const DeskSentQuery = {
  page: Schema.optionalKey(intFromDigits(Id, "Page of the Sent list, 1 first (newest), 50 records a page."))
}

/**
 * The reply to a received message: to its Reply-To address when it names one plain address, else
 * its sender; the subject with one "Re: " in front (none added twice), kept within the limits.
 * Undefined when the message has no address a reply could go to.
 */
export const replyPrefill = (message: {
  readonly senderAddress: string
  readonly replyTo: string | undefined
  readonly subject: string
}): { readonly to: string; readonly subject: string } | undefined => {
  const replyTo = message.replyTo === undefined ? undefined : plainAddress(message.replyTo)
  const to = replyTo ?? (isSingleRecipient(message.senderAddress) && !isReserved(message.senderAddress) ? message.senderAddress : undefined)
  if (to === undefined) return undefined
  const original = message.subject.replace(/[\r\n]+/gu, " ").trim()
  let subject = /^re:/iu.test(original) ? original : `Re: ${original}`.trimEnd()
  while (utf8Bytes(subject) > DeskLimits.subjectBytes) subject = Array.from(subject).slice(0, -1).join("")
  return { to, subject }
}

/** `a@b.c` or `Name <a@b.c>`, one address only. */
const plainAddress = (header: string): string | undefined => {
  const angle = /^[^<>,]*<([^<>]+)>\s*$/u.exec(header.trim())
  const candidate = angle?.[1]?.trim() ?? header.trim()
  return isSingleRecipient(candidate) && !isReserved(candidate) ? candidate : undefined
}

/** An address under `.invalid` (RFC 2606), as the parser writes a sender it could not read: nothing to reply to. */
const isReserved = (address: string): boolean => /\.invalid$/iu.test(address)

/** The `References` of a reply: the original's references, then its Message-ID (RFC 5322 3.6.4). */
export const replyReferences = (original: { readonly messageId: string; readonly references: string | undefined }): string =>
  [...(original.references?.split(/\s+/u).filter((r) => r.length > 0) ?? []), original.messageId].join(" ")

/**
 * Spec 8, decisions.md: 10 send attempts per account per hour and 60 per hour across the service.
 * `recent` holds the service's attempts of the last hour, newest first (at most 60 are needed).
 * Answers what refuses the next attempt and in how many seconds one frees, or undefined.
 */
export const deskSendRefusal = (input: {
  readonly now: Date
  readonly accountId: number
  readonly recent: ReadonlyArray<{ readonly accountId: number; readonly at: Date }>
}): { readonly scope: "account" | "service"; readonly limit: number; readonly retryAfter: number } | undefined => {
  const hour = 3_600_000
  const inWindow = input.recent.filter((r) => input.now.getTime() - r.at.getTime() < hour)
  const freesAt = (oldestCounted: Date) => Math.max(1, Math.ceil((oldestCounted.getTime() + hour - input.now.getTime()) / 1000))
  const own = inWindow.filter((r) => r.accountId === input.accountId)
  const ownLimit = DeskLimits.sendsPerAccountPerHour
  if (own.length >= ownLimit) return { scope: "account", limit: ownLimit, retryAfter: freesAt(own[ownLimit - 1]!.at) }
  const allLimit = DeskLimits.sendsPerHour
  if (inWindow.length >= allLimit) return { scope: "service", limit: allLimit, retryAfter: freesAt(inWindow[allLimit - 1]!.at) }
  return undefined
}
