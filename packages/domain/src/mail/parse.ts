/**
 * Raw MIME bytes -> the parsed message the pipeline stores (interface 2.10/2.11).
 *
 * Built on postal-mime, behind a cheap structural pre-scan. `parseMessage` never throws and
 * never mutates its input: a message that is unparsable or over a limit comes back as a typed
 * failure, and the pipeline then marks it `failed` with its raw bytes kept and readable.
 *
 * Why a pre-scan: postal-mime 4.0.0 bounds nesting depth and total header size, but not the
 * number of parts or lines. Its pass-through decoder (7bit/8bit/binary bodies) keeps every line
 * as a separate Blob part, and Node's Blob is superlinear in the number of parts: measured on
 * this machine, 100k short un-encoded lines take ~2 s, 1M take ~20 s, whatever their length. A
 * 2 MB message of empty lines would stall a worker. So, before postal-mime sees the bytes, one
 * linear pass mirrors postal-mime's line and boundary rules to count parts, lines, nesting and
 * "costly" lines, and refuses pathological input up front. (Since patches/postal-mime@4.0.0.patch
 * its decoders join the parts with one copy instead of a Blob, which made ordinary mail cheaper
 * too; the limits stay as the bound on work per message.)
 */
import PostalMime, { decodeWords } from "postal-mime"
import type { Address, Attachment, Email, Mailbox } from "postal-mime"
import {
  isDangerousAttachment,
  isPreviewableImage,
  looksExecutable,
  normalizeMimeType,
  safeFilename,
  stripControlChars,
} from "./attachments.ts"

// ---------------------------------------------------------------------------------------------
// Result types

export interface ParsedSender {
  readonly name: string | null
  readonly address: string
}

export interface ParsedAttachment {
  /** Safe to show and download, see `safeFilename`. */
  readonly filename: string
  /** Lowercase `type/subtype`, application/octet-stream when the part's type was malformed. */
  readonly mimeType: string
  /** Decoded bytes. */
  readonly content: Uint8Array
  /** Content-ID without angle brackets, as `cid:` URLs in the HTML refer to it. */
  readonly contentId: string | null
  /** Unknown disposition tokens count as `attachment` (RFC 2183 section 2.8). */
  readonly disposition: "attachment" | "inline" | null
  readonly dangerous: boolean
  readonly previewable: boolean
}

export interface ParsedMessage {
  /** Top-level headers keyed by lowercase name; repeated headers become arrays in order. */
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string>>>
  readonly sender: ParsedSender
  /** Addresses of the To header (groups flattened), in order. */
  readonly to: ReadonlyArray<string>
  /** Decoded Subject, empty when missing. */
  readonly subject: string
  readonly messageId: string | null
  /** ISO 8601, or null when the Date header is missing or not a date. */
  readonly date: string | null
  readonly text: string | null
  readonly html: string | null
  readonly attachments: ReadonlyArray<ParsedAttachment>
}

export type ParseFailureReason =
  | "empty"
  | "too_large"
  | "too_many_lines"
  | "too_many_unencoded_lines"
  | "too_many_parts"
  | "nesting_too_deep"
  | "headers_too_large"
  | "unparsable"

export type ParseResult =
  | { readonly ok: true; readonly message: ParsedMessage }
  | { readonly ok: false; readonly reason: ParseFailureReason; readonly detail: string }

// ---------------------------------------------------------------------------------------------
// Limits

export interface ParseLimits {
  /** Raw size. The largest accepted message is 15 MiB (interface 8); headroom for trace headers. */
  readonly maxBytes: number
  /** MIME parts created by boundary delimiters. Real mail has a handful; 1000 is generous. */
  readonly maxParts: number
  /** Multipart nesting. Real mail nests 3-5 deep; postal-mime's own default is 256. */
  readonly maxNestingDepth: number
  /** Total header bytes over every part (postal-mime counts them together). */
  readonly maxHeadersSize: number
  /** Every line costs ~1-3 us; 300k lets a 15 MiB base64 attachment at 64 columns through. */
  readonly maxLines: number
  /**
   * Lines postal-mime keeps one by one (headers, un-encoded bodies, `=` runs in base64), the
   * ~20 us-per-line slow path described above. 50k is ~3 MB of plain text, ~1 s here.
   */
  readonly maxUnencodedLines: number
}

export const defaultParseLimits: ParseLimits = {
  maxBytes: 16 * 1024 * 1024,
  maxParts: 1000,
  maxNestingDepth: 32,
  maxHeadersSize: 1024 * 1024,
  maxLines: 300_000,
  maxUnencodedLines: 50_000,
}

/** Used when no From, Sender or Return-Path yields a usable address. `.invalid` never routes
 * (RFC 2606), and the dotted domain passes validators that want one (the field is `email`). */
export const UNKNOWN_SENDER_ADDRESS = "unknown@sender.invalid"

type Failure = Extract<ParseResult, { ok: false }>

const failure = (reason: ParseFailureReason, detail: string): Failure => ({ ok: false, reason, detail })

// ---------------------------------------------------------------------------------------------
// Entry point

/**
 * Parses raw MIME. Never throws, never mutates `raw`; failures are values. Nested
 * `message/rfc822` parts are kept as attachments rather than parsed inline: postal-mime would
 * parse each with a fresh set of limits, and their (possibly base64-encoded) bodies are out of
 * the pre-scan's sight.
 */
export const parseMessage = async (
  raw: Uint8Array,
  limits: Partial<ParseLimits> = {},
): Promise<ParseResult> => {
  const bounds: ParseLimits = { ...defaultParseLimits, ...limits }
  try {
    const refusal = refuseUpFront(raw, bounds)
    if (refusal !== null) return refusal
    // postal-mime copies a view (`buffer.slice`) and reads an ArrayBuffer as it is: the bytes
    // are only read, so a view of a whole buffer is given as that buffer (a 15 MB message
    // parsed without a second 15 MB).
    const input = raw.byteOffset === 0 && raw.byteLength === raw.buffer.byteLength && raw.buffer instanceof ArrayBuffer ? raw.buffer : raw
    const email = await PostalMime.parse(input, {
      maxNestingDepth: bounds.maxNestingDepth,
      maxHeadersSize: bounds.maxHeadersSize,
      maxRfc822NestingDepth: 0,
      attachmentEncoding: "arraybuffer",
    })
    if (email.attachments.length > bounds.maxParts) {
      return failure("too_many_parts", `more than ${bounds.maxParts} attachments`)
    }
    return { ok: true, message: toParsedMessage(email) }
  } catch (error) {
    return failureFromParserError(error)
  }
}

const refuseUpFront = (raw: Uint8Array, limits: ParseLimits): Failure | null => {
  if (raw.byteLength === 0) return failure("empty", "the message has no bytes")
  if (raw.byteLength > limits.maxBytes) {
    return failure("too_large", `${raw.byteLength} bytes is over the ${limits.maxBytes}-byte limit`)
  }
  return scanStructure(raw, limits)
}

/** postal-mime reports its limits as plain Errors; map their messages to our reasons. */
const failureFromParserError = (error: unknown): Failure => {
  const detail = error instanceof Error ? error.message : String(error)
  if (/nesting depth/i.test(detail)) return failure("nesting_too_deep", detail)
  if (/header size/i.test(detail)) return failure("headers_too_large", detail)
  return failure("unparsable", detail)
}

// ---------------------------------------------------------------------------------------------
// Structural pre-scan
//
// Mirrors postal-mime's reading: a line ends at LF with trailing CRs dropped; a line is a
// boundary when it is `--` + an open boundary (+ `--` to close it) + only spaces/tabs, innermost
// boundary first; a part's headers end at the first empty line. Only what it is sure of is
// cheap: lines in a base64 or quoted-printable body of a non-multipart part whose headers are
// plain. Wherever its reading could differ from postal-mime's (comments, escapes, non-ASCII,
// RFC 2231 parameters in a multipart Content-Type), it stops discounting for the rest of the
// message, so a crafted message can only make the estimate higher, never lower.

const LF = 0x0a
const CR = 0x0d
const DASH = 0x2d
const SPACE = 0x20
const TAB = 0x09
const EQUALS = 0x3d

type BodyEncoding = "unencoded" | "base64" | "quoted-printable"

interface OpenBoundary {
  readonly bytes: Uint8Array
  /** Depth of the multipart that declared it; its parts are one deeper. */
  readonly depth: number
}

interface ScanState {
  readonly limits: ParseLimits
  readonly boundaries: Array<OpenBoundary>
  headerLines: Array<string>
  headerBytes: number
  inHeaders: boolean
  partDepth: number
  encoding: BodyEncoding
  /** False once the scan might read the structure differently from postal-mime. */
  trusted: boolean
  lines: number
  unencodedLines: number
  parts: number
}

const latin1 = new TextDecoder("latin1")

const scanStructure = (raw: Uint8Array, limits: ParseLimits): Failure | null => {
  const state: ScanState = {
    limits,
    boundaries: [],
    headerLines: [],
    headerBytes: 0,
    inHeaders: true,
    partDepth: 0,
    encoding: "unencoded",
    trusted: true,
    lines: 0,
    unencodedLines: 0,
    parts: 0,
  }
  let start = 0
  while (start < raw.length) {
    const newline = raw.indexOf(LF, start)
    const next = newline < 0 ? raw.length : newline + 1
    let end = newline < 0 ? raw.length : newline
    while (end > start && raw[end - 1] === CR) end--
    const refusal = scanLine(state, raw.subarray(start, end))
    if (refusal !== null) return refusal
    start = next
  }
  return null
}

const scanLine = (state: ScanState, line: Uint8Array): Failure | null => {
  state.lines++
  if (state.lines > state.limits.maxLines) {
    return failure("too_many_lines", `more than ${state.limits.maxLines} lines`)
  }
  const boundary = matchOpenBoundary(state.boundaries, line)
  if (boundary !== null) return enterBoundary(state, boundary.index, boundary.closing)
  if (state.inHeaders) return scanHeaderLine(state, line)
  return countBodyLine(state, line)
}

const matchOpenBoundary = (
  boundaries: ReadonlyArray<OpenBoundary>,
  line: Uint8Array,
): { index: number; closing: boolean } | null => {
  if (line.length <= 2 || line[0] !== DASH || line[1] !== DASH) return null
  for (let index = boundaries.length - 1; index >= 0; index--) {
    const open = boundaries[index]
    if (open === undefined || !startsWithAt(line, open.bytes, 2)) continue
    let rest = 2 + open.bytes.length
    const closing = line[rest] === DASH && line[rest + 1] === DASH
    if (closing) rest += 2
    if (onlyBlanksFrom(line, rest)) return { index, closing }
  }
  return null
}

const startsWithAt = (line: Uint8Array, bytes: Uint8Array, offset: number): boolean => {
  if (line.length < offset + bytes.length) return false
  for (let i = 0; i < bytes.length; i++) if (line[offset + i] !== bytes[i]) return false
  return true
}

const onlyBlanksFrom = (line: Uint8Array, offset: number): boolean => {
  for (let i = offset; i < line.length; i++) if (line[i] !== SPACE && line[i] !== TAB) return false
  return true
}

/** A delimiter opens a new part and closes the inner multiparts; a close-delimiter also its own. */
const enterBoundary = (state: ScanState, index: number, closing: boolean): Failure | null => {
  const open = state.boundaries[index]
  if (open === undefined) return null
  state.boundaries.length = closing ? index : index + 1
  state.unencodedLines++
  if (closing) {
    // Back in the enclosing multipart's body (preamble/epilogue text): un-encoded.
    state.inHeaders = false
    state.encoding = "unencoded"
    return overBudget(state)
  }
  state.parts++
  if (state.parts > state.limits.maxParts) {
    return failure("too_many_parts", `more than ${state.limits.maxParts} MIME parts`)
  }
  state.partDepth = open.depth + 1
  if (state.partDepth > state.limits.maxNestingDepth) {
    return failure("nesting_too_deep", `MIME parts nest deeper than ${state.limits.maxNestingDepth} levels`)
  }
  state.inHeaders = true
  state.headerLines = []
  return overBudget(state)
}

const scanHeaderLine = (state: ScanState, line: Uint8Array): Failure | null => {
  if (line.length === 0) {
    endOfHeaders(state)
    return null
  }
  state.headerBytes += line.length
  if (state.headerBytes > state.limits.maxHeadersSize) {
    return failure("headers_too_large", `headers exceed ${state.limits.maxHeadersSize} bytes`)
  }
  state.headerLines.push(latin1.decode(line))
  state.unencodedLines++
  return overBudget(state)
}

const countBodyLine = (state: ScanState, line: Uint8Array): Failure | null => {
  if (state.encoding === "unencoded" || !state.trusted) state.unencodedLines++
  // The base64 decoder starts a new chunk after every run of `=`.
  if (state.encoding === "base64" || !state.trusted) state.unencodedLines += countEqualsRuns(line)
  return overBudget(state)
}

const countEqualsRuns = (line: Uint8Array): number => {
  let runs = 0
  let at = line.indexOf(EQUALS)
  while (at >= 0) {
    runs++
    while (line[at] === EQUALS) at++
    at = line.indexOf(EQUALS, at)
  }
  return runs
}

const overBudget = (state: ScanState): Failure | null =>
  state.unencodedLines > state.limits.maxUnencodedLines
    ? failure("too_many_unencoded_lines", `more than ${state.limits.maxUnencodedLines} un-encoded lines`)
    : null

/** A part's headers are complete: open its boundary if it is a multipart, pick its body encoding. */
const endOfHeaders = (state: ScanState): void => {
  const headers = firstContentHeaders(state.headerLines)
  state.inHeaders = false
  state.headerLines = []
  state.encoding = "unencoded"
  const contentType = readContentType(headers.get("content-type") ?? "")
  if (contentType.kind === "unsure") {
    state.trusted = false
  } else if (contentType.kind === "multipart") {
    if (contentType.boundary.length > 0) {
      state.boundaries.push({ bytes: latin1Bytes(contentType.boundary), depth: state.partDepth })
    }
  } else {
    state.encoding = readTransferEncoding(headers.get("content-transfer-encoding") ?? "")
  }
}

/** SP and HTAB only, as postal-mime trims (String#trim also eats NBSP, VT, FF ...). */
const trimBlanks = (value: string): string => value.replace(/^[ \t]+/, "").replace(/[ \t]+$/, "")

/**
 * First Content-Type and Content-Transfer-Encoding values, folded and keyed as postal-mime
 * does: a line starting with SP/HTAB continues the previous one, the key is what precedes the
 * first colon with SP/HTAB trimmed, lowercased.
 */
const firstContentHeaders = (lines: ReadonlyArray<string>): Map<string, string> => {
  const unfolded: Array<string> = []
  for (const line of lines) {
    const last = unfolded.length - 1
    if (last >= 0 && (line.startsWith(" ") || line.startsWith("\t"))) unfolded[last] += line
    else unfolded.push(line)
  }
  const found = new Map<string, string>()
  for (const header of unfolded) {
    const colon = header.indexOf(":")
    if (colon < 0) continue
    const key = trimBlanks(header.slice(0, colon)).toLowerCase()
    if ((key === "content-type" || key === "content-transfer-encoding") && !found.has(key)) {
      found.set(key, trimBlanks(header.slice(colon + 1)))
    }
  }
  return found
}

type ContentTypeReading =
  | { readonly kind: "leaf" }
  | { readonly kind: "multipart"; readonly boundary: string }
  | { readonly kind: "unsure" }

/** `type/subtype` followed by `;` or the end: postal-mime reads exactly this token as the type. */
const LEADING_TYPE = /^([a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+)[ \t]*(;|$)/i

/** One parameter with a plain name (no RFC 2231 `*`) and a token or escape-free quoted value. */
const PLAIN_PARAMETER = /[ \t]*;[ \t]*([a-z0-9_.-]+)[ \t]*=[ \t]*(?:"([\x20\x21\x23-\x5b\x5d-\x7e]*)"|([\x21\x23-\x27\x2a-\x3a\x3c-\x7e]+))[ \t]*/iy

/**
 * What postal-mime will make of a Content-Type. A missing one is a leaf (text/plain). The
 * parameters of a leaf do not matter to the scan, so only its leading type must be plain; a
 * multipart must be plain throughout (ASCII, no comments, escapes or RFC 2231 sections) so
 * that its boundary is certainly the one postal-mime reads. Anything else is "unsure".
 */
const readContentType = (value: string): ContentTypeReading => {
  if (value === "") return { kind: "leaf" }
  const leading = LEADING_TYPE.exec(value)
  if (leading === null) return { kind: "unsure" }
  if (!/^multipart\//i.test(leading[1] ?? "")) return { kind: "leaf" }
  return readMultipartBoundary(value, (leading[1] ?? "").length)
}

const readMultipartBoundary = (value: string, from: number): ContentTypeReading => {
  let boundary: string | null = null
  PLAIN_PARAMETER.lastIndex = from
  while (PLAIN_PARAMETER.lastIndex < value.length) {
    const at = PLAIN_PARAMETER.lastIndex
    const parameter = PLAIN_PARAMETER.exec(value)
    if (parameter === null) {
      // Only a trailing `;` (and blanks) may remain.
      return /^[ \t]*;?[ \t]*$/.test(value.slice(at)) ? { kind: "multipart", boundary: boundary ?? "" } : { kind: "unsure" }
    }
    // postal-mime keeps the first of duplicated parameters.
    if (boundary === null && (parameter[1] ?? "").toLowerCase() === "boundary") {
      boundary = parameter[2] ?? parameter[3] ?? ""
    }
  }
  return { kind: "multipart", boundary: boundary ?? "" }
}

/** Only an exact `base64` or `quoted-printable` earns the discount; anything odd is counted. */
const readTransferEncoding = (value: string): BodyEncoding => {
  const encoding = value.toLowerCase()
  return encoding === "base64" || encoding === "quoted-printable" ? encoding : "unencoded"
}

const latin1Bytes = (value: string): Uint8Array => Uint8Array.from(value, (char) => char.charCodeAt(0) & 0xff)

// ---------------------------------------------------------------------------------------------
// postal-mime's Email -> ParsedMessage

const toParsedMessage = (email: Email): ParsedMessage => ({
  headers: headerRecord(email),
  sender: senderOf(email),
  to: recipientsOf(email.to),
  subject: cleanHeaderText(email.subject ?? ""),
  messageId: nonEmpty(cleanHeaderText(email.messageId ?? "")),
  date: isoDateOf(email),
  text: nonEmpty(stripNul(email.text ?? "")),
  html: nonEmpty(stripNul(email.html ?? "")),
  attachments: email.attachments.map((attachment, i) => toParsedAttachment(attachment, i + 1)),
})

/** RFC 5322 field name: printable ASCII without colon. Lines that are not headers are dropped. */
const FIELD_NAME = /^[\x21-\x39\x3b-\x7e]+$/

/**
 * Lowercase name -> decoded value(s). Built through a Map and Object.fromEntries so a header
 * named `__proto__` becomes a plain property instead of replacing the object's prototype.
 */
const headerRecord = (email: Email): Record<string, string | Array<string>> => {
  const values = new Map<string, Array<string>>()
  for (const { key, value } of email.headers) {
    if (!FIELD_NAME.test(key)) continue
    const decoded = cleanHeaderText(decodeHeaderValue(value))
    const existing = values.get(key)
    if (existing === undefined) values.set(key, [decoded])
    else existing.push(decoded)
  }
  return Object.fromEntries(
    Array.from(values, ([key, list]): [string, string | Array<string>] => [key, list.length === 1 ? (list[0] ?? "") : list]),
  )
}

/** Encoded words decoded for display; the raw value if decoding fails on odd input. */
const decodeHeaderValue = (value: string): string => {
  try {
    return decodeWords(value)
  } catch {
    return value
  }
}

/** Tabs become spaces (folded headers keep their whitespace); other control characters go. */
const cleanHeaderText = (value: string): string => stripControlChars(value.replace(/\t/g, " ")).trim()

/** PostgreSQL text cannot hold NUL; other characters in bodies are the sanitizer's business. */
const stripNul = (value: string): string => value.replace(/\u0000/g, "")

const nonEmpty = (value: string): string | null => (value.length > 0 ? value : null)

/** The shape of a deliverable address, as JSON Schema `email` validators accept it. */
const EMAIL_ADDRESS =
  /^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i

const usableAddress = (address: string | undefined): string | null => {
  const candidate = (address ?? "").trim()
  return candidate.length <= 254 && EMAIL_ADDRESS.test(candidate) ? candidate : null
}

const firstMailbox = (address: Address | undefined): Mailbox | undefined =>
  address === undefined ? undefined : address.group === undefined ? address : address.group[0]

/**
 * From, else Sender, else Return-Path: the first with a usable address. With none, the
 * placeholder address, named after whatever the From header said so the reader still sees it.
 */
const senderOf = (email: Email): ParsedSender => {
  const from = firstMailbox(email.from)
  const sender = firstMailbox(email.sender)
  const candidates: Array<{ name: string; address: string | undefined }> = [
    { name: from?.name ?? "", address: from?.address },
    { name: sender?.name ?? "", address: sender?.address },
    { name: "", address: email.returnPath },
  ]
  for (const candidate of candidates) {
    const address = usableAddress(candidate.address)
    if (address !== null) return { name: nonEmpty(cleanHeaderText(candidate.name)), address }
  }
  const rawFrom = email.headers.find((header) => header.key === "from")?.value ?? ""
  const claimed = cleanHeaderText(from?.name || decodeHeaderValue(rawFrom)).slice(0, 200)
  return { name: nonEmpty(claimed), address: UNKNOWN_SENDER_ADDRESS }
}

const recipientsOf = (addresses: ReadonlyArray<Address> | undefined): Array<string> =>
  (addresses ?? [])
    .flatMap((address) => (address.group === undefined ? [address] : address.group))
    .map((mailbox) => cleanHeaderText(mailbox.address))
    .filter((address) => address.length > 0)

const isoDateOf = (email: Email): string | null => {
  const raw = email.headers.find((header) => header.key === "date")?.value
  if (raw === undefined) return null
  const time = Date.parse(raw)
  return Number.isNaN(time) ? null : new Date(time).toISOString()
}

const toParsedAttachment = (attachment: Attachment, index: number): ParsedAttachment => {
  const mimeType = normalizeMimeType(attachment.mimeType)
  const givenName = attachment.filename ?? ""
  const filename = safeFilename(givenName, index, mimeType)
  const content = bytesOf(attachment.content)
  const dangerous =
    isDangerousAttachment(givenName, mimeType) || isDangerousAttachment(filename, mimeType) || looksExecutable(content)
  return {
    filename,
    mimeType,
    content,
    contentId: contentIdOf(attachment.contentId),
    disposition: dispositionOf(attachment.disposition),
    dangerous,
    previewable: !dangerous && isPreviewableImage(filename, mimeType),
  }
}

const bytesOf = (content: Attachment["content"]): Uint8Array =>
  typeof content === "string"
    ? new TextEncoder().encode(content)
    : content instanceof Uint8Array
      ? content
      : new Uint8Array(content)

const contentIdOf = (contentId: string | undefined): string | null =>
  nonEmpty(cleanHeaderText(contentId ?? "").replace(/^<+|>+$/g, "").trim())

const dispositionOf = (disposition: string | null): ParsedAttachment["disposition"] => {
  if (disposition === null || disposition === "") return null
  return disposition.toLowerCase() === "inline" ? "inline" : "attachment"
}
