import { extractVerificationLinks } from "./links.ts"
import { extractOtpCodes } from "./otp.ts"
import type { ParsedMessage } from "./parse.ts"
import { makeSnippet, messageText, sanitizeEmailHtml } from "./sanitize.ts"

/** What the pipeline stores of a parsed message, beyond the parse itself. */
export interface MessageAnalysis {
  readonly snippet: string
  /** Candidate codes in order of appearance, at most 3, unranked (spec 2.10). */
  readonly otpCodes: ReadonlyArray<string>
  /** Best first, footer links excluded, at most 3 (spec 2.11). */
  readonly verificationLinks: ReadonlyArray<string>
  /** Sanitized HTML with remote images blocked; null without an HTML body. */
  readonly sanitizedHtml: string | null
  readonly remoteImageCount: number
  /** The words the full-text index holds besides subject and sender. */
  readonly searchText: string
}

export const analyzeMessage = (message: ParsedMessage): MessageAnalysis => {
  const text = messageText(message.text, message.html)
  const sanitized = message.html === null ? null : sanitizeEmailHtml(message.html, { allowRemoteImages: false })
  return {
    snippet: makeSnippet(text),
    otpCodes: extractOtpCodes(text).slice(0, 3),
    verificationLinks: extractVerificationLinks({ text: message.text, html: message.html }, text).slice(0, 3),
    sanitizedHtml: sanitized?.html ?? null,
    remoteImageCount: sanitized?.remoteImageCount ?? 0,
    searchText: [text, ...message.attachments.map((a) => a.filename)].join(" ")
  }
}
