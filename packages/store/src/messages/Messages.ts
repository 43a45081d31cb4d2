/** Reading messages as their reader sees them (spec 2.10, 2.11). */
import { InvalidCursor, type MessageDetail, type MessagePage, type MessageSummary, type SearchQueryError } from "@burnbox/domain"
import { UNKNOWN_SENDER_ADDRESS } from "@burnbox/domain/mail/index"
import { Context, Effect, Layer, Option } from "effect"
import { SqlClient, type SqlError, type Statement } from "effect/sql"
import { Keyring } from "../platform/Keyring.ts"
import { type CountedView, decodeCursor, encodeCursor, type ListFilters, listConditions } from "./MessageList.ts"

interface DetailRow {
  id: number
  source: "smtp" | "test"
  alias_id: number
  sender_name: string | null
  sender_address: string
  envelope_from: string | null
  subject: string
  snippet: string
  received_at: Date
  expires_at: Date
  size_bytes: number
  is_read: boolean | null
  starred: boolean | null
  pinned: boolean | null
  archived: boolean | null
  trashed_at: Date | null
  trash_purge_at: Date | null
  has_attachments: boolean
  spam_score: number | null
  auth: { spf: string | null; dkim: string | null; dmarc: string | null }
  otp_codes: Array<string>
  processing_status: MessageDetail["processingStatus"]
  headers: Record<string, string | Array<string>>
  text_body: string | null
  has_html: boolean
  verification_links: Array<string>
}

type SummaryRow = Omit<DetailRow, "headers" | "text_body" | "has_html" | "verification_links">
type TagRow = { id: number; name: string; color: string | null }
type AliasRow = { id: number; local_part: string; domain: string; label: string | null }

/** The sender as the message shows it: the From address, else the envelope sender. */
export const senderAddressOf = (row: { readonly sender_address: string; readonly envelope_from: string | null }): string =>
  row.sender_address || row.envelope_from || UNKNOWN_SENDER_ADDRESS

const toSummary = (row: SummaryRow, alias: AliasRow, tags: ReadonlyArray<TagRow>): MessageSummary => {
  const isRead = row.is_read ?? false
  return {
    id: row.id,
    source: row.source,
    alias: { id: row.alias_id, address: `${alias.local_part}@${alias.domain}`, label: alias.label, domain: alias.domain },
    sender: { name: row.sender_name, address: senderAddressOf(row) },
    subject: row.subject,
    snippet: row.snippet,
    receivedAt: row.received_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
    sizeBytes: row.size_bytes,
    isRead,
    unread: !isRead,
    starred: row.starred ?? false,
    pinned: row.pinned ?? false,
    archived: row.archived ?? false,
    trashed: row.trashed_at !== null,
    trashedAt: row.trashed_at?.toISOString() ?? null,
    trashPurgeAt: row.trash_purge_at?.toISOString() ?? null,
    hasAttachments: row.has_attachments,
    spamScore: row.spam_score,
    auth: row.auth,
    otpCodes: row.otp_codes,
    tags: tags.map((t) => ({ id: t.id, name: t.name, color: t.color })),
    processingStatus: row.processing_status
  }
}

/** How many rows of the mailbox a search's first try walks for each row of its page (`list`). */
const walkBreadth = 10

/**
 * A summary's columns of `messages` (m) and the reader's marks (s): its alias and tags are read
 * after, for the rows of the page only (`summariesOf`). Joining aliases and domains here cost
 * more to plan (~2 ms, every time: PostgreSQL keeps custom plans for these statements) than the
 * page took to run.
 */
const summaryColumns = `m.id, m.source, m.alias_id, m.sender_name, m.sender_address,
  m.envelope_from, m.subject, m.snippet, m.received_at, m.expires_at, m.size_bytes, s.is_read, s.starred, s.pinned,
  s.archived, m.trashed_at, m.trash_purge_at, m.has_attachments, m.spam_score, m.auth, m.otp_codes, m.processing_status`

export class Messages extends Context.Service<Messages, {
  readonly detail: (accountId: number, id: number, baseUrl: string) => Effect.Effect<MessageDetail | undefined>
  readonly raw: (accountId: number, id: number) => Effect.Effect<Uint8Array | undefined>
  readonly list: (accountId: number, filters: ListFilters & { readonly cursor?: string; readonly limit?: number }) =>
    Effect.Effect<MessagePage, InvalidCursor | SearchQueryError>
}>()("burnbox/Messages") {
  static readonly layer = Layer.effect(Messages, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const keyring = yield* Keyring

    const tagsOf = (accountId: number, ids: ReadonlyArray<number>) =>
      ids.length === 0
        ? Effect.succeed(new Map<number, Array<TagRow>>())
        : sql<TagRow & { message_id: number }>`
            SELECT mt.message_id, t.id, t.name, t.color FROM message_tags mt JOIN tags t ON t.id = mt.tag_id
            WHERE mt.account_id = ${accountId} AND mt.message_id IN ${sql.in(ids)} ORDER BY t.name_key`.pipe(
            Effect.orDie,
            Effect.map((rows) => {
              const byMessage = new Map<number, Array<TagRow>>()
              for (const row of rows) byMessage.set(row.message_id, [...(byMessage.get(row.message_id) ?? []), row])
              return byMessage
            })
          )

    const aliasesOf = (ids: ReadonlyArray<number>) =>
      ids.length === 0
        ? Effect.succeed(new Map<number, AliasRow>())
        : sql<AliasRow>`
            SELECT al.id, al.local_part, (SELECT d.name FROM domains d WHERE d.id = al.domain_id) AS domain, al.label
            FROM aliases al WHERE al.id IN ${sql.in([...new Set(ids)])}`.pipe(
            Effect.orDie,
            Effect.flatMap((rows) => {
              const aliases = new Map(rows.map((row) => [row.id, row]))
              // A message's alias outlives it (messages.alias_id references aliases ON DELETE CASCADE).
              return ids.every((id) => aliases.has(id)) ? Effect.succeed(aliases) : Effect.die(new Error("a message's alias is missing"))
            })
          )

    /** The rows as their reader sees them, with their aliases and tags. */
    const summariesOf = <Row extends SummaryRow>(accountId: number, rows: ReadonlyArray<Row>) =>
      Effect.map(
        Effect.all([aliasesOf(rows.map((r) => r.alias_id)), tagsOf(accountId, rows.map((r) => r.id))], { concurrency: 2 }),
        ([aliases, tags]) => rows.map((row) => ({ row, summary: toSummary(row, aliases.get(row.alias_id)!, tags.get(row.id) ?? []) }))
      )

    /**
     * A statement on the search index, planned without sequential scans. Its rows are narrow
     * (migration 0012), so the planner prices reading a whole partition as cheap, not knowing
     * that testing a row's words fetches them out of line: for a word in most of a mailbox it
     * would choose that (~1 s) over the GIN index (tens of ms).
     */
    const onSearchIndex = <A>(statement: Effect.Effect<A, SqlError.SqlError>) =>
      sql.withTransaction(sql`SET LOCAL enable_seqscan = off`.pipe(Effect.andThen(statement)))

    /**
     * `total`: the search index counted for a search; the counts kept in mailbox_counts for the
     * plain mailbox, archive and trash; else the messages counted.
     */
    const totalOf = (accountId: number, where: Statement.Fragment, indexed: boolean, view: CountedView | undefined) => {
      const counted = indexed
        ? onSearchIndex(sql<{ total: number }>`SELECT count(*)::int AS total FROM message_search m WHERE ${where}`.unprepared)
        : view === undefined
        ? sql<{ total: number }>`SELECT count(*)::int AS total FROM messages m WHERE ${where}`
        : sql<{ total: number }>`SELECT coalesce((SELECT ${view === "mailbox" ? sql`in_mailbox - archived` : view === "archive" ? sql`archived` : sql`trashed`} FROM mailbox_counts WHERE account_id = ${accountId}), 0) AS total`
      return Effect.map(counted, (rows) => rows[0]!.total)
    }

    const list = Effect.fn("Messages.list")(function*(accountId: number, filters: ListFilters & { readonly cursor?: string; readonly limit?: number }) {
      const { cursor, limit = 50, ...rest } = filters
      const { where, view, indexed, oneWord, counted } = yield* listConditions(sql, accountId, rest)
      const newest = (rest.sort ?? "newest") === "newest"
      let position: { receivedAt: string; id: number } | undefined
      if (cursor !== undefined) {
        position = decodeCursor(keyring, accountId, rest, cursor)
        if (position === undefined) return yield* Effect.fail(new InvalidCursor())
      }
      const after = position === undefined
        ? sql`true`
        : newest
        ? sql`(m.received_at, m.id) < (${new Date(position.receivedAt)}, ${position.id})`
        : sql`(m.received_at, m.id) > (${new Date(position.receivedAt)}, ${position.id})`
      const order = newest ? sql`m.received_at DESC, m.id DESC` : sql`m.received_at ASC, m.id ASC`
      const readerMarks = sql`LEFT JOIN message_states s ON s.message_id = m.id AND s.account_id = ${accountId}`
      /** The page's rows read from messages, in order, for `ids`: a query of its ids in the search index. */
      const pageOf = (ids: Statement.Fragment, extra = sql``) =>
        sql`SELECT ${sql.literal(summaryColumns)}${extra} FROM (${ids}) page JOIN messages m ON m.id = page.id ${readerMarks} ORDER BY ${order}`
      const total = totalOf(accountId, where, indexed, counted)
      /** The matches of a search, from the search index (its GIN index), for the page and the total. */
      const matches = sql`WITH matches AS MATERIALIZED (SELECT m.id, m.received_at FROM message_search m WHERE ${where})`
      const matchesPage = sql`SELECT m.id, m.received_at FROM matches m WHERE ${after} ORDER BY ${order} LIMIT ${limit + 1}`
      // How a search finds its page and `total` (`q` on the mailbox: plans in bench-list.ts):
      // - One word. Two statements at once. One walks the mailbox in the list's order
      //   from the cursor (migration 0015), testing each row's words, at most `walkBreadth` rows
      //   for each row of the page: for a word in a tenth of the mailbox or more, that finds the
      //   page within a few hundred rows. The other counts the matches. When the walk comes short
      //   (a rarer word, or the end of the mailbox), the page is read from the matches, sorted.
      // - Several words, which together rarely match much, or a phrase, whose matches are each
      //   tested against the row's words out of line: one statement reads the matches once, for
      //   both the page and the total.
      // Reading and sorting every match for the page costs about what counting them does, and
      // walking further would fetch each candidate's words out of line to test them. Unprepared,
      // so each search is planned for its words. A page past the last match has no row to carry
      // the total: it is counted alone.
      const walked = sql<SummaryRow>`${
        pageOf(sql`
          SELECT m.id, m.received_at FROM (
            SELECT m.id, m.account_id, m.alias_id, m.received_at, m.has_attachments, m.trashed_at, m.archived, m.search
            FROM message_search m WHERE ${view} AND ${after} ORDER BY ${order} LIMIT ${walkBreadth * (limit + 1)}
          ) m WHERE ${where} ORDER BY ${order} LIMIT ${limit + 1}`)
      }`.unprepared
      const sorted = onSearchIndex(sql<SummaryRow>`${matches} ${pageOf(matchesPage)}`.unprepared)
      /** The page of `rows` (the first `limit`) as its reader sees it, with the list's total. */
      const summarized = (rows: ReadonlyArray<SummaryRow>, matched: number) =>
        Effect.map(summariesOf(accountId, rows.slice(0, limit)), (page) => ({ rows, page, total: matched }))
      const searched = oneWord
        ? Effect.all([
          // The count first: it takes longest, and a statement is built and sent before the next
          // starts. A walk that finds the page reads its aliases and tags while the count runs.
          total,
          Effect.flatMap(walked, (rows) => rows.length > limit ? Effect.asSome(summarized(rows, 0)) : Effect.succeedNone)
        ], { concurrency: 2 }).pipe(
          Effect.flatMap(([matched, walkedPage]) =>
            Option.match(walkedPage, {
              onSome: (found) => Effect.succeed({ ...found, total: matched }),
              onNone: () => Effect.flatMap(sorted, (rows) => summarized(rows, matched))
            })
          )
        )
        : onSearchIndex(sql<SummaryRow & { total: number }>`${matches} ${pageOf(matchesPage, sql`, (SELECT count(*)::int FROM matches) AS total`)}`.unprepared).pipe(
          Effect.flatMap((rows) => rows[0] !== undefined ? summarized(rows, rows[0].total) : Effect.flatMap(total, (t) => summarized(rows, t)))
        )
      const listed = Effect.all([
        sql<SummaryRow>`
          SELECT ${sql.literal(summaryColumns)} FROM messages m ${readerMarks}
          WHERE ${where} AND ${after}
          ORDER BY ${order}
          LIMIT ${limit + 1}`,
        total
      ], { concurrency: 2 }).pipe(Effect.flatMap(([rows, t]) => summarized(rows, t)))
      const { rows, page, total: totalFound } = yield* Effect.orDie(indexed ? searched : listed)
      const last = page[page.length - 1]?.row
      return {
        items: page.map((p) => p.summary),
        nextCursor: rows.length > limit && last !== undefined
          ? encodeCursor(keyring, accountId, rest, { receivedAt: last.received_at.toISOString(), id: last.id })
          : null,
        total: totalFound
      } satisfies MessagePage
    })

    const detail = Effect.fn("Messages.detail")(function*(accountId: number, id: number, baseUrl: string) {
      const rows = yield* sql<DetailRow>`
        SELECT ${sql.literal(summaryColumns)},
               m.headers, m.text_body, m.html_sanitized IS NOT NULL AS has_html, m.verification_links
        FROM messages m
        LEFT JOIN message_states s ON s.message_id = m.id AND s.account_id = ${accountId}
        WHERE m.id = ${id} AND m.account_id = ${accountId}`.pipe(Effect.orDie)
      const row = rows[0]
      if (row === undefined) return undefined
      const [[summary], attachments, alwaysLoad] = yield* Effect.all([
        summariesOf(accountId, [row]),
        sql<{ id: number; filename: string; mime_type: string; size_bytes: number; dangerous: boolean; previewable: boolean }>`
          SELECT id, filename, mime_type, size_bytes, dangerous, previewable FROM attachments WHERE message_id = ${id} ORDER BY position`
          .pipe(Effect.orDie),
        sql<{ always_load: boolean }>`
          SELECT always_load FROM remote_image_preferences
          WHERE account_id = ${accountId} AND sender = ${senderAddressOf(row).toLowerCase()}`.pipe(
          Effect.orDie,
          Effect.map((preferences) => preferences[0]?.always_load ?? false)
        )
      ], { concurrency: 3 })
      const url = `${baseUrl}/messages/${row.id}`
      const htmlUrl = row.has_html ? `${url}/html` : null
      return {
        ...summary!.summary,
        headers: row.headers,
        textBody: row.text_body,
        htmlUrl,
        remoteImages: htmlUrl === null ? null : { blockedUrl: htmlUrl, loadUrl: `${htmlUrl}?remote=1`, alwaysLoadFromSender: alwaysLoad },
        rawUrl: `${url}/raw`,
        verificationLinks: row.verification_links,
        attachments: attachments.map((a) => ({
          id: a.id,
          filename: a.filename,
          mimeType: a.mime_type,
          sizeBytes: a.size_bytes,
          dangerous: a.dangerous,
          downloadUrl: `${url}/attachments/${a.id}`,
          previewUrl: a.previewable ? `${url}/attachments/${a.id}/preview` : null
        }))
      } satisfies MessageDetail
    })

    const raw = (accountId: number, id: number) =>
      sql<{ raw: Uint8Array }>`
        SELECT r.raw FROM message_raw r JOIN messages m ON m.id = r.message_id
        WHERE m.id = ${id} AND m.account_id = ${accountId}`.pipe(Effect.orDie, Effect.map((rows) => rows[0]?.raw))

    return Messages.of({ detail, raw, list })
  }))
}
