/** Pure logic for received mail: one-time codes, verification links, sanitized HTML and text. */
export { extractVerificationLinks, type MailBodies } from "./links.ts"
export { extractOtpCodes, otpSourceText } from "./otp.ts"
export {
  htmlTextWithoutParser,
  htmlToPlainText,
  makeSnippet,
  messageText,
  readerText,
  sanitizeEmailHtml,
  type SanitizedEmail,
  type SanitizeEmailOptions,
  textAsHtml,
  TextPartPayloadMaxChars,
  textPartPayload
} from "./sanitize.ts"
export {
  type CheckedHtml,
  checkHtmlLimits,
  HtmlMaxAttributes,
  HtmlMaxDepth,
  HtmlMaxElementAttributes,
  HtmlMaxElements,
  HtmlMaxEndTags,
  HtmlMaxStyleChars,
  HtmlMaxTextPieces,
  type HtmlLimit,
  type HtmlLimitCheck,
  RequestTimeHtmlMaxChars,
  smallCheckedHtml
} from "./limits.ts"
export { analyzeMessage, type MessageAnalysis } from "./analyze.ts"
export { isDangerousAttachment, isPreviewableImage, safeFilename } from "./attachments.ts"
export { parseMessage, type ParsedAttachment, type ParsedMessage, type ParseResult, UNKNOWN_SENDER_ADDRESS } from "./parse.ts"
export {
  buildTestMessage,
  checkTestMessageBody,
  parseMailbox,
  type TestMessageBody,
  type TestMessageRequest,
  validateTestMessage
} from "./testMessage.ts"
export { type MailDigest, SearchTextMaxChars, type StoredColumns, storedColumns, storedWebhookTextBody, type WorkedMail, workedMail } from "./worked.ts"
