/**
 * Pathological mail, built in memory (issue #15): each message is what an attacker who knows an
 * address can send, well under the 15 MB cap, built to make parsing, sanitizing or extraction
 * cost far more than its size. Used by the hostile-mail tests (and meant for a mixed-load
 * benchmark). Every message has CRLF line ends and a unique Message-ID.
 */

export interface HostileMail {
  /** What makes it costly, for test names and reports. */
  readonly name: string
  readonly raw: Buffer
}

let sequence = 0

const message = (to: string, subject: string, contentType: string, body: string, extraHeaders = ""): Buffer =>
  Buffer.from(
    `From: Mallory <mallory@attacker.example>\r\nTo: ${to}\r\nSubject: ${subject}\r\n` +
      `Date: Sat, 21 Nov 2026 11:59:00 +0000\r\nMessage-ID: <hostile-${++sequence}-${Date.now()}@attacker.example>\r\n` +
      `MIME-Version: 1.0\r\n${extraHeaders}Content-Type: ${contentType}\r\n\r\n${body}\r\n`,
    "latin1"
  )

const html = (to: string, subject: string, markup: string) => message(to, subject, "text/html; charset=utf-8", markup)

/** `text` broken into CRLF lines of at most `width` characters (as a sending MTA would, RFC 5322 2.1.1). */
export const wrapLines = (text: string, width = 998): string => {
  const lines: Array<string> = []
  for (let at = 0; at < text.length; at += width) lines.push(text.slice(at, at + width))
  return lines.join("\r\n")
}

/** `parts` joined by spaces into CRLF lines of at most `width` characters, never splitting a part. */
export const packLines = (parts: ReadonlyArray<string>, width = 998): string => {
  const lines: Array<string> = []
  let line = ""
  for (const part of parts) {
    if (line.length > 0 && line.length + 1 + part.length > width) {
      lines.push(line)
      line = part
    } else line = line.length === 0 ? part : `${line} ${part}`
  }
  return [...lines, line].join("\r\n")
}

/**
 * 300,000 nested `<b>` elements, about 900 KB on one line: 61 s on the event loop before #15;
 * since its HTML limits, past the nesting limit and processed as text.
 */
export const nestedBold = (to: string, depth = 300_000): HostileMail => ({
  name: `${depth} nested <b>`,
  raw: html(to, "nested bold", `<html><body>${"<b>".repeat(depth)}deep 123456</body></html>`)
})

/**
 * `nestedBold`'s HTML beside a text part (multipart/alternative): past the HTML limits, the text
 * part is what the message reads and shows.
 */
export const nestedBoldWithText = (to: string, text: string, depth = 300_000): HostileMail => {
  const boundary = "alt"
  return {
    name: `${depth} nested <b> beside a text part`,
    raw: message(
      to,
      "nested bold with text",
      `multipart/alternative; boundary="${boundary}"`,
      `--${boundary}\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n${text}\r\n` +
        `--${boundary}\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html><body>${"<b>".repeat(depth)}deep 111111</body></html>\r\n--${boundary}--`
    )
  }
}

/**
 * A text part of 15 MB of links (650,000), each of which is read and scored as a verification
 * link: linear work, but about 6 µs and 200 bytes a link, so some 4 s and 150 MiB of heap in all
 * (2 cores, busy). Since the HTML limits (issue #15) the costliest message there is: the tests of
 * the time and heap allowances use it.
 */
export const manyLinks = (to: string, count = 650_000): HostileMail => ({
  name: `${count} links in a text part`,
  raw: message(to, "many links", "text/plain; charset=utf-8", packLines(Array.from({ length: count }, (_, i) => `https://a.b/v?t=${i}`)))
})

/** Deep nesting of several tag kinds, on lines of 998 characters. */
export const nestedMixed = (to: string, depth = 200_000): HostileMail => {
  const kinds = ["div", "span", "i", "blockquote", "font", "table", "td", "li", "em", "u"]
  const open = Array.from({ length: depth }, (_, i) => `<${kinds[i % kinds.length]}>`).join("")
  return { name: `${depth} nested elements of ${kinds.length} kinds`, raw: html(to, "nested mixed", wrapLines(`<html><body>${open}x 654321`)) }
}

/** 1,000,000 unclosed tags, 3 MB: held the process for over 20 minutes before #15. */
export const unclosedTags = (to: string, count = 1_000_000): HostileMail => ({
  name: `${count} unclosed <i>`,
  raw: html(to, "unclosed", wrapLines(`${"<i>".repeat(count)}unclosed`))
})

/** Elements with `count` attributes each (the attributes packed on lines of 998 characters). */
export const hugeAttributeList = (to: string, count = 200_000, elements = 3): HostileMail => {
  const attributes = Array.from({ length: count }, (_, i) => `data-a${i}="${i}"`)
  const element = `<div\r\n${packLines(attributes)}>x 246810</div>`
  return { name: `${elements} elements of ${count} attributes`, raw: html(to, "attributes", Array.from({ length: elements }, () => element).join("\r\n")) }
}

/** `count` small MIME parts in one multipart/mixed (the parser's limit is 1000). */
export const manyParts = (to: string, count = 20_000): HostileMail => {
  const boundary = "p"
  const parts = Array.from({ length: count }, (_, i) => `--${boundary}\r\nContent-Type: text/plain\r\n\r\npart ${i}\r\n`).join("")
  return { name: `${count} MIME parts`, raw: message(to, "many parts", `multipart/mixed; boundary="${boundary}"`, `${parts}--${boundary}--`) }
}

/** Multiparts nested `depth` deep, each with its own boundary. */
export const nestedMultiparts = (to: string, depth = 5_000): HostileMail => {
  const opens = Array.from({ length: depth }, (_, i) => `--b${i}\r\nContent-Type: multipart/mixed; boundary="b${i + 1}"\r\n\r\n`).join("")
  const closes = Array.from({ length: depth }, (_, i) => `--b${depth - i}--\r\n`).join("")
  return {
    name: `multiparts nested ${depth} deep`,
    raw: message(to, "nested multiparts", `multipart/mixed; boundary="b0"`, `${opens}--b${depth}\r\nContent-Type: text/plain\r\n\r\ninner\r\n${closes}--b0--`)
  }
}

/** A text body of one line of `bytes` bytes (words and digit runs, no line break). */
export const singleLine = (to: string, bytes = 14 * 1024 * 1024): HostileMail => {
  const unit = "word 1234 x "
  return { name: `a single line of ${(bytes / 1024 / 1024).toFixed(0)} MB`, raw: message(to, "one line", "text/plain; charset=utf-8", unit.repeat(Math.ceil(bytes / unit.length)).slice(0, bytes)) }
}

/** The same single line as HTML, one element per word. */
export const singleLineHtml = (to: string, bytes = 8 * 1024 * 1024): HostileMail => {
  const unit = "<span>1234</span>"
  return { name: `an HTML line of ${(bytes / 1024 / 1024).toFixed(0)} MB`, raw: html(to, "one html line", unit.repeat(Math.ceil(bytes / unit.length))) }
}

/** `lines` header lines: many distinct fields, and a Subject folded over thousands of lines. */
export const hugeHeaders = (to: string, lines = 40_000): HostileMail => {
  const fields = Array.from({ length: lines / 2 }, (_, i) => `X-Junk-${i}: value ${i}\r\n`).join("")
  const folded = Array.from({ length: lines / 2 }, (_, i) => ` fold ${i}`).join("\r\n")
  return { name: `${lines} header lines`, raw: message(to, `folded${"\r\n"}${folded}`, "text/plain", "body 123456", fields) }
}

/** Quoted-printable of soft line breaks and escapes only: every output byte costs a decoder step. */
export const pathologicalQuotedPrintable = (to: string, lines = 40_000): HostileMail => {
  const line = "=3D=3C=62=3E".repeat(6) + "="
  return {
    name: `quoted-printable of ${lines} soft-broken escape lines`,
    raw: message(to, "qp", "text/html; charset=utf-8", Array.from({ length: lines }, () => line).join("\r\n"), "Content-Transfer-Encoding: quoted-printable\r\n")
  }
}

/** Base64 whose lines are broken by runs of `=` (each run starts a new decoder chunk). */
export const pathologicalBase64 = (to: string, lines = 40_000): HostileMail => ({
  name: `base64 of ${lines} lines full of = runs`,
  raw: message(to, "b64", "text/plain", Array.from({ length: lines }, () => "PGI+=PGI+=PGI+=PGI+=").join("\r\n"), "Content-Transfer-Encoding: base64\r\n")
})

/** Many thousands of links and digit runs, in a text part and an HTML part. */
export const linksAndDigits = (to: string, count = 100_000): HostileMail => {
  const text = packLines(Array.from({ length: count }, (_, i) => `https://x${i}.example/verify?token=${i} code ${100000 + i}`))
  const markup = packLines(Array.from({ length: count }, (_, i) => `<a href="https://x${i}.example/confirm/${i}">confirm ${100000 + i}</a>`))
  const boundary = "alt"
  return {
    name: `${count} links and digit runs`,
    raw: message(
      to,
      "links",
      `multipart/alternative; boundary="${boundary}"`,
      `--${boundary}\r\nContent-Type: text/plain\r\n\r\n${text}\r\n--${boundary}\r\nContent-Type: text/html\r\n\r\n${markup}\r\n--${boundary}--`
    )
  }
}

/** Every kind above, at the sizes the issue names. */
export const hostileMails = (to: string): ReadonlyArray<HostileMail> => [
  nestedBold(to),
  nestedMixed(to),
  unclosedTags(to),
  hugeAttributeList(to),
  manyParts(to),
  nestedMultiparts(to),
  singleLine(to),
  singleLineHtml(to),
  hugeHeaders(to),
  pathologicalQuotedPrintable(to),
  pathologicalBase64(to),
  linksAndDigits(to)
]

// -- the worst of what stays on the main thread ---------------------------------------------------

/** `body` as a message of content type `contentType`, padded or cut to stay within `bytes`. */
const within = (to: string, subject: string, contentType: string, body: string, extraHeaders = "", bytes = 8 * 1024 - 64): HostileMail => {
  const raw = message(to, subject, contentType, body, extraHeaders)
  return { name: subject, raw: raw.byteLength <= bytes ? raw : message(to, subject, contentType, body.slice(0, body.length - (raw.byteLength - bytes)), extraHeaders) }
}

/**
 * Messages built to cost the most while staying within the worker's InlineLimits (8 KB of plain text, 32 `<`,
 * 400 lines of at most 1000 bytes, 8 boundary lines), which are worked on the main thread:
 * bench:hop times them, and the worker's tests check that each is within the limits.
 */
export const inlineWorstCases = (to: string): ReadonlyArray<HostileMail> => [
  within(to, "angle brackets and entities", "text/plain; charset=utf-8", wrapLines(`${"<b>".repeat(24)}${"&amp;&#x41;&lt;".repeat(900)} 123456`)),
  within(to, "quoted-printable soft breaks", "text/plain; charset=utf-8", Array.from({ length: 385 }, () => `${"=3D=41".repeat(6)}=`).join("\r\n"), "Content-Transfer-Encoding: quoted-printable\r\n"),
  within(to, "entities on long lines", "text/plain; charset=utf-8", wrapLines(`${"&#x1F600;&amp;&nbsp;".repeat(1_000)}`)),
  within(to, "digits and links", "text/plain; charset=utf-8", packLines(Array.from({ length: 2_000 }, (_, i) => (i % 2 === 0 ? `http://x${i}.example/verify?t=${i}` : `${100000 + i}`)))),
  within(to, "a line of digits", "text/plain; charset=utf-8", wrapLines("1234567890 ".repeat(1_400), 998)),
  within(to, "folded subject of encoded words", "text/plain; charset=utf-8", "x", `X-Folded: ${Array.from({ length: 180 }, () => "=?utf-8?q?=41=42=43?=").join("\r\n ")}\r\n`),
  within(to, "base64 lines", "text/plain; charset=utf-8", wrapLines(Buffer.alloc(11_000, 0x41).toString("base64"), 76), "Content-Transfer-Encoding: base64\r\n"),
  within(
    to,
    "nested parts",
    'multipart/mixed; boundary="b0"',
    [...Array.from({ length: 4 }, (_, i) => `--b${i}\r\nContent-Type: multipart/mixed; boundary="b${i + 1}"\r\n`), "--b4\r\nContent-Type: text/plain\r\n\r\n123456 http://x.example/a"].join("\r\n")
  )
]
