/**
 * One-time-code candidates (`otpCodes`, and `otp.code` of webhook events, spec 2.10 and 6.3):
 * runs of four to eight digits in order of appearance. The wording around a number is not read,
 * so order numbers, postal codes, years and phone numbers come out too: a hint, not a verdict.
 */
import { messageText, removeInvisibleCharacters } from "./sanitize.ts"

const MAX_OTP_CODES = 3
const MIN_DIGITS = 4
const MAX_DIGITS = 8

/**
 * A digit run is a maximal sequence of ASCII digits; anything else ends it, letters included
 * ("A12345B" gives "12345"). A run of nine or more digits is one long number, not a code, and
 * gives nothing. Separated groups are not joined: "123 456" and "12-34-56" are runs of three and
 * two digits and give nothing, because joining groups would also join the parts of dates, phone
 * numbers and amounts ("21.11.2026", "555-0123", "1,299.00").
 */
const DIGIT_RUN = /[0-9]+/g

/**
 * Links and mail addresses are not read: a reader never types a number out of a tracking URL or
 * an alias address, and the HTML part's links are invisible in its text anyway, so the text and
 * the HTML of one mail give the same codes.
 */
// The address branch starts only at the start of a word (lookbehind) so that a long unbroken
// string cannot make the scan quadratic.
const LINK_OR_ADDRESS =
  /\b(?:https?:\/\/|www\.)[^\s<>"]+|(?<![^\s<>()"',;:])[^\s@<>()"',;:]+@[^\s@<>()"',;:]+\.[^\s@<>()"',;:]+/gi

/** Where LINK_OR_ADDRESS's link branch can begin (without `\b`, so it may say yes for nothing). */
const LINK_START = /https?:\/\/|www\./i

/** Up to three distinct runs of 4 to 8 digits, in order of first appearance. */
export const extractOtpCodes = (text: string): ReadonlyArray<string> => {
  const codes: Array<string> = []
  // "7\u200b3\u200b9\u200b1" reads 7391 on screen.
  const stripped = removeInvisibleCharacters(text)
  // Without "@" and a link's start, LINK_OR_ADDRESS cannot match: its scan is skipped.
  const visible = stripped.includes("@") || LINK_START.test(stripped) ? stripped.replace(LINK_OR_ADDRESS, " ") : stripped
  for (const [run] of visible.matchAll(DIGIT_RUN)) {
    if (run.length < MIN_DIGITS || run.length > MAX_DIGITS || codes.includes(run)) continue
    codes.push(run)
    if (codes.length === MAX_OTP_CODES) break
  }
  return codes
}

/**
 * The text the codes are read from: the text part, or the visible text of the HTML part when
 * there is no text part (see `messageText`). The subject is not part of it.
 */
export const otpSourceText = (text: string | null, html: string | null): string => messageText(text, html)
