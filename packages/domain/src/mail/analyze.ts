import { payloadTextBody } from "../webhooks/textBody.ts"
import { checkHtmlLimits, type HtmlLimit } from "./limits.ts"
import { extractVerificationLinks } from "./links.ts"
import { extractOtpCodes } from "./otp.ts"
import type { ParsedMessage } from "./parse.ts"
import { makeSnippet, readerText, sanitizeEmailHtml, textAsHtml } from "./sanitize.ts"

/** The search words kept of a message, at most. */
export const SearchTextMaxChars = 500_000

/** What the pipeline stores of a parsed message, beyond the parse itself. */
export interface MessageAnalysis {
  readonly snippet: string
  /** Candidate codes in order of appearance, at most 3, unranked (spec 2.10). */
  readonly otpCodes: ReadonlyArray<string>
  /** Best first, footer links excluded, at most 3 (spec 2.11). */
  readonly verificationLinks: ReadonlyArray<string>
  /**
   * Sanitized HTML with remote images blocked; for HTML past the limits, the reader text as
   * preformatted text (`textAsHtml`). Null without an HTML body.
   */
  readonly sanitizedHtml: string | null
  /**
   * Sanitized HTML with remote images loaded, made here so that the view never sanitizes at
   * request time. Null when there is no remote image (the blocked rendering is the same).
   */
  readonly sanitizedHtmlWithRemoteImages: string | null
  readonly remoteImageCount: number
  /** The limit the HTML passed, when it did. */
  readonly htmlLimit: HtmlLimit | null
  /** The words the full-text index holds besides subject and sender (their first SearchTextMaxChars are kept). */
  readonly searchText: string
  /**
   * The reader text as a webhook's `text_body` carries it (spec 6.3: at most 32 KiB), so that
   * dispatch reads no HTML.
   */
  readonly webhookTextBody: string
}

export const analyzeMessage = (message: ParsedMessage): MessageAnalysis => {
  // Checked once: past the limits, nothing below walks the HTML with a parser.
  const html = message.html === null ? null : checkHtmlLimits(message.html)
  const checked = html?.ok === true ? html.html : null
  const text = readerText(message.text, html)
  const sanitized = checked === null ? null : sanitizeEmailHtml(checked, { allowRemoteImages: false })
  const remoteImageCount = sanitized?.remoteImageCount ?? 0
  return {
    snippet: makeSnippet(text),
    otpCodes: extractOtpCodes(text).slice(0, 3),
    verificationLinks: extractVerificationLinks({ text: message.text, html: checked }, text).slice(0, 3),
    sanitizedHtml: html === null ? null : sanitized?.html ?? textAsHtml(text),
    sanitizedHtmlWithRemoteImages: checked !== null && remoteImageCount > 0
      ? sanitizeEmailHtml(checked, { allowRemoteImages: true }).html
      : null,
    remoteImageCount,
    htmlLimit: html?.ok === false ? html.limit : null,
    // The index keeps the first SearchTextMaxChars: a longer text is cut before it is joined with
    // the file names, as the join copies all of it (15 MB of text: 15 MB more while it is worked).
    searchText: [text.length > SearchTextMaxChars ? text.slice(0, SearchTextMaxChars) : text, ...message.attachments.map((a) => a.filename)]
      .join(" "),
    webhookTextBody: payloadTextBody(text)
  }
}
