/** Pure logic for received mail: one-time codes, verification links, sanitized HTML and text. */
export { extractVerificationLinks, type MailBodies } from "./links.ts"
export { extractOtpCodes, otpSourceText } from "./otp.ts"
export {
  htmlToPlainText,
  makeSnippet,
  messageText,
  sanitizeEmailHtml,
  type SanitizedEmail,
  type SanitizeEmailOptions
} from "./sanitize.ts"
export { analyzeMessage, type MessageAnalysis } from "./analyze.ts"
export { isDangerousAttachment, isPreviewableImage, safeFilename } from "./attachments.ts"
export { parseMessage, type ParsedAttachment, type ParsedMessage, type ParseResult, UNKNOWN_SENDER_ADDRESS } from "./parse.ts"
export { buildTestMessage, parseMailbox, type TestMessageRequest, validateTestMessage } from "./testMessage.ts"
