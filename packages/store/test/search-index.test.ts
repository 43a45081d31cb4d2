/**
 * SearchIndex against the embedded PostgreSQL: what the pipeline's store indexes is found by its
 * words within its account; mail in the trash leaves the index and comes back when restored;
 * destroyed mail leaves it; the owner's archive mark moves a message from the mailbox's search to
 * the archive's.
 */
import { assert, layer } from "@effect/vitest"
import { parseSearchQuery } from "@burnbox/domain/search/index"
import { MailboxAccess, MailQueue, Mailstore, MessageActions, SearchIndex } from "@burnbox/store"
import { seedAlias, TestDatabase } from "@burnbox/testkit"
import { Effect, Layer, Result, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { deliverMail, type Mailbox } from "./store-mail.ts"

const Store = Layer.mergeAll(SearchIndex.layer, MailboxAccess.layer, MailQueue.layer, Mailstore.layer, MessageActions.layer).pipe(
  Layer.provideMerge(TestDatabase)
)

const decodeIds = Schema.decodeUnknownEffect(Schema.Array(Schema.Struct({ id: Schema.Int })))

/** A search of the account's mailbox (or archive) as GET /messages makes it, newest first: the page's ids and the total. */
const searchFor = (accountId: number, q: string, options: { readonly archived?: boolean; readonly limit?: number } = {}) =>
  Effect.gen(function*() {
    const search = yield* SearchIndex
    const access = yield* MailboxAccess
    const sql = yield* SqlClient.SqlClient
    const query = Result.getOrThrow(parseSearchQuery(q))
    assert.isTrue(search.readsIndex(query, false))
    const view = [yield* access.mailboxes(accountId, "read", "m"), sql`m.trashed_at IS NULL`, search.archived(options.archived ?? false)]
    const order = sql`m.received_at DESC, m.id DESC`
    const found = yield* search.search({
      query,
      where: sql.and([...view, ...query.terms.map((term) => search.matchesTerm(accountId, term, "index"))]),
      view: sql.and(view),
      after: sql`true`,
      order,
      limit: options.limit ?? 50,
      rowsOf: (ids, extra) => sql`SELECT m.id${extra} FROM (${ids}) page JOIN messages m ON m.id = page.id ORDER BY ${order}`,
      decode: (rows) => Effect.orDie(decodeIds(rows)),
      summarize: (rows) => Effect.succeed(rows.slice(0, options.limit ?? 50).map((row) => row.id))
    })
    return { ids: found.page, total: found.total }
  })

/** The message's row in the index: whether it is there, and its trash and archive marks. */
const indexRow = (id: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ trashed: boolean; archived: boolean }>`
      SELECT trashed_at IS NOT NULL AS trashed, archived FROM message_search WHERE id = ${id}`
    return row
  })

const deliver = (to: Mailbox, subject: string, text = "nothing else to say") => deliverMail(to, { subject, text })

layer(Store, { timeout: 120_000 })("SearchIndex", (it) => {
  it.effect("a stored message is found by one of its words, by several, and by a phrase, within its own account only", () =>
    Effect.gen(function*() {
      const mine = yield* seedAlias("search.mine")
      const theirs = yield* seedAlias("search.theirs")
      const id = yield* deliver(mine, "zebra crossing ahead", "mind the stripes")
      yield* deliver(theirs, "zebra crossing too")
      assert.deepStrictEqual(yield* searchFor(mine.accountId, "zebra"), { ids: [id], total: 1 })
      assert.deepStrictEqual(yield* searchFor(mine.accountId, "zebra stripes"), { ids: [id], total: 1 })
      assert.deepStrictEqual(yield* searchFor(mine.accountId, "\"zebra crossing\""), { ids: [id], total: 1 })
      assert.deepStrictEqual(yield* searchFor(mine.accountId, "zebra giraffe"), { ids: [], total: 0 })
      assert.deepStrictEqual(yield* searchFor(mine.accountId, "\"crossing zebra\""), { ids: [], total: 0 })
      const search = yield* SearchIndex
      const access = yield* MailboxAccess
      const sql = yield* SqlClient.SqlClient
      const zebra = Result.getOrThrow(parseSearchQuery("zebra")).terms[0]!
      assert.strictEqual(yield* search.count(sql.and([yield* access.mailboxes(mine.accountId, "read", "m"), sql`m.trashed_at IS NULL`, search.matchesTerm(mine.accountId, zebra, "index")])), 1)
    }))

  it.effect("a one-word search answers the same page and total whether the walk finds the page or comes short", () =>
    Effect.gen(function*() {
      const mailbox = yield* seedAlias("search.many")
      const ids: Array<number> = []
      for (let i = 0; i < 12; i++) ids.push(yield* deliver(mailbox, `parrot number ${i}`))
      yield* deliver(mailbox, "a quiet message")
      const newest = ids.toReversed()
      // limit 3: the walk of 40 rows holds 4 matches, a full page and one more.
      assert.deepStrictEqual(yield* searchFor(mailbox.accountId, "parrot", { limit: 3 }), { ids: newest.slice(0, 3), total: 12 })
      // limit 20: the walk comes short, the page is read from the matches.
      assert.deepStrictEqual(yield* searchFor(mailbox.accountId, "parrot", { limit: 20 }), { ids: newest, total: 12 })
    }))

  it.effect("mail in the trash leaves the index's searches and comes back when restored", () =>
    Effect.gen(function*() {
      const actions = yield* MessageActions
      const mailbox = yield* seedAlias("search.trash")
      const id = yield* deliver(mailbox, "walrus report")
      assert.deepStrictEqual(yield* searchFor(mailbox.accountId, "walrus"), { ids: [id], total: 1 })
      yield* actions.remove(mailbox.accountId, id, false)
      assert.deepStrictEqual(yield* searchFor(mailbox.accountId, "walrus"), { ids: [], total: 0 })
      // Its words are kept, out of every index of the table, for a restore.
      assert.deepStrictEqual(yield* indexRow(id), { trashed: true, archived: false })
      yield* actions.restore(mailbox.accountId, id)
      assert.deepStrictEqual(yield* searchFor(mailbox.accountId, "walrus"), { ids: [id], total: 1 })
    }))

  it.effect("a destroyed message leaves the index", () =>
    Effect.gen(function*() {
      const actions = yield* MessageActions
      const mailbox = yield* seedAlias("search.destroyed")
      const id = yield* deliver(mailbox, "pelican receipt")
      yield* actions.remove(mailbox.accountId, id, true)
      assert.deepStrictEqual(yield* searchFor(mailbox.accountId, "pelican"), { ids: [], total: 0 })
      assert.isUndefined(yield* indexRow(id))
    }))

  it.effect("the owner's archive mark moves a message from the mailbox's search to the archive's, and back", () =>
    Effect.gen(function*() {
      const actions = yield* MessageActions
      const mailbox = yield* seedAlias("search.archive")
      const id = yield* deliver(mailbox, "heron invoice")
      yield* actions.updateState(mailbox.accountId, id, { archived: true })
      assert.deepStrictEqual(yield* searchFor(mailbox.accountId, "heron"), { ids: [], total: 0 })
      assert.deepStrictEqual(yield* searchFor(mailbox.accountId, "heron", { archived: true }), { ids: [id], total: 1 })
      yield* actions.updateState(mailbox.accountId, id, { archived: false })
      assert.deepStrictEqual(yield* searchFor(mailbox.accountId, "heron"), { ids: [id], total: 1 })
    }))

  it.effect("a mailbox search with a word reads the index; the trash, from:, to:, subject: and only excluded words read messages", () =>
    Effect.gen(function*() {
      const search = yield* SearchIndex
      const reads = (q: string, trashed = false) => search.readsIndex(Result.getOrThrow(parseSearchQuery(q)), trashed)
      assert.isTrue(reads("invoice"))
      assert.isTrue(reads("invoice -draft has:attachment tag:work"))
      assert.isFalse(reads("invoice", true))
      assert.isFalse(reads("invoice from:shop"))
      assert.isFalse(reads("invoice to:me"))
      assert.isFalse(reads("invoice subject:receipt"))
      assert.isFalse(reads("-draft"))
      assert.isFalse(search.readsIndex(undefined, false))
    }))
})
