/**
 * The `text_body` of a webhook payload (spec 6.3). Apart from Webhook.ts, which loads Effect:
 * the mail worker threads compute it too (mail/analyze.ts), and a thread loads no Effect.
 */

/** Spec 6.3: `text_body` is at most 32 KiB (32768 characters). */
export const TextBodyMaxChars = 32_768

/**
 * Plain text fit for a payload: controls other than tab and newline dropped, at most 32 KiB.
 * Applied to its own result it changes nothing.
 */
export const payloadTextBody = (text: string): string => {
  const clean = text.replace(/\r\n?/g, "\n").replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, "")
  if (clean.length <= TextBodyMaxChars) return clean
  const cut = clean.slice(0, TextBodyMaxChars)
  return /[\ud800-\udbff]$/.test(cut) ? cut.slice(0, -1) : cut
}
