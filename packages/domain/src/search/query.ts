import { Data, Result } from "effect"

// The `q` parameter of GET /messages (decisions.md, "Search syntax of `q`"), parsed into a plain
// value a SQL builder can walk: every list is ANDed, every entry says whether it is excluded.

/** A value to match, or (negated) to exclude. */
export interface SearchMatch {
  readonly value: string
  readonly negated: boolean
}

/** Free text: `text` is one word as typed, `phrase` the words between double quotes. */
export interface SearchTerm extends SearchMatch {
  readonly kind: "text" | "phrase"
}

export interface SearchQuery {
  /** Bare words and phrases: subject, sender, text body and attachment names. */
  readonly terms: ReadonlyArray<SearchTerm>
  readonly from: ReadonlyArray<SearchTerm>
  readonly to: ReadonlyArray<SearchTerm>
  readonly subject: ReadonlyArray<SearchTerm>
  /** Tag names as typed; `negated` means "does not carry this tag". */
  readonly tags: ReadonlyArray<SearchMatch>
  /** Absent: no condition. `has:attachment` gives true, `-has:attachment` false. */
  readonly hasAttachment?: boolean
  readonly isUnread?: boolean
  readonly isStarred?: boolean
  readonly isPinned?: boolean
  /** `YYYY-MM-DD`, exclusive: received before this day begins. */
  readonly before?: string
  /** `YYYY-MM-DD`, inclusive: received on this day or later. */
  readonly after?: string
}

export const searchQueryLimits = { maxLength: 512, maxTerms: 32 } as const

export class SearchQueryTooLong extends Data.TaggedError("SearchQueryTooLong")<{
  readonly length: number
  readonly maxLength: number
}> {
  override get message(): string {
    return `q is ${this.length} characters long; at most ${this.maxLength} are allowed`
  }
}

export class SearchQueryTooManyTerms extends Data.TaggedError("SearchQueryTooManyTerms")<{
  readonly count: number
  readonly maxTerms: number
}> {
  override get message(): string {
    return `q has ${this.count} terms; at most ${this.maxTerms} are allowed`
  }
}

export class InvalidSearchDate extends Data.TaggedError("InvalidSearchDate")<{
  /** The offending term exactly as typed, e.g. `-before:2024-02-30`. */
  readonly term: string
}> {
  override get message(): string {
    return `${this.term}: dates are written YYYY-MM-DD and must exist in the calendar`
  }
}

export type SearchQueryError = SearchQueryTooLong | SearchQueryTooManyTerms | InvalidSearchDate

// ---------------------------------------------------------------------------------------------
// Tokens: `[-]"phrase"`, `[-]word`, `[-]field:value`, `[-]field:"quoted value"`.

interface Token {
  /** The token as typed, sign and quotes included, for error messages. */
  readonly raw: string
  readonly negated: boolean
  /** The `field:` prefix as typed (letters only), or null for free text. */
  readonly field: string | null
  readonly value: string
  readonly quoted: boolean
}

const whitespace = /\s/
const quote = "\""
const negationSign = "-"
const fieldPrefix = /^([A-Za-z]+):(.*)$/s

function isWhitespace(char: string | undefined): boolean {
  return char !== undefined && whitespace.test(char)
}

/** Reads `"..."` starting at the opening quote; an unterminated quote takes the rest of `q`. */
function readQuoted(q: string, openAt: number): { readonly value: string; readonly end: number } {
  const closeAt = q.indexOf(quote, openAt + 1)
  if (closeAt === -1) return { value: q.slice(openAt + 1), end: q.length }
  return { value: q.slice(openAt + 1, closeAt), end: closeAt + 1 }
}

/** Reads up to whitespace or a quote (a quote inside a word starts a new token). */
function readBare(q: string, start: number): number {
  let end = start
  while (end < q.length && q[end] !== quote && !isWhitespace(q[end])) end++
  return end
}

/** Reads one token at `start` (not whitespace); returns null for an empty one (`-`, `""`). */
function readToken(q: string, start: number): { readonly token: Token | null; readonly end: number } {
  const negated = q[start] === negationSign
  const bodyAt = negated ? start + 1 : start
  if (q[bodyAt] === quote) {
    const phrase = readQuoted(q, bodyAt)
    const token = { raw: q.slice(start, phrase.end), negated, field: null, value: phrase.value, quoted: true }
    return { token: phrase.value.length > 0 ? token : null, end: phrase.end }
  }
  const wordEnd = readBare(q, bodyAt)
  const word = q.slice(bodyAt, wordEnd)
  const prefixed = fieldPrefix.exec(word)
  const field = prefixed?.[1]
  if (field === undefined) {
    const token = { raw: q.slice(start, wordEnd), negated, field: null, value: word, quoted: false }
    return { token: word.length > 0 ? token : null, end: wordEnd }
  }
  const bareValue = prefixed?.[2] ?? ""
  // `subject:"two words"`: the quoted part belongs to the field only when it follows the colon.
  if (bareValue.length === 0 && q[wordEnd] === quote) {
    const phrase = readQuoted(q, wordEnd)
    return { token: { raw: q.slice(start, phrase.end), negated, field, value: phrase.value, quoted: true }, end: phrase.end }
  }
  return { token: { raw: q.slice(start, wordEnd), negated, field, value: bareValue, quoted: false }, end: wordEnd }
}

function tokenize(q: string): ReadonlyArray<Token> {
  const tokens: Array<Token> = []
  let position = 0
  while (position < q.length) {
    if (isWhitespace(q[position])) {
      position++
      continue
    }
    const { end, token } = readToken(q, position)
    if (token !== null) tokens.push(token)
    position = end
  }
  return tokens
}

// ---------------------------------------------------------------------------------------------
// Interpretation: one small handler per field; anything not a known filter is searched as text.

type QueryDraft = {
  -readonly [K in keyof SearchQuery]: SearchQuery[K] extends ReadonlyArray<infer A> ? Array<A> : SearchQuery[K]
}

type TokenHandler = (token: Token, draft: QueryDraft) => Result.Result<void, InvalidSearchDate>

const ok: Result.Result<void, never> = Result.succeed(undefined)

function textTerm(token: Token, value: string): SearchTerm {
  return { kind: token.quoted ? "phrase" : "text", value, negated: token.negated }
}

/** Unknown prefixes and unknown `has:`/`is:` values: the whole `field:value` is searched. */
function addAsText(token: Token, draft: QueryDraft): Result.Result<void, never> {
  const value = token.field === null ? token.value : `${token.field}:${token.value}`
  draft.terms.push(textTerm(token, value))
  return ok
}

function addressOrSubject(list: "from" | "to" | "subject"): TokenHandler {
  return (token, draft) => {
    draft[list].push(textTerm(token, token.value))
    return ok
  }
}

const addTag: TokenHandler = (token, draft) => {
  draft.tags.push({ value: token.value, negated: token.negated })
  return ok
}

const addHas: TokenHandler = (token, draft) => {
  if (token.value.toLowerCase() !== "attachment") return addAsText(token, draft)
  draft.hasAttachment = !token.negated
  return ok
}

const isFlags = new Map<string, "isUnread" | "isStarred" | "isPinned">([
  ["unread", "isUnread"],
  ["starred", "isStarred"],
  ["pinned", "isPinned"]
])

// A repeated or contradicted flag (`is:unread -is:unread`) takes the last one written.
const addIs: TokenHandler = (token, draft) => {
  const flag = isFlags.get(token.value.toLowerCase())
  if (flag === undefined) return addAsText(token, draft)
  draft[flag] = !token.negated
  return ok
}

const isoDate = /^(\d{4})-(\d{2})-(\d{2})$/

/** `YYYY-MM-DD` naming a day that exists (no 2024-02-30, no year 0). */
export function isCalendarDate(text: string): boolean {
  const parts = isoDate.exec(text)
  if (parts === null) return false
  const [year, month, day] = [Number(parts[1]), Number(parts[2]), Number(parts[3])]
  const date = new Date(0)
  date.setUTCFullYear(year, month - 1, day) // setUTCFullYear keeps years below 100 as written
  return year >= 1 && date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 &&
    date.getUTCDate() === day
}

// `before:D` is "earlier than day D" and `after:D` is "day D or later", so negating one gives the
// other on the same day. Repeats keep the narrowest bound, since every condition must hold.
function addDateBound(bound: "before" | "after"): TokenHandler {
  return (token, draft) => {
    if (!isCalendarDate(token.value)) return Result.fail(new InvalidSearchDate({ term: token.raw }))
    const effective = token.negated ? (bound === "before" ? "after" : "before") : bound
    const current = draft[effective]
    if (effective === "before") {
      draft.before = current === undefined || token.value < current ? token.value : current
    } else {
      draft.after = current === undefined || token.value > current ? token.value : current
    }
    return ok
  }
}

const fieldHandlers = new Map<string, TokenHandler>([
  ["from", addressOrSubject("from")],
  ["to", addressOrSubject("to")],
  ["subject", addressOrSubject("subject")],
  ["tag", addTag],
  ["has", addHas],
  ["is", addIs],
  ["before", addDateBound("before")],
  ["after", addDateBound("after")]
])

function applyToken(token: Token, draft: QueryDraft): Result.Result<void, InvalidSearchDate> {
  if (token.field === null) return addAsText(token, draft)
  const handler = fieldHandlers.get(token.field.toLowerCase())
  if (handler === undefined) return addAsText(token, draft)
  // A filter with nothing after the colon (often a half-typed query) adds no condition.
  if (token.value.length === 0) return ok
  return handler(token, draft)
}

/**
 * Parses `q`. Fails with `SearchQueryTooLong` past 512 characters, `SearchQueryTooManyTerms`
 * past 32 terms, and `InvalidSearchDate` for a `before:`/`after:` that is not a real day.
 * Values keep the case they were typed in; matching case-insensitively is the search's job.
 */
export function parseSearchQuery(q: string): Result.Result<SearchQuery, SearchQueryError> {
  const { maxLength, maxTerms } = searchQueryLimits
  if (q.length > maxLength) return Result.fail(new SearchQueryTooLong({ length: q.length, maxLength }))
  const tokens = tokenize(q)
  if (tokens.length > maxTerms) return Result.fail(new SearchQueryTooManyTerms({ count: tokens.length, maxTerms }))
  const draft: QueryDraft = { terms: [], from: [], to: [], subject: [], tags: [] }
  for (const token of tokens) {
    const applied = applyToken(token, draft)
    if (Result.isFailure(applied)) return Result.fail(applied.failure)
  }
  return Result.succeed(draft)
}

/** True when `query` sets no condition at all (for example `q` was blank or only `-`). */
export function isEmptySearchQuery(query: SearchQuery): boolean {
  const lists = [query.terms, query.from, query.to, query.subject, query.tags]
  const flags = [query.hasAttachment, query.isUnread, query.isStarred, query.isPinned, query.before, query.after]
  return lists.every((list) => list.length === 0) && flags.every((flag) => flag === undefined)
}
