/** Reading messages as their reader sees them (spec 2.10, 2.11). */
import { InvalidCursor, type MessageDetail, type MessagePage, type MessageSummary, ProcessingStatus, type SearchQueryError } from "@burnbox/domain"
import { UNKNOWN_SENDER_ADDRESS } from "@burnbox/domain/mail/index"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema, type Statement } from "effect/sql"
import { BlobStore } from "../platform/BlobStore.ts"
import { Keyring } from "../platform/Keyring.ts"
import { rowsDecoder } from "../platform/Rows.ts"
import { SearchIndex } from "../search/SearchIndex.ts"
import { MailboxAccess } from "../sharing/MailboxAccess.ts"
import { type CountedView, decodeCursor, encodeCursor, type ListFilters, listConditions } from "./MessageList.ts"

/** A summary's columns (`summaryColumns`): the message row `m` and the reader's marks `s` (null without a state row). */
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
  processing_status: ProcessingStatus
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

const TagRow = Schema.Struct({ message_id: Schema.Int, id: Schema.Int, name: Schema.String, color: Schema.NullOr(Schema.String) })
type TagRow = typeof TagRow.Type
const AliasRow = Schema.Struct({ id: Schema.Int, local_part: Schema.String, domain: Schema.String, label: Schema.NullOr(Schema.String) })
type AliasRow = typeof AliasRow.Type

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

/**
 * A summary's columns of `messages` (m) and the reader's marks (s): its alias and tags are read
 * after, for the rows of the page only (`summariesOf`). Joining aliases and domains here cost
 * more to plan (~2 ms, every time: PostgreSQL keeps custom plans for these statements) than the
 * page took to run.
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
  readonly detail: (accountId: number, id: number, baseUrl: string) => Effect.Effect<MessageDetail | undefined>
  readonly raw: (accountId: number, id: number) => Effect.Effect<Uint8Array | undefined>
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
    const tagRows = rowsDecoder(TagRow)
    const aliasRows = rowsDecoder(AliasRow)
    const decodeTotals = rowsDecoder(Schema.Struct({ total: Schema.Int }))

    const tagsOf = (accountId: number, ids: ReadonlyArray<number>) =>
      ids.length === 0
        ? Effect.succeed(new Map<number, Array<TagRow>>())
        : sql`
            SELECT mt.message_id, t.id, t.name, t.color FROM message_tags mt JOIN tags t ON t.id = mt.tag_id
            WHERE mt.account_id = ${accountId} AND mt.message_id IN ${sql.in(ids)} ORDER BY t.name_key`.pipe(
            Effect.flatMap(tagRows),
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
        : sql`
            SELECT al.id, al.local_part, (SELECT d.name FROM domains d WHERE d.id = al.domain_id) AS domain, al.label
            FROM aliases al WHERE al.id IN ${sql.in([...new Set(ids)])}`.pipe(
            Effect.flatMap(aliasRows),
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
     * `total` of a list read from `messages`: the counts kept in mailbox_counts for the plain
     * mailbox, archive and trash; else the messages counted. (A search counts in the index.)
     */
    const totalOf = (accountId: number, where: Statement.Fragment, view: CountedView | undefined) => {
      const counted = view === undefined
        ? sql`SELECT count(*)::int AS total FROM messages m WHERE ${where}`
        : sql`SELECT coalesce((SELECT ${view === "mailbox" ? sql`in_mailbox - archived` : view === "archive" ? sql`archived` : sql`trashed`} FROM mailbox_counts WHERE account_id = ${accountId}), 0) AS total`
      return counted.pipe(Effect.flatMap(decodeTotals), Effect.map((rows) => rows[0]!.total))
    }

    const list = Effect.fn("Messages.list")(function*(accountId: number, filters: ListPage) {
      const { cursor, limit = 50, tail = false, ...rest } = filters
      const { where, view, indexed, query, counted } = yield* listConditions({ sql, search, access }, accountId, rest)
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
      /** The page as its reader sees it: the first `limit` of `rows`, with their aliases and tags. */
      const summarize = (rows: ReadonlyArray<SummaryRow>) => summariesOf(accountId, rows.slice(0, limit))
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
            sql`SELECT ${sql.literal(summaryColumns)}${extra} FROM (${ids}) page JOIN messages m ON m.id = page.id ${readerMarks} ORDER BY ${order}`,
          decode: summaryRows,
          summarize
        })
        : undefined
      const listed = Effect.all([
        sql`
          SELECT ${sql.literal(summaryColumns)} FROM messages m ${readerMarks}
          WHERE ${where} AND ${after}
          ORDER BY ${order}
          LIMIT ${limit + 1}`.pipe(Effect.flatMap(summaryRows)),
        totalOf(accountId, where, counted)
      ], { concurrency: 2 }).pipe(
        Effect.flatMap(([rows, total]) => Effect.map(summarize(rows), (page) => ({ rows, page, total }))),
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
      const rows = yield* sql`
        SELECT ${sql.literal(summaryColumns)},
               m.headers, m.text_body, m.html_sanitized IS NOT NULL AS has_html, m.verification_links
        FROM messages m
        LEFT JOIN message_states s ON s.message_id = m.id AND s.account_id = ${accountId}
        WHERE m.id = ${id} AND ${access.mailboxes(accountId, "read", "m")}`.pipe(Effect.flatMap(detailRows), Effect.orDie)
      const row = rows[0]
      if (row === undefined) return undefined
      const [[summary], attachments, alwaysLoad] = yield* Effect.all([
        summariesOf(accountId, [row]),
        blobs.attachments(id),
        preferenceOf({ accountId, sender: senderAddressOf(row).toLowerCase() }).pipe(
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
      blobs.readRaw(id, { reachable: access.mailboxes(accountId, "read", "m") }).pipe(Effect.map(Option.getOrUndefined))

    return Messages.of({ detail, raw, list })
  }))

  /** With its own BlobStore, SearchIndex and MailboxAccess (each built once however many services ask for it). */
  static readonly layer = Messages.layerNoDeps.pipe(Layer.provide([BlobStore.layer, SearchIndex.layer, MailboxAccess.layer]))
}
