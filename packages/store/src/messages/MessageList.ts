/**
 * GET /messages (spec 4.5): every filter, full-text `q` (decisions.md syntax) through the search
 * index `message_search`, keyset pagination over (received_at, id) with an opaque cursor signed
 * with BURNBOX_SECRET and bound to its filters, and a `total` of exactly the filtered set.
 */
import { dateTimeParts, type MessageSummary } from "@burnbox/domain"
import { parseSearchQuery, type SearchQuery, type SearchTerm } from "@burnbox/domain/search/index"
import { Effect, Result } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import type { Keyring } from "../platform/Keyring.ts"
import { pgText } from "../platform/PgText.ts"
import type { SearchIndex } from "../search/SearchIndex.ts"
import type { MailboxAccess } from "../sharing/MailboxAccess.ts"

export interface ListFilters {
  readonly q?: string
  readonly alias?: number
  readonly domain?: string
  readonly unread?: "true" | "false"
  readonly hasAttachment?: "true" | "false"
  readonly starred?: "true" | "false"
  readonly pinned?: "true" | "false"
  readonly tag?: number
  readonly archived?: "true" | "false"
  readonly trashed?: "true" | "false"
  readonly excludeShared?: "true" | "false"
  readonly dateFrom?: string
  readonly dateTo?: string
  readonly sort?: "newest" | "oldest"
}

interface CursorPosition {
  readonly receivedAt: string
  readonly id: number
}

/** The filters as they take effect, with their defaults: a list asked for with `sort=newest` is the list without it. */
const listDefaults: ListFilters = { sort: "newest", archived: "false", trashed: "false", excludeShared: "false" }

/** What a cursor belongs to: the account, and the filters as they take effect (all but the cursor and the page size). */
const filterKey = (accountId: number, filters: ListFilters) => {
  const effective: Record<string, string | number> = { ...listDefaults }
  for (const [key, value] of Object.entries(filters)) {
    if (value !== undefined && key !== "cursor" && key !== "limit") effective[key] = key === "q" ? String(value).trim() : value
  }
  if (effective["q"] === "") delete effective["q"]
  return JSON.stringify([accountId, Object.entries(effective).sort()])
}

export const encodeCursor = (keyring: Keyring["Service"], accountId: number, filters: ListFilters, position: CursorPosition): string => {
  const payload = Buffer.from(JSON.stringify({ r: position.receivedAt, i: position.id, f: keyring.sign("cursor-filters", filterKey(accountId, filters)) }))
    .toString("base64url")
  return `${payload}.${keyring.sign("cursor", payload)}`
}

export const decodeCursor = (keyring: Keyring["Service"], accountId: number, filters: ListFilters, cursor: string): CursorPosition | undefined => {
  const [payload, signature, ...rest] = cursor.split(".")
  if (payload === undefined || signature === undefined || rest.length > 0 || keyring.sign("cursor", payload) !== signature) return undefined
  try {
    const decoded = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as { r?: unknown; i?: unknown; f?: unknown }
    if (decoded.f !== keyring.sign("cursor-filters", filterKey(accountId, filters))) return undefined
    if (typeof decoded.r !== "string" || Number.isNaN(Date.parse(decoded.r)) || typeof decoded.i !== "number") return undefined
    return { receivedAt: decoded.r, id: decoded.i }
  } catch {
    return undefined
  }
}

export type CountedView = "mailbox" | "archive" | "trash"

/**
 * A date-time (DateTimeInput) to the microsecond PostgreSQL keeps, exactly: its local time with
 * the digits past the sixth dropped (a received_at at or before it is at or before the value),
 * its zone offset in minutes, and whether any dropped digit was not 0 (then a received_at at or
 * after the value is after the microsecond). The offset is applied in SQL (`instantOf`), not
 * written into the literal: RFC 3339 allows offsets up to ±23:59, PostgreSQL only up to ±15:59.
 */
const toMicroseconds = (value: string): { readonly local: string; readonly offsetMinutes: number; readonly beyond: boolean } => {
  const { date, hour, minute, second, fraction, offsetMinutes } = dateTimeParts(value)!
  const time = [hour, minute, second].map((n) => String(n).padStart(2, "0")).join(":")
  return { local: `${date}T${time}.${fraction.slice(0, 6).padEnd(6, "0")}`, offsetMinutes, beyond: /[1-9]/.test(fraction.slice(6)) }
}

/** The instant of a date-time (DateTimeInput) as a timestamptz, to the microsecond. */
const instantOf = (sql: SqlClient.SqlClient, value: ReturnType<typeof toMicroseconds>) =>
  sql`((${value.local}::timestamp - make_interval(mins => ${value.offsetMinutes})) AT TIME ZONE 'UTC')`

const likePattern = (value: string) => `%${value.replace(/[\\%_]/g, "\\$&")}%`

const bool = (value: "true" | "false" | undefined) => (value === undefined ? undefined : value === "true")

/**
 * The conditions of a list that reaches shared mail, split by where the rows live: `own` (the
 * reader's own mail, whose total `ownCounted` says mailbox_counts keeps), each shared mailbox
 * apart (`mailboxes`), and all of them together (`shared`). Each is the whole `where` but for
 * the mailboxes it reaches.
 */
export interface ListSplit {
  readonly own: Statement.Fragment
  readonly ownCounted: CountedView | undefined
  readonly mailboxes: ReadonlyArray<Statement.Fragment>
  readonly shared: Statement.Fragment
  /** The shared mailboxes' aliases, whose mail `shared` reaches. */
  readonly sharedAliases: ReadonlyArray<number>
  /**
   * The view of the shared mailboxes whose `total` their counters keep (alias_counts, migration
   * 0025, less the reader's own archive marks on them), when nothing narrows it further: the same
   * filters narrow both parts, so it is `ownCounted`.
   */
  readonly sharedCounted: CountedView | undefined
  /** For a search (SearchRequest `parts`): the reader's own mail, then each owner's shared mailboxes (the index's partition), by the owner's archive mark. */
  readonly searched: ReadonlyArray<Statement.Fragment>
}

/** The services the conditions of a list are made with. */
export interface ListServices {
  readonly sql: SqlClient.SqlClient
  readonly search: SearchIndex["Service"]
  readonly access: MailboxAccess["Service"]
}

/**
 * The SQL conditions of the filters (without the cursor), or the SearchQueryError of a bad `q`, whether
 * they read the search index (SearchIndex.readsIndex), the parsed `query`, and `view`: the first of them alone (the
 * mailboxes the account reads, the trash or not, the archive or not), which every row of the list meets. They read one
 * row `m` alone: reader state and the alias's domain are tested with EXISTS, so the count for `total` needs no join, and
 * the page query joins only for its columns. `m` is `messages`, or when `indexed` the search index `message_search`, which
 * has the same names for what the conditions read, holds the processed mail (its indexes only what is outside the trash),
 * words within the account, and is partitioned by account (migration 0012), so `m.account_id = ...` also picks the one
 * partition to read.
 */
export const listConditions = ({ access, search, sql }: ListServices, accountId: number, filters: ListFilters) =>
  Effect.gen(function*() {
    const trashed = bool(filters.trashed) ?? false
    // Search text as stored mail text is kept (pgText): a NUL, which no text column holds and
    // PostgreSQL refuses in a parameter, is dropped, as it was from the mail when it was stored.
    const q = filters.q === undefined ? undefined : pgText(filters.q)
    const domain = filters.domain === undefined ? undefined : pgText(filters.domain)
    let query: SearchQuery | undefined
    if (q !== undefined && q.trim() !== "") {
      const parsed = parseSearchQuery(q)
      if (Result.isFailure(parsed)) return yield* Effect.fail(parsed.failure)
      query = parsed.success
    }
    const reach = yield* access.reach(accountId, "read", "m", { excludeShared: bool(filters.excludeShared) ?? false })
    const indexed = search.readsIndex(query, trashed)
    const source = indexed ? "index" : "messages"
    /** The reader's own mark: `value` true needs a state row with it set; false, none with it set. */
    const mark = (column: "archived" | "is_read" | "starred" | "pinned", value: boolean) => {
      const marked = sql`EXISTS (SELECT 1 FROM message_states s WHERE s.message_id = m.id AND s.account_id = ${accountId} AND s.${sql.literal(column)})`
      return value ? marked : sql`NOT ${marked}`
    }
    // The archived filter does not apply to the trash (spec 4.5, rule 1).
    const archived = bool(filters.archived) ?? false
    /**
     * The conditions of the list on some of the mailboxes the reader reaches: `mailboxes`, the
     * condition picking them; `words`, the accounts whose words the index keeps for them (each
     * row's words are within its owner's account); `own`, whether they are the reader's own mail
     * (the index holds the owner's archive mark, the reader's there), shared mail (the reader's
     * mark is read from its marks) or both.
     */
    const conditionsOn = (mailboxes: Statement.Fragment, words: number | ReadonlyArray<number>, own: "own" | "shared" | "both") => {
      const conditions: Array<Statement.Fragment> = [mailboxes]
      // Also in the search index, which keeps a trashed message's row out of its indexes (WHERE trashed_at IS NULL).
      conditions.push(trashed ? sql`m.trashed_at IS NOT NULL` : sql`m.trashed_at IS NULL`)
      if (!trashed) {
        conditions.push(source === "index"
          // The search index holds the owner's archive mark (migration 0012): a word can match
          // thousands, each tested with a column of its row rather than against the marks. On mail
          // shared with the reader the mark is the reader's own, read from its marks.
          ? (own === "own"
            ? search.archived(archived)
            : own === "shared"
            ? mark("archived", archived)
            : sql`((m.account_id = ${accountId} AND ${search.archived(archived)}) OR (m.account_id <> ${accountId} AND ${mark("archived", archived)}))`)
          : mark("archived", archived))
      }
      // Beyond this point every condition narrows the view below what mailbox_counts keeps.
      const viewConditions = conditions.length
      if (filters.alias !== undefined) conditions.push(sql`m.alias_id = ${filters.alias}`)
      if (domain !== undefined) {
        conditions.push(sql`EXISTS (
          SELECT 1 FROM aliases al JOIN domains d ON d.id = al.domain_id WHERE al.id = m.alias_id AND d.name = ${domain.toLowerCase()})`)
      }
      const unread = bool(filters.unread)
      if (unread !== undefined) conditions.push(mark("is_read", !unread))
      const hasAttachment = bool(filters.hasAttachment)
      if (hasAttachment !== undefined) conditions.push(sql`m.has_attachments = ${hasAttachment}`)
      const starred = bool(filters.starred)
      if (starred !== undefined) conditions.push(mark("starred", starred))
      const pinned = bool(filters.pinned)
      if (pinned !== undefined) conditions.push(mark("pinned", pinned))
      if (filters.tag !== undefined) {
        conditions.push(sql`EXISTS (SELECT 1 FROM message_tags mt WHERE mt.message_id = m.id AND mt.account_id = ${accountId} AND mt.tag_id = ${filters.tag})`)
      }
      if (filters.dateFrom !== undefined) {
        const from = toMicroseconds(filters.dateFrom)
        conditions.push(from.beyond ? sql`m.received_at > ${instantOf(sql, from)}` : sql`m.received_at >= ${instantOf(sql, from)}`)
      }
      if (filters.dateTo !== undefined) conditions.push(sql`m.received_at <= ${instantOf(sql, toMicroseconds(filters.dateTo))}`)
      if (query !== undefined) {
        const senderText = sql`(coalesce(m.sender_name, '') || ' ' || m.sender_address)`
        const match = (term: SearchTerm, fragment: Statement.Fragment) => (term.negated ? sql`NOT (${fragment})` : fragment)
        for (const term of query.terms) {
          conditions.push(trashed
            // In the trash, `q` is answered from the database: subject and sender only (rule 2).
            ? match(term, sql`(m.subject ILIKE ${likePattern(term.value)} OR ${senderText} ILIKE ${likePattern(term.value)})`)
            // The words of the mailbox are only in the search index.
            : search.matchesTerm(words, term, source))
        }
        for (const term of query.from) conditions.push(match(term, sql`${senderText} ILIKE ${likePattern(term.value)}`))
        for (const term of query.to) {
          conditions.push(match(term, sql`(m.recipient ILIKE ${likePattern(term.value)} OR m.headers->>'to' ILIKE ${likePattern(term.value)})`))
        }
        for (const term of query.subject) conditions.push(match(term, sql`m.subject ILIKE ${likePattern(term.value)}`))
        for (const tag of query.tags) {
          conditions.push(match({ ...tag, kind: "text" }, sql`EXISTS (
            SELECT 1 FROM message_tags mt JOIN tags t ON t.id = mt.tag_id
            WHERE mt.message_id = m.id AND mt.account_id = ${accountId} AND t.name_key = ${tag.value.toLowerCase()})`))
        }
        if (query.hasAttachment !== undefined) conditions.push(sql`m.has_attachments = ${query.hasAttachment}`)
        if (query.isUnread !== undefined) conditions.push(mark("is_read", !query.isUnread))
        if (query.isStarred !== undefined) conditions.push(mark("starred", query.isStarred))
        if (query.isPinned !== undefined) conditions.push(mark("pinned", query.isPinned))
        if (query.before !== undefined) conditions.push(sql`m.received_at < ${new Date(`${query.before}T00:00:00Z`)}`)
        if (query.after !== undefined) conditions.push(sql`m.received_at >= ${new Date(`${query.after}T00:00:00Z`)}`)
      }
      return { conditions, viewConditions }
    }
    // The index keeps each message's words within its owner's account: a list that reaches mail
    // shared with the reader matches each row's words within the row's own account.
    const { conditions, viewConditions } = conditionsOn(reach.condition, reach.shared ? reach.owners : accountId, reach.shared ? "both" : "own")
    /** The view whose `total` mailbox_counts keeps (migration 0007, the owner's own mail), when nothing narrows it further. */
    const ownCounted: CountedView | undefined = conditions.length > viewConditions ? undefined : trashed ? "trash" : archived ? "archive" : "mailbox"
    const counted = reach.shared ? undefined : ownCounted
    // A guest's list, split: its own mail and each shared mailbox are disjoint (a shared mailbox
    // is never the reader's own), so a page reads each apart in list order on its own index
    // (account_id, received_at, id or alias_id, received_at, id) and merges them, and `total` is
    // the own mail's (kept in mailbox_counts when nothing narrows the view) plus the shared
    // mailboxes' (kept in alias_counts, less the reader's own archive marks, when nothing narrows
    // the view; else counted); one condition `account_id = $1 OR alias_id IN (...)` would read and
    // sort all of them for any page. In the search index, partitioned by account, each shared
    // mailbox is picked with its owner too (one partition), its words and marks as its own.
    const split: ListSplit | undefined = reach.shared
      ? {
        own: sql.and(conditionsOn(reach.own, accountId, "own").conditions),
        ownCounted,
        mailboxes: reach.sharedMailboxes.map((s) => sql.and(conditionsOn(sql`m.alias_id = ${s.aliasId}`, s.ownerId, "shared").conditions)),
        shared: sql.and(conditionsOn(sql`m.alias_id IN ${sql.in(reach.sharedMailboxes.map((s) => s.aliasId))}`, reach.owners, "shared").conditions),
        sharedAliases: reach.sharedMailboxes.map((s) => s.aliasId),
        sharedCounted: ownCounted,
        // Each owner's shared mailboxes together (one partition, one scan of its words), once for
        // the rows its owner archived and once for the others: the index's words are kept in two
        // partial GIN indexes by the owner's mark (migration 0017), which only a condition on it
        // can use (the reader's own mark, tested besides, is not the owner's).
        searched: [
          sql.and(conditionsOn(reach.own, accountId, "own").conditions),
          ...[...Map.groupBy(reach.sharedMailboxes, (s) => s.ownerId)].flatMap(([ownerId, mailboxes]) =>
            [false, true].map((ownerArchived) =>
              sql.and([
                ...conditionsOn(sql`m.account_id = ${ownerId} AND m.alias_id IN ${sql.in(mailboxes.map((s) => s.aliasId))}`, ownerId, "shared").conditions,
                search.archived(ownerArchived)
              ])
            )
          )
        ]
      }
      : undefined
    return { where: sql.and(conditions), view: sql.and(conditions.slice(0, viewConditions)), indexed, query, counted, split }
  })

export type { MessageSummary }
