/**
 * SearchIndex: the full-text index of the mailbox (architecture.md, "SearchIndex"). The live
 * layer is the table `message_search` (migrations 0010-0017): the words of each processed
 * message scoped to its account, with the owner's archive mark, in GIN indexes that hold only
 * mail outside the trash. Its writes and its queries are here, so the index can move (to
 * OpenSearch) by giving another layer:
 * - the pipeline's store statement takes `indexFragment` as a step, so a message is stored and
 *   indexed by one statement, and reads the archive marks again after (`refreshArchiveMarks`);
 * - GET /messages with `q` asks it whether the list reads the index (`readsIndex`), for the
 *   conditions that match words (`matchesTerm`) and the owner's archive mark (`archived`), and
 *   runs its statements (`count`, `search`);
 * - changes to the trash and to archive marks, and destroyed mail, are told to it (`followChanges`).
 */
import type { SearchQuery, SearchTerm } from "@burnbox/domain/search/index"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, type SqlError, type Statement } from "effect/sql"
import { rowsDecoder } from "../platform/Rows.ts"

/** How many rows of the mailbox a one-word search's first try walks for each row of its page (`search`). */
const walkBreadth = 10

/** SearchIndex.readsIndex of the PostgreSQL index. */
const readsIndex = (query: SearchQuery | undefined, trashed: boolean): boolean =>
  query !== undefined && !trashed && query.terms.some((t) => !t.negated) &&
  query.from.length === 0 && query.to.length === 0 && query.subject.length === 0

/** Whether a row is listed for one word it has (besides any other filter): no phrase, no second word. */
const oneWord = (query: SearchQuery) => {
  const wanted = query.terms.filter((t) => !t.negated)
  return wanted.length === 1 && wanted[0]!.kind !== "phrase"
}

/** A search of one account's list (GET /messages with `q`, outside the trash). */
export interface SearchRequest<Row, Page> {
  readonly query: SearchQuery
  /** Every condition of the list, on the index row `m` (`readsIndex`: the list's conditions hold for it). */
  readonly where: Statement.Fragment
  /** The first of them alone: the mailboxes, the trash and the archive, which every row of the list meets. */
  readonly view: Statement.Fragment
  /** The cursor's condition on `m` (`true` for the first page). */
  readonly after: Statement.Fragment
  /** The list's order on `m`. */
  readonly order: Statement.Fragment
  /** The page size: `limit + 1` rows are read, the last one saying that there are more. */
  readonly limit: number
  /**
   * The statement reading the page's rows as the caller wants them, in order, for a query of
   * the page's `id` and `received_at` (`ids`), with `extra` select-list items appended.
   */
  readonly rowsOf: (ids: Statement.Fragment, extra: Statement.Fragment) => Statement.Fragment
  readonly decode: (rows: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<Row>>
  /** What the caller makes of the rows it read (started while the count still runs, when it can). */
  readonly summarize: (rows: ReadonlyArray<Row>) => Effect.Effect<Page>
  /**
   * A guest's list, split (MessageList.ts ListSplit): `where` on disjoint parts of the mailboxes
   * (its own mail, each shared mailbox with its owner's partition), whose matches are read apart,
   * each on its own partition and words, and counted together.
   */
  readonly parts?: ReadonlyArray<Statement.Fragment>
}

/** The rows read (up to `limit + 1`), what the caller made of them, and the number of matches. */
export interface SearchResult<Row, Page> {
  readonly rows: ReadonlyArray<Row>
  readonly page: Page
  readonly total: number
}

export class SearchIndex extends Context.Service<SearchIndex, {
  /**
   * A data-modifying step that indexes the rows of `rows` (a CTE with id, account_id, alias_id,
   * received_at, has_attachments, trashed_at, subject, sender_text, search_text), with the owner's
   * archive mark as the statement sees it (`refreshArchiveMarks` reads it again after commit).
   */
  readonly indexFragment: (rows: string) => Statement.Fragment
  /**
   * The owners' archive marks of just-indexed messages, read again once the rows exist (migration
   * 0012): a mark committed after the indexing statement took its snapshot is seen here, and a mark
   * committed after this reads the row itself (its trigger waits for the message's lock).
   */
  readonly refreshArchiveMarks: (ids: ReadonlyArray<number>) => Effect.Effect<void, SqlError.SqlError>
  /**
   * Messages that went to the trash or came back, whose owner's archive mark changed, or that
   * are being destroyed, in the caller's transaction. `message_search` follows them by itself,
   * in the same transaction: triggers on `messages.trashed_at` and on the owner's
   * `message_states.archived` (migration 0012), and its foreign key's cascade. An index kept
   * elsewhere updates them here.
   */
  readonly followChanges: (messageIds: ReadonlyArray<number>) => Effect.Effect<void, SqlError.SqlError>

  /**
   * Whether a list reads the index rather than `messages`: a search of the mailbox (not the
   * trash) with at least one word to find and no filter on a column only `messages` has (from:,
   * to:, subject:).
   */
  readonly readsIndex: (query: SearchQuery | undefined, trashed: boolean) => boolean
  /**
   * The condition that a message has (or, negated, has not) the words of `term`, within the
   * account (several: each row within its own account, the owner's, for a list reaching shared
   * mail of those accounts): on the index row `m` when the list reads the index, else on the `messages` row `m`
   * (which finds its words in the index; an unprocessed message has none, so it matches no term,
   * and no excluded one either).
   */
  readonly matchesTerm: (account: number | ReadonlyArray<number>, term: SearchTerm, row: "index" | "messages") => Statement.Fragment
  /** The owner's archive mark, on the index row `m`. */
  readonly archived: (archived: boolean) => Statement.Fragment
  /** How many index rows meet `where` (on `m`). */
  readonly count: (where: Statement.Fragment) => Effect.Effect<number>
  /** A page of a search and its total. */
  readonly search: <Row, Page>(request: SearchRequest<Row, Page>) => Effect.Effect<SearchResult<Row, Page>>
}>()("burnbox/SearchIndex") {
  /** The index as the table `message_search` of the same database. */
  static readonly layer = Layer.effect(SearchIndex, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const indexFragment = (rows: string): Statement.Fragment =>
      sql`
    INSERT INTO message_search (id, account_id, alias_id, received_at, has_attachments, trashed_at, archived, search)
    SELECT s.id, s.account_id, s.alias_id, s.received_at, s.has_attachments, s.trashed_at,
           EXISTS (SELECT 1 FROM message_states ms WHERE ms.message_id = s.id AND ms.account_id = s.account_id AND ms.archived),
           account_lexemes(s.account_id, setweight(to_tsvector('simple', s.subject), 'A')
             || setweight(to_tsvector('simple', s.sender_text), 'B')
             || to_tsvector('simple', s.search_text))
    FROM ${sql(rows)} s
    ON CONFLICT (id, account_id) DO UPDATE
    SET has_attachments = excluded.has_attachments, trashed_at = excluded.trashed_at,
        archived = excluded.archived, search = excluded.search`

    const refreshArchiveMarks = (ids: ReadonlyArray<number>) =>
      ids.length === 0
        ? Effect.void
        : sql`
        UPDATE message_search ms SET archived = true FROM message_states s
        WHERE s.message_id IN ${sql.in(ids)} AND s.archived AND NOT ms.archived
          AND ms.id = s.message_id AND ms.account_id = s.account_id`.pipe(Effect.asVoid)

    const matchesTerm = (account: number | ReadonlyArray<number>, term: SearchTerm, row: "index" | "messages") => {
      const tsquery = term.kind === "phrase" ? sql`phraseto_tsquery('simple', ${term.value})` : sql`plainto_tsquery('simple', ${term.value})`
      /** The row `name` has the term's words within account `a` (a constant: the query is made once, not per row). */
      const within = (name: string, a: number) => sql`${sql.literal(name)}.search @@ account_tsquery(${a}, ${tsquery})`
      const matches = (name: string) => {
        const fragment = typeof account === "number"
          ? within(name, account)
          : sql`(${sql.or(account.map((a) => sql`(${sql.literal(name)}.account_id = ${a} AND ${within(name, a)})`))})`
        return term.negated ? sql`NOT (${fragment})` : fragment
      }
      const ownRow = typeof account === "number" ? sql`w.account_id = ${account}` : sql`w.account_id = m.account_id`
      return row === "index" ? matches("m") : sql`EXISTS (SELECT 1 FROM message_search w WHERE w.id = m.id AND ${ownRow} AND ${matches("w")})`
    }

    const archived = (value: boolean) => (value ? sql`m.archived` : sql`NOT m.archived`)

    /**
     * A statement on the index, planned without sequential scans. Its rows are narrow (migration
     * 0012), so the planner prices reading a whole partition as cheap, not knowing that testing a
     * row's words fetches them out of line: for a word in most of a mailbox it would choose that
     * (~1 s) over the GIN index (tens of ms).
     */
    const onSearchIndex = <A>(statement: Effect.Effect<A, SqlError.SqlError>) =>
      sql.withTransaction(sql`SET LOCAL enable_seqscan = off`.pipe(Effect.andThen(statement)))

    const decodeTotals = rowsDecoder(Schema.Struct({ total: Schema.Int }))
    const countOf = (where: Statement.Fragment) =>
      onSearchIndex(sql`SELECT count(*)::int AS total FROM message_search m WHERE ${where}`.unprepared).pipe(
        Effect.flatMap(decodeTotals),
        Effect.map((rows) => rows[0]!.total)
      )
    const count = (where: Statement.Fragment) => Effect.orDie(countOf(where))

    const search = <Row, Page>(request: SearchRequest<Row, Page>): Effect.Effect<SearchResult<Row, Page>> => {
      const { after, decode, limit, order, parts, rowsOf, summarize, view, where } = request
      const total = parts === undefined
        ? countOf(where)
        : onSearchIndex(sql`SELECT ${sql.join(" + ", false)(parts.map((p) => sql`(SELECT count(*)::int FROM message_search m WHERE ${p})`))} AS total`.unprepared).pipe(
          Effect.flatMap(decodeTotals),
          Effect.map((rows) => rows[0]!.total)
        )
      /** The matches of a search, from the index (its GIN index), for the page and the total; a split list's, part by part. */
      const matches = parts === undefined
        ? sql`WITH matches AS MATERIALIZED (SELECT m.id, m.received_at FROM message_search m WHERE ${where})`
        : sql`WITH matches AS MATERIALIZED (${sql.join(" UNION ALL ", false)(parts.map((p) => sql`SELECT m.id, m.received_at FROM message_search m WHERE ${p}`))})`
      const matchesPage = sql`SELECT m.id, m.received_at FROM matches m WHERE ${after} ORDER BY ${order} LIMIT ${limit + 1}`
      const summarized = (rows: ReadonlyArray<Row>, matched: number) =>
        Effect.map(summarize(rows), (page): SearchResult<Row, Page> => ({ rows, page, total: matched }))
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
      // A split list (a guest's) reads its matches part by part, for the page and the total at once: a walk in list order
      // would read each shared mailbox's rows through its owner's whole mailbox.
      if (parts === undefined && oneWord(request.query)) {
        const walked = sql`${
          rowsOf(
            sql`
          SELECT m.id, m.received_at FROM (
            SELECT m.id, m.account_id, m.alias_id, m.received_at, m.has_attachments, m.trashed_at, m.archived, m.search
            FROM message_search m WHERE ${view} AND ${after} ORDER BY ${order} LIMIT ${walkBreadth * (limit + 1)}
          ) m WHERE ${where} ORDER BY ${order} LIMIT ${limit + 1}`,
            sql``
          )
        }`.unprepared.pipe(Effect.flatMap(decode))
        const sorted = onSearchIndex(sql`${matches} ${rowsOf(matchesPage, sql``)}`.unprepared).pipe(Effect.flatMap(decode))
        return Effect.all([
          // The count first: it takes longest, and a statement is built and sent before the next
          // starts. A walk that finds the page is summarized while the count runs.
          total,
          Effect.flatMap(walked, (rows) => rows.length > limit ? Effect.asSome(summarized(rows, 0)) : Effect.succeedNone)
        ], { concurrency: 2 }).pipe(
          Effect.flatMap(([matched, walkedPage]) =>
            Option.match(walkedPage, {
              onSome: (found) => Effect.succeed({ ...found, total: matched }),
              onNone: () => Effect.flatMap(sorted, (rows) => summarized(rows, matched))
            })
          ),
          Effect.orDie
        )
      }
      return onSearchIndex(sql`${matches} ${rowsOf(matchesPage, sql`, (SELECT count(*)::int FROM matches) AS total`)}`.unprepared).pipe(
        Effect.flatMap((raw) =>
          Effect.flatMap(decode(raw), (rows) =>
            raw.length > 0
              ? Effect.flatMap(decodeTotals(raw.slice(0, 1)), ([first]) => summarized(rows, first!.total))
              : Effect.flatMap(total, (t) => summarized(rows, t)))
        ),
        Effect.orDie
      )
    }

    return SearchIndex.of({
      indexFragment,
      refreshArchiveMarks,
      followChanges: () => Effect.void,
      readsIndex,
      matchesTerm,
      archived,
      count,
      search
    })
  }))
}
