/**
 * A worked message as the pipeline stores it. The columns its store statement writes are
 * encoded to UTF-8 JSON where the message was worked (a mail worker thread, MailWork.ts), and
 * cross to the main thread as bytes it passes to PostgreSQL untouched: a message's text, HTML,
 * renderings and search words (megabytes for a large one) never become strings on the main
 * thread, whose garbage collector and JSON encoding they held for up to ~100 ms (bench:pipeline
 * with hostile mail). What the main thread reads of a message is its digest: the little that its
 * events need, and the attachments it writes.
 *
 * No Effect here: this module is loaded by the worker thread.
 */
import { pgText } from "../platform/PgText.ts"
import { type MessageAnalysis, SearchTextMaxChars } from "./analyze.ts"
import type { ParsedAttachment, ParsedMessage, ParsedSender } from "./parse.ts"
import { textPartPayload, TextPartPayloadMaxChars } from "./sanitize.ts"

/** What the pipeline's events need of a worked message. */
export interface MailDigest {
  readonly sender: ParsedSender
  readonly subject: string
  readonly snippet: string
  readonly otpCodes: ReadonlyArray<string>
  readonly verificationLinks: ReadonlyArray<string>
}

export interface WorkedMail {
  readonly digest: MailDigest
  readonly attachments: ReadonlyArray<ParsedAttachment>
  /**
   * The message's columns (`StoredColumns`) as one UTF-8 JSON object: the store statement's
   * recordset row, less the id and the authentication results the main thread adds.
   */
  readonly columns: Uint8Array
}

const text = (value: string | null) => (value === null ? null : pgText(value))

export { SearchTextMaxChars } from "./analyze.ts"

/**
 * The webhook `text_body` to store: none (NULL) when the stored text part makes the same one on
 * read (`textPartPayload`, the usual mail: a copy of up to 32 KiB of its text saved per message),
 * else the one made here (from the HTML, or from a text part too long to read at dispatch).
 */
export const storedWebhookTextBody = (textBody: string | null, made: string): string | null => {
  const stored = pgText(made)
  return textBody !== null && textBody.length <= TextPartPayloadMaxChars && textPartPayload(textBody) === stored ? null : stored
}

/** The columns of `messages` a worked message fills, as the store statement reads them. */
export const storedColumns = (parsed: ParsedMessage, analysis: MessageAnalysis) => {
  const textBody = text(parsed.text)
  return {
    sender_name: text(parsed.sender.name),
    sender_address: text(parsed.sender.address),
    subject: text(parsed.subject),
    snippet: text(analysis.snippet),
    text_body: textBody,
    // Not kept (#36): every reader of a row processed since migration 0018 has what it needs in
    // the renderings above and the text part; only older rows fall back to their HTML. The raw
    // bytes keep it.
    html_original: null,
    html_sanitized: text(analysis.sanitizedHtml),
    html_sanitized_remote: text(analysis.sanitizedHtmlWithRemoteImages),
    remote_image_count: analysis.remoteImageCount,
    webhook_text_body: storedWebhookTextBody(textBody, analysis.webhookTextBody),
    headers: parsed.headers,
    otp_codes: analysis.otpCodes,
    verification_links: analysis.verificationLinks,
    has_attachments: parsed.attachments.length > 0,
    sender_text: text(`${parsed.sender.name ?? ""} ${parsed.sender.address}`),
    search_text: text(analysis.searchText.slice(0, SearchTextMaxChars))
  }
}
export type StoredColumns = ReturnType<typeof storedColumns>

/** The message as the store takes it: its digest, its attachments, its columns encoded. */
export const workedMail = (parsed: ParsedMessage, analysis: MessageAnalysis): WorkedMail => ({
  digest: {
    sender: parsed.sender,
    subject: parsed.subject,
    snippet: analysis.snippet,
    otpCodes: analysis.otpCodes,
    verificationLinks: analysis.verificationLinks
  },
  attachments: parsed.attachments,
  columns: jsonBytes(storedColumns(parsed, analysis))
})

// -- the columns as UTF-8 JSON, long strings written straight into the bytes -------------------

const utf8 = new TextEncoder()
/** A string at least this long is written by `writeJsonString`; shorter values by JSON.stringify. */
const LongString = 64 * 1024
const hexDigits = "0123456789abcdef"
/** The JSON escape of a byte below 0x20 (JSON.stringify's: the short forms, else \u00xx). */
const shortEscapes: Record<number, number> = { 0x08: 0x62, 0x09: 0x74, 0x0a: 0x6e, 0x0c: 0x66, 0x0d: 0x72 }

/** UTF-8 bytes of a well-formed `value` and the bytes its JSON escapes add. */
const jsonStringSize = (value: string): { readonly bytes: number; readonly extra: number } => {
  let bytes = 0
  let extra = 0
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i)
    if (c < 0x80) {
      bytes++
      if (c === 0x22 || c === 0x5c) extra++
      else if (c < 0x20) extra += c in shortEscapes ? 1 : 5
    } else if (c < 0x800) bytes += 2
    else if (c >= 0xd800 && c <= 0xdbff) {
      bytes += 4
      i++
    } else bytes += 3
  }
  return { bytes, extra }
}

/**
 * Writes `value` as a JSON string (quotes included) at `at` of `out`, exactly as JSON.stringify
 * writes a well-formed string, encoded as UTF-8: the bytes go to the end of its room and are
 * escaped forwards in place (what is written never passes what is still to be read).
 */
const writeJsonString = (value: string, size: { readonly bytes: number; readonly extra: number }, out: Uint8Array, at: number): number => {
  out[at] = 0x22
  const start = at + 1
  let read = start + size.extra
  utf8.encodeInto(value, out.subarray(read, read + size.bytes))
  const end = read + size.bytes
  let write = start
  if (size.extra === 0) write = end
  else {
    for (; read < end; read++) {
      const b = out[read]!
      if (b === 0x22 || b === 0x5c) {
        out[write++] = 0x5c
        out[write++] = b
      } else if (b < 0x20) {
        out[write++] = 0x5c
        const short = shortEscapes[b]
        if (short !== undefined) out[write++] = short
        else {
          out[write++] = 0x75
          out[write++] = 0x30
          out[write++] = 0x30
          out[write++] = hexDigits.charCodeAt(b >> 4)
          out[write++] = hexDigits.charCodeAt(b & 15)
        }
      } else out[write++] = b
    }
  }
  out[write] = 0x22
  return write + 1
}

/**
 * `JSON.stringify(columns)` as UTF-8 bytes, byte for byte, without the whole JSON as a string
 * first: a 15 MB text's JSON string and its encoding cost ~65 MiB in the mail thread, this
 * one array of the result's size. Long strings are written into it directly; the rest is small.
 */
export const jsonBytes = (columns: Record<string, unknown>): Uint8Array => {
  const parts: Array<Uint8Array | { readonly value: string; readonly size: { readonly bytes: number; readonly extra: number } }> = []
  let total = 0
  let first = true
  for (const [key, value] of Object.entries(columns)) {
    if (value === undefined) continue
    const head = utf8.encode(`${first ? "{" : ","}${JSON.stringify(key)}:`)
    first = false
    parts.push(head)
    total += head.byteLength
    if (typeof value === "string" && value.length >= LongString && value.isWellFormed()) {
      const size = jsonStringSize(value)
      parts.push({ value, size })
      total += size.bytes + size.extra + 2
    } else {
      const small = utf8.encode(JSON.stringify(value))
      parts.push(small)
      total += small.byteLength
    }
  }
  const tail = utf8.encode(first ? "{}" : "}")
  const out = new Uint8Array(total + tail.byteLength)
  let at = 0
  for (const part of parts) {
    if (part instanceof Uint8Array) {
      out.set(part, at)
      at += part.byteLength
    } else at = writeJsonString(part.value, part.size, out, at)
  }
  out.set(tail, at)
  return out
}
