/** HTML as the sanitizer and the walks take it, for tests whose HTML is within the limits. */
import { type CheckedHtml, checkHtmlLimits } from "../src/mail/limits.ts"

/** `html`, checked against the limits; throws when it is past one (the test's own mistake). */
export const checked = (html: string): CheckedHtml => {
  const result = checkHtmlLimits(html)
  if (!result.ok) throw new Error(`test HTML past the limits: ${result.detail}`)
  return result.html
}
