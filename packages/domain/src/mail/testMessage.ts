/**
 * Builds the deterministic RFC 5322 message of a JSON test-mail request (spec 2.19): the
 * same input, alias and time give the same bytes. Text and HTML parts are base64 (so any
 * UTF-8 survives transport rules), non-ASCII header words are RFC 2047 encoded.
 */
import { createHash } from "node:crypto"
import type { FieldReasons } from "../platform/Problem.ts"
import { parseMailbox } from "./Mailbox.ts"
import { TestMessageLimits } from "../messages/Message.ts"

export { parseMailbox }

export interface TestMessageRequest {
  readonly from: string
  readonly subject: string
  readonly text?: string | null | undefined
  readonly html?: string | null | undefined
  readonly otp?: string | null | undefined
  readonly attachments?: ReadonlyArray<{ readonly filename: string; readonly contentType?: string | undefined; readonly contentBase64: string }> | undefined
}

const base64Pattern = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/** Field rules that the schema cannot say: a body, base64 and the 1 MiB total. */
export const validateTestMessage = (input: TestMessageRequest): FieldReasons | undefined => {
  const fields: Record<string, string> = {}
  if ((input.text ?? null) === null && (input.html ?? null) === null) fields["text"] = "text_or_html_required"
  if (/[\r\n]/.test(input.subject)) fields["subject"] = "invalid_characters"
  let total = 0
  for (const [i, attachment] of (input.attachments ?? []).entries()) {
    if (!base64Pattern.test(attachment.contentBase64.replace(/\s+/g, ""))) {
      fields[`attachments.${i}.contentBase64`] = "invalid_base64"
      continue
    }
    total += Buffer.byteLength(attachment.contentBase64.replace(/\s+/g, ""), "base64")
    if (/[\r\n"\\/]/.test(attachment.filename)) fields[`attachments.${i}.filename`] = "invalid_characters"
  }
  if (total > TestMessageLimits.attachmentBytes) fields["attachments"] = "too_large"
  return Object.keys(fields).length === 0 ? undefined : fields
}

const needsEncoding = (value: string) => /[^\x20-\x7e]/.test(value)
const encodeWord = (value: string) => (needsEncoding(value) ? `=?UTF-8?B?${Buffer.from(value, "utf8").toString("base64")}?=` : value)

const base64Lines = (bytes: Buffer) => (bytes.toString("base64").match(/.{1,76}/g) ?? [""]).join("\r\n")

const formatMailbox = (mailbox: { name: string | null; address: string }) =>
  mailbox.name === null ? mailbox.address : `${needsEncoding(mailbox.name) ? encodeWord(mailbox.name) : `"${mailbox.name.replace(/["\\]/g, "\\$&")}"`} <${mailbox.address}>`

/** Puts the requested code in the body (the text part, else the HTML) unless it is there already. */
const bodiesWithOtp = (text: string | null, html: string | null, otp: string | null) => {
  if (otp === null || otp === "") return { text, html }
  if (text !== null) return { text: text.includes(otp) ? text : `${text}\n\nYour verification code: ${otp}`, html }
  return { text, html: html === null || html.includes(otp) ? html : `${html}<p>Your verification code: ${otp}</p>` }
}

export const buildTestMessage = (input: TestMessageRequest, envelope: { readonly to: string; readonly date: Date }): Uint8Array => {
  const mailbox = parseMailbox(input.from)!
  const { text, html: htmlWithOtp } = bodiesWithOtp(input.text ?? null, input.html ?? null, input.otp ?? null)
  const digest = createHash("sha256").update(JSON.stringify([input, envelope.to, envelope.date.toISOString()])).digest("hex")
  const boundary = (n: number) => `=_burnbox_${digest.slice(n * 8, n * 8 + 24)}`
  const textPart = text === null ? null : `Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n${base64Lines(Buffer.from(text, "utf8"))}\r\n`
  const htmlPart = htmlWithOtp === null ? null : `Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n${base64Lines(Buffer.from(htmlWithOtp, "utf8"))}\r\n`
  const bodies = [textPart, htmlPart].filter((p): p is string => p !== null)
  let body = bodies.length === 1
    ? bodies[0]!
    : `Content-Type: multipart/alternative; boundary="${boundary(0)}"\r\n\r\n${bodies.map((p) => `--${boundary(0)}\r\n${p}`).join("")}--${boundary(0)}--\r\n`
  const attachments = input.attachments ?? []
  if (attachments.length > 0) {
    const parts = attachments.map((a) => {
      const name = needsEncoding(a.filename) ? `filename*=UTF-8''${encodeURIComponent(a.filename)}` : `filename="${a.filename}"`
      return `Content-Type: ${a.contentType ?? "application/octet-stream"}\r\nContent-Disposition: attachment; ${name}\r\nContent-Transfer-Encoding: base64\r\n\r\n${base64Lines(Buffer.from(a.contentBase64.replace(/\s+/g, ""), "base64"))}\r\n`
    })
    body = `Content-Type: multipart/mixed; boundary="${boundary(1)}"\r\n\r\n--${boundary(1)}\r\n${body}${parts.map((p) => `--${boundary(1)}\r\n${p}`).join("")}--${boundary(1)}--\r\n`
  }
  const headers = [
    `From: ${formatMailbox(mailbox)}`,
    `To: ${envelope.to}`,
    `Subject: ${encodeWord(input.subject)}`,
    `Date: ${envelope.date.toUTCString().replace("GMT", "+0000")}`,
    `Message-ID: <test.${digest.slice(0, 32)}@burnbox.invalid>`,
    "MIME-Version: 1.0",
    "X-Burnbox-Source: test"
  ]
  return Buffer.from(`${headers.join("\r\n")}\r\n${body}`, "utf8")
}

/** A test-mail injection as it arrived: a JSON request, or raw `message/rfc822` bytes with the query's alias. */
export type TestMessageBody =
  | { readonly kind: "json"; readonly request: TestMessageRequest & { readonly aliasId: number } }
  | { readonly kind: "raw"; readonly bytes: Uint8Array; readonly aliasId: number | undefined }

/**
 * The alias a test-mail body is for, or the fields that refuse it (spec 2.19): a raw body needs
 * the query's aliasId and 1..15 MiB of bytes; a JSON body the rules of validateTestMessage.
 */
export const checkTestMessageBody = (body: TestMessageBody): { readonly aliasId: number } | { readonly refused: FieldReasons } => {
  if (body.kind === "json") {
    const fields = validateTestMessage(body.request)
    return fields === undefined ? { aliasId: body.request.aliasId } : { refused: fields }
  }
  if (body.aliasId === undefined) return { refused: { aliasId: "required" } }
  if (body.bytes.byteLength === 0) return { refused: { body: "empty" } }
  if (body.bytes.byteLength > TestMessageLimits.rawBytes) return { refused: { body: "too_large" } }
  return { aliasId: body.aliasId }
}
