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
