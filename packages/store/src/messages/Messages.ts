/** Reading messages as their reader sees them (spec 2.10, 2.11). */
import { InvalidCursor, type MessageDetail, MessageNotFound, type MessagePage, type MessageSummary, ProcessingStatus, type SearchQueryError } from "@burnbox/domain"
import { UNKNOWN_SENDER_ADDRESS } from "@burnbox/domain/mail/index"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema, type Statement } from "effect/sql"
import { BlobStore } from "../platform/BlobStore.ts"
import { Keyring } from "../platform/Keyring.ts"
import { rowsDecoder } from "../platform/Rows.ts"
import { SearchIndex } from "../search/SearchIndex.ts"
import { MailboxAccess } from "../sharing/MailboxAccess.ts"
import { type CountedView, decodeCursor, encodeCursor, type ListFilters, listConditions, type ListSplit } from "./MessageList.ts"
import { aliasCountsOf, mailboxCountOf } from "./MailCounts.ts"

const AliasOfRow = Schema.Struct({ local_part: Schema.String, domain: Schema.String, label: Schema.NullOr(Schema.String) })
const TagOfRow = Schema.Struct({ id: Schema.Int, name: Schema.String, color: Schema.NullOr(Schema.String) })

/**
 * A summary's columns (`summarySelect`): the message row `m`, the reader's marks `s` (null without
 * a state row), and the row's alias and the reader's tags on it.
 */
const summaryFields = {
  id: Schema.Int,
  source: Schema.Literals(["smtp", "test"]),
  alias_id: Schema.Int,
  sender_name: Schema.NullOr(Schema.String),
  sender_address: Schema.String,
  envelope_from: Schema.NullOr(Schema.String),
  subject: Schema.String,
  snippet: Schema.String,
  received_at: Schema.Date,
  expires_at: Schema.Date,
  size_bytes: Schema.Int,
  is_read: Schema.NullOr(Schema.Boolean),
  starred: Schema.NullOr(Schema.Boolean),
  pinned: Schema.NullOr(Schema.Boolean),
  archived: Schema.NullOr(Schema.Boolean),
  trashed_at: Schema.NullOr(Schema.Date),
  trash_purge_at: Schema.NullOr(Schema.Date),
  has_attachments: Schema.Boolean,
  spam_score: Schema.NullOr(Schema.Number),
  auth: Schema.Struct({ spf: Schema.NullOr(Schema.String), dkim: Schema.NullOr(Schema.String), dmarc: Schema.NullOr(Schema.String) }),
  otp_codes: Schema.Array(Schema.String),
  processing_status: ProcessingStatus,
  // A message's alias outlives it (messages.alias_id references aliases ON DELETE CASCADE).
  alias: AliasOfRow,
  tags: Schema.Array(TagOfRow)
}
const SummaryRow = Schema.Struct(summaryFields)
type SummaryRow = typeof SummaryRow.Type

const DetailRow = Schema.Struct({
  ...summaryFields,
  headers: Schema.Record(Schema.String, Schema.Union([Schema.String, Schema.Array(Schema.String)])),
  text_body: Schema.NullOr(Schema.String),
  has_html: Schema.Boolean,
  verification_links: Schema.Array(Schema.String)
})


/** The sender as the message shows it: the From address, else the envelope sender. */
export const senderAddressOf = (row: { readonly sender_address: string; readonly envelope_from: string | null }): string =>
  row.sender_address || row.envelope_from || UNKNOWN_SENDER_ADDRESS

const toSummary = (row: SummaryRow): MessageSummary => {
  const isRead = row.is_read ?? false
  const alias = row.alias
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
    tags: row.tags.map((t) => ({ id: t.id, name: t.name, color: t.color })),
    processingStatus: row.processing_status
  }
}

/**
 * A summary's columns of `messages` (m) and the reader's marks (s), then its alias and the
 * reader's tags, each a subquery for the row (`summarySelect`): one statement reads a page as its
 * reader sees it. Joining aliases and domains into the page's own query cost more to plan (~2 ms,
 * every time: PostgreSQL keeps custom plans for these statements) than the page took to run; a
 * subquery per row is planned alone, and run only for the rows the page returns.
 */
const summaryColumns = `m.id, m.source, m.alias_id, m.sender_name, m.sender_address,
  m.envelope_from, m.subject, m.snippet, m.received_at, m.expires_at, m.size_bytes, s.is_read, s.starred, s.pinned,
  s.archived, m.trashed_at, m.trash_purge_at, m.has_attachments, m.spam_score, m.auth, m.otp_codes, m.processing_status`

/**
 * A page of GET /messages: its filters, cursor and size. `tail` (a wait on `sort=oldest`): the
 * last page too carries a cursor, just past its last message, and an empty page the cursor it was
 * asked with, so a reader following `nextCursor` waits for the next message.
 */
export type ListPage = ListFilters & { readonly cursor?: string; readonly limit?: number; readonly tail?: boolean }

export class Messages extends Context.Service<Messages, {
  /** A message the caller may read; MessageNotFound for a stranger's, a destroyed or a missing one. */
  readonly detail: (accountId: number, id: number, baseUrl: string) => Effect.Effect<MessageDetail, MessageNotFound>
  /** The original bytes of a message the caller may read. */
  readonly raw: (accountId: number, id: number) => Effect.Effect<Uint8Array, MessageNotFound>
  readonly list: (accountId: number, filters: ListPage) => Effect.Effect<MessagePage, InvalidCursor | SearchQueryError>
}>()("burnbox/Messages") {
  /** Needs BlobStore, SearchIndex and MailboxAccess besides the SQL client and the keyring. */
  static readonly layerNoDeps = Layer.effect(Messages, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const keyring = yield* Keyring
    const blobs = yield* BlobStore
    const search = yield* SearchIndex
    const access = yield* MailboxAccess

    const summaryRows = rowsDecoder(SummaryRow)
    const detailRows = rowsDecoder(DetailRow)
    const decodeTotals = rowsDecoder(Schema.Struct({ total: Schema.Int }))

    /**
     * The alias of a summary's row `m` (its `id` and `alias_id`) and the reader's tags on it:
     * select-list items. The label is the owner's, never shown to a guest (spec 5, rule 7).
     */
    const aliasAndTags = (accountId: number) =>
      sql`
        (SELECT json_build_object('local_part', al.local_part, 'domain', d.name,
                                  'label', CASE WHEN al.account_id = ${accountId} THEN al.label END)
          FROM aliases al JOIN domains d ON d.id = al.domain_id WHERE al.id = m.alias_id) AS alias,
        (SELECT coalesce(json_agg(json_build_object('id', t.id, 'name', t.name, 'color', t.color) ORDER BY t.name_key), '[]')
          FROM message_tags mt JOIN tags t ON t.id = mt.tag_id WHERE mt.message_id = m.id AND mt.account_id = ${accountId}) AS tags`

    /**
     * `total` of a list read from `messages`, as a scalar expression: the counts kept in
     * mailbox_counts for the plain mailbox, archive and trash; else the messages counted. (A
     * search counts in the index.)
     */
    const totalOf = (accountId: number, where: Statement.Fragment, view: CountedView | undefined) =>
      view === undefined
        ? sql`(SELECT count(*)::int FROM messages m WHERE ${where})`
        : mailboxCountOf(sql, accountId, view === "mailbox" ? "in_mailbox - archived" : view === "archive" ? "archived" : "trashed")

    /**
     * `total` of a guest's shared mailboxes (ListSplit), as a scalar expression: for the plain
     * mailbox, archive and trash, from their counts kept in alias_counts (migration 0025) and the
     * reader's own archive marks on their mail outside the trash, counted on two indexes alone
     * (message_states_archived, the reader's marks, joined to messages_alias_mailbox, the
     * mailboxes' ids outside the trash; migration 0025); else their messages counted.
     */
    const sharedTotalOf = (accountId: number, split: ListSplit) => {
      const view = split.sharedCounted
      if (view === undefined || split.sharedAliases.length === 0) return totalOf(accountId, split.shared, undefined)
      const aliases = sql.in(split.sharedAliases)
      const kept = (column: "in_mailbox" | "trashed") => aliasCountsOf(sql, split.sharedAliases, column)
      if (view === "trash") return kept("trashed")
      const archived = sql`(SELECT count(*)::int FROM message_states s JOIN messages m ON m.id = s.message_id
        WHERE s.account_id = ${accountId} AND s.archived AND m.alias_id IN ${aliases} AND m.trashed_at IS NULL)`
      return view === "archive" ? archived : sql`(${kept("in_mailbox")} - ${archived})`
    }

    /** `total` of a guest's list (ListSplit): its own mail's plus its shared mailboxes', each kept or counted. */
    const splitTotalOf = (accountId: number, split: ListSplit) =>
      sql`(${totalOf(accountId, split.own, split.ownCounted)} + ${sharedTotalOf(accountId, split)})`

    const list = Effect.fn("Messages.list")(function*(accountId: number, filters: ListPage) {
      const { cursor, limit = 50, tail = false, ...rest } = filters
      const { where, view, indexed, query, counted, split } = yield* listConditions({ sql, search, access }, accountId, rest)
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
      /** The page as its reader sees it: the first `limit` of `rows`. */
      const summarize = (rows: ReadonlyArray<SummaryRow>) => Effect.succeed(rows.slice(0, limit).map((row) => ({ row, summary: toSummary(row) })))
      const searched = indexed && query !== undefined
        ? search.search({
          query,
          where,
          view,
          after,
          order,
          limit,
          /** The page's rows read from messages, in order, for a query of its ids in the search index. */
          rowsOf: (ids, extra) =>
            sql`SELECT ${sql.literal(summaryColumns)}, ${aliasAndTags(accountId)}${extra} FROM (${ids}) page JOIN messages m ON m.id = page.id ${readerMarks} ORDER BY ${order}`,
          decode: summaryRows,
          summarize,
          ...(split === undefined ? {} : { parts: split.searched })
        })
        : undefined
      /** The first `limit + 1` rows meeting `condition` after the cursor, in list order. */
      const pageOf = (condition: Statement.Fragment) =>
        sql`SELECT ${sql.literal(summaryColumns)} FROM messages m ${readerMarks} WHERE ${condition} AND ${after} ORDER BY ${order} LIMIT ${limit + 1}`
      // A guest's page: its own mail's first rows and each shared mailbox's, merged (ListSplit).
      const pageRows = split === undefined
        ? pageOf(where)
        : sql`SELECT m.* FROM (${sql.join(" UNION ALL ", false)(split.mailboxes.map((c) => sql`(${pageOf(c)})`).concat(sql`(${pageOf(split.own)})`))}) m
              ORDER BY ${order} LIMIT ${limit + 1}`
      // One statement, one round trip: the total (a row even when the page is empty), and the
      // page's rows with their aliases and tags, read for the page's rows only.
      const listed = sql`
        SELECT c.total, p.* FROM (SELECT ${split === undefined ? totalOf(accountId, where, counted) : splitTotalOf(accountId, split)} AS total) c
        LEFT JOIN (
          SELECT m.*, ${aliasAndTags(accountId)} FROM (${pageRows}) m
        ) p ON true
        ORDER BY ${newest ? sql`p.received_at DESC, p.id DESC` : sql`p.received_at ASC, p.id ASC`}`.pipe(
        Effect.flatMap((raw) =>
          Effect.all([decodeTotals(raw.slice(0, 1)), summaryRows(raw.filter((r) => (r as { id: unknown }).id !== null))])
        ),
        Effect.flatMap(([[first], rows]) => Effect.map(summarize(rows), (page) => ({ rows, page, total: first!.total }))),
        Effect.orDie
      )
      const { page, rows, total } = yield* (searched ?? listed)
      const last = page[page.length - 1]?.row
      return {
        items: page.map((p) => p.summary),
        nextCursor: (rows.length > limit || tail) && last !== undefined
          ? encodeCursor(keyring, accountId, rest, { receivedAt: last.received_at.toISOString(), id: last.id })
          : tail && last === undefined
          ? cursor ?? null
          : null,
        total
      } satisfies MessagePage
    })

    const preferenceOf = SqlSchema.findAll({
      Request: Schema.Struct({ accountId: Schema.Int, sender: Schema.String }),
      Result: Schema.Struct({ always_load: Schema.Boolean }),
      execute: ({ accountId, sender }) =>
        sql`
          SELECT always_load FROM remote_image_preferences
          WHERE account_id = ${accountId} AND sender = ${sender}`
    })

    const detail = Effect.fn("Messages.detail")(function*(accountId: number, id: number, baseUrl: string) {
      const reachable = yield* access.mailboxes(accountId, "read", "m")
      const rows = yield* sql`
        SELECT ${sql.literal(summaryColumns)}, ${aliasAndTags(accountId)},
               m.headers, m.text_body, m.html_sanitized IS NOT NULL AS has_html, m.verification_links
        FROM messages m
        LEFT JOIN message_states s ON s.message_id = m.id AND s.account_id = ${accountId}
        WHERE m.id = ${id} AND ${reachable}`.pipe(Effect.flatMap(detailRows), Effect.orDie)
      const row = rows[0]
      if (row === undefined) return yield* Effect.fail(new MessageNotFound({ messageId: id }))
      const [attachments, alwaysLoad] = yield* Effect.all([
        blobs.attachments(id),
        preferenceOf({ accountId, sender: senderAddressOf(row).toLowerCase() }).pipe(
          Effect.orDie,
          Effect.map((preferences) => preferences[0]?.always_load ?? false)
        )
      ], { concurrency: 2 })
      const url = `${baseUrl}/messages/${row.id}`
      const htmlUrl = row.has_html ? `${url}/html` : null
      return {
        ...toSummary(row),
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
      access.mailboxes(accountId, "read", "m").pipe(
        Effect.flatMap((reachable) => blobs.readRaw(id, { reachable })),
        Effect.flatMap(Option.match({ onNone: () => Effect.fail(new MessageNotFound({ messageId: id })), onSome: Effect.succeed }))
      )

    return Messages.of({ detail, raw, list })
  }))

  /** With its own BlobStore, SearchIndex and MailboxAccess (each built once however many services ask for it). */
  static readonly layer = Messages.layerNoDeps.pipe(Layer.provide([BlobStore.layer, SearchIndex.layer, MailboxAccess.layer]))
}
