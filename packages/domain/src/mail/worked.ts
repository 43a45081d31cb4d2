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
import type { MessageAnalysis } from "./analyze.ts"
import type { ParsedAttachment, ParsedMessage, ParsedSender } from "./parse.ts"

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

/** The search words kept of a message, at most. */
export const SearchTextMaxChars = 500_000

/** The columns of `messages` a worked message fills, as the store statement reads them. */
export const storedColumns = (parsed: ParsedMessage, analysis: MessageAnalysis) => ({
  sender_name: text(parsed.sender.name),
  sender_address: text(parsed.sender.address),
  subject: text(parsed.subject),
  snippet: text(analysis.snippet),
  text_body: text(parsed.text),
  html_original: text(parsed.html),
  html_sanitized: text(analysis.sanitizedHtml),
  html_sanitized_remote: text(analysis.sanitizedHtmlWithRemoteImages),
  remote_image_count: analysis.remoteImageCount,
  webhook_text_body: pgText(analysis.webhookTextBody),
  headers: parsed.headers,
  otp_codes: analysis.otpCodes,
  verification_links: analysis.verificationLinks,
  has_attachments: parsed.attachments.length > 0,
  sender_text: text(`${parsed.sender.name ?? ""} ${parsed.sender.address}`),
  search_text: text(analysis.searchText.slice(0, SearchTextMaxChars))
})
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
  columns: new TextEncoder().encode(JSON.stringify(storedColumns(parsed, analysis)))
})
