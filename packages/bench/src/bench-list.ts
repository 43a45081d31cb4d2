/**
 * GET /api/v1/messages at scale (issue: "Load 1,000,000 messages (a bulk loader, not SMTP)
 * across 100 accounts, the largest account holding 200,000. On the largest account: GET
 * /messages page of 50, newest first, p99 <= 20 ms; a deep cursor page as fast as the first; q
 * with one and with three terms p99 <= 50 ms; total included in those times. Show the query
 * plans you relied on.")
 *
 * What it does:
 * 1. starts `burnbox serve` (HTTP API only) on a fresh temporary data dir (its own embedded
 *    PostgreSQL), on free ports, bound to 127.0.0.1;
 * 2. creates the largest account with the real CLI (plan pro, request limits raised with
 *    `admin account override`, a `read` token);
 * 3. bulk-loads BENCH_MESSAGES messages (default 1,000,000) over BENCH_ACCOUNTS accounts
 *    (default 100; the largest gets every 5th message, 20 %) with a few INSERT ... SELECT
 *    generate_series statements (lib/bulkload.ts), then VACUUM (ANALYZE);
 * 4. measures, with sequential requests (then BENCH_CONCURRENCY, default 10, concurrent
 *    clients), p50/p95/p99 of: the first page (limit 50, newest first), a page deep in the
 *    cursor chain (reached by following nextCursor with limit=100; cursors are signed, none is
 *    fabricated), q with one common term, one rare term, and three terms; GET /api/v1/me as the
 *    floor of any authenticated request;
 * 5. prints EXPLAIN (ANALYZE, BUFFERS) of the SQL those requests run (recorded from the store's
 *    own Messages.list as it compiles them, with their values: lib/statements.ts; without q the
 *    service reads the page and its `total` in one statement), the indexes used, the
 *    costliest plan nodes, and times each query alone;
 * 6. with BENCH_WHATIF=1 (default), tries candidate fixes on the benchmark's own temporary
 *    database only (rewritten count queries, a temporary index, dropped afterwards) and prints
 *    their plans and times: evidence for the analysis, not a change to the service;
 * 7. stops the service by pid (SIGINT, so its PostgreSQL shuts down cleanly) and removes the
 *    temp dir, also on failure, timeout or Ctrl-C.
 *
 * Environment: BENCH_MESSAGES (1,000,000), BENCH_ACCOUNTS (100), BENCH_CHUNK (rows per INSERT,
 * 250,000), BENCH_REQUESTS (sequential requests per case, 100; the concurrent pass makes at
 * least 10 per client), BENCH_CONCURRENCY (10; 1 skips the concurrent pass), BENCH_DEEP_PAGES
 * (pages of 100 to follow; default 1,000, i.e. 100,000 messages deep, or 90 % of a smaller
 * largest account), BENCH_KEEP_INDEXES (1: load with the indexes in place), BENCH_WHATIF (1),
 * BENCH_LOG_DIR, BENCH_KEEP_DATA (1: keep the data dir, its loaded PostgreSQL, after the run).
 */
import { readFileSync } from "node:fs"
import { availableParallelism, cpus } from "node:os"
import { join } from "node:path"
import { Burnbox, type PgClient, Session } from "./lib/burnbox.ts"
import { loadMessages, makeCorpus } from "./lib/bulkload.ts"
import { cpuShare, cpuSnapshot, envInt, fmt, loadAverage, median, table } from "./lib/common.ts"
import { interferenceNote, ms, type Timed, timeRequests, waitForQuietMachine } from "./lib/quiet.ts"
import { type StatementRecorder, statementRecorder } from "./lib/statements.ts"

const session = new Session("bench:list")
const log = session.log

const total = envInt("BENCH_MESSAGES", 1_000_000, 1_000)
const accounts = envInt("BENCH_ACCOUNTS", 100, 2)
const chunk = envInt("BENCH_CHUNK", 250_000, 1_000)
const requests = envInt("BENCH_REQUESTS", 100, 10)
const concurrency = envInt("BENCH_CONCURRENCY", 10, 1)
const keepIndexes = process.env["BENCH_KEEP_INDEXES"] === "1"
const whatIf = (process.env["BENCH_WHATIF"] ?? "1") === "1"
/** BENCH_HTTP=0: load, plans and what-if only (no HTTP passes, no cursor chain; a deep position from SQL). */
const httpPasses = (process.env["BENCH_HTTP"] ?? "1") === "1"
const largestEvery = 5
const largestCount = Math.floor(total / largestEvery)
const deepPages = envInt("BENCH_DEEP_PAGES", Math.max(1, Math.min(1_000, Math.floor((largestCount * 0.9) / 100))), 1)
const email = "bench-largest@example.com"
const goals = { firstP99: 20, qP99: 50 }

/**
 * A generous bound: load (~1.5 ms a message on a slow shared machine), the chain (up to 4 s a
 * page), the passes (up to 30 s per sequential request's worth), waits for other benchmarks.
 */
const overallTimeoutMs = 20 * 60_000 + total * 1.5 + deepPages * 4_000 + requests * 30_000 + 60 * 60_000

const out = (line = "") => process.stdout.write(line + "\n")

// ---------------------------------------------------------------------------------------------
// The SQL of GET /messages: the statements the store's `Messages.list` sends (lib/statements.ts
// records them as they are compiled, with their values), default filters (not trashed, not
// archived), newest first.

interface Shape {
  readonly accountId: number
  readonly terms: ReadonlyArray<string>
  readonly after?: { readonly receivedAt: string; readonly id: number }
  readonly limit: number
}

/**
 * A statement as the service sends it: the text with $n placeholders, the parameter types
 * @effect/sql-pg binds (integers int4, booleans bool, Dates timestamptz, strings untyped, so text
 * here), and the values as SQL literals. `unprepared`: a search's statement (on the search index
 * message_search), sent unprepared (planned for its values) and, unless it is the walk, planned
 * with enable_seqscan off (SearchIndex.ts onSearchIndex).
 */
interface Statement {
  readonly text: string
  readonly types: ReadonlyArray<string>
  readonly values: ReadonlyArray<string>
  readonly unprepared: boolean
  readonly seqscanOff: boolean
}

/**
 * The statements of GET /messages (Messages.ts `list`, SearchIndex.ts `search`):
 * - `page`: the page. Without `q`, read from messages with its total in the same statement. For
 *   one word, the walk of the mailbox in list order, sent with `count` at once. For several
 *   words, the matches read once from the GIN index for the page and the total.
 * - `count`: the total of a one-word search (the search index counted).
 * - `sorted`: one word whose walk came short: the page from all matches, sorted.
 */
type Kind = "page" | "count" | "sorted"
const kinds: ReadonlyArray<Kind> = ["page", "count", "sorted"]

const quote = (s: string) => `'${s.replaceAll("'", "''")}'`

const literal = (value: unknown): { readonly type: string; readonly value: string } =>
  typeof value === "number"
    ? { type: Number.isInteger(value) ? "int4" : "float8", value: String(value) }
    : typeof value === "boolean"
    ? { type: "bool", value: String(value) }
    : typeof value === "bigint"
    ? { type: "int8", value: String(value) }
    : value instanceof Date
    ? { type: "timestamptz", value: `${quote(value.toISOString())}::timestamptz` }
    : { type: "text", value: quote(typeof value === "string" ? value : JSON.stringify(value)) }

const kindOf = (text: string): Kind =>
  text.trim().startsWith("SELECT count") ? "count" : text.includes("WITH matches") && !text.includes("AS total") ? "sorted" : "page"

/** The statements the service sends for one GET /messages of this shape, by kind. */
const statementsOf = async (recorder: StatementRecorder, shape: Shape): Promise<Map<Kind, Statement>> => {
  const sent = await recorder.list(shape.accountId, {
    limit: shape.limit,
    ...(shape.terms.length === 0 ? {} : { q: shape.terms.join(" ") }),
    ...(shape.after === undefined ? {} : { cursor: recorder.cursorAfter(shape.accountId, shape.after) })
  })
  const out = new Map<Kind, Statement>()
  for (const { text, params } of sent) {
    const kind = kindOf(text)
    const literals = params.map(literal)
    const unprepared = text.includes("message_search")
    const walk = kind === "page" && shape.terms.length === 1
    out.set(kind, { text, types: literals.map((l) => l.type), values: literals.map((l) => l.value), unprepared, seqscanOff: unprepared && !walk })
  }
  return out
}

/** The statement with its values written in (for the what-if runs and the report). */
const literalSql = (st: Statement) => st.text.replace(/\$(\d+)/g, (_, n: string) => st.values[Number(n) - 1]!)

/**
 * What `total` must be for each set of terms, counted in `messages` (not trashed, not archived)
 * with words built from its text as the pipeline builds them: not read from the search index or
 * the kept counts the service answers from, so a check of what they answer. One pass.
 */
const expectedTotalsSql = (accountId: number, termSets: ReadonlyArray<ReadonlyArray<string>>) => `
  SELECT ${termSets.map((terms, i) =>
  `(count(*) FILTER (WHERE ${terms.length === 0 ? "true" : terms.map((t) => `words @@ plainto_tsquery('simple', ${quote(t)})`).join(" AND ")}))::int AS "${i}"`
).join(", ")}
  FROM (
    SELECT setweight(to_tsvector('simple', m.subject), 'A')
             || setweight(to_tsvector('simple', coalesce(m.sender_name, '') || ' ' || m.sender_address), 'B')
             || to_tsvector('simple', coalesce(m.text_body, '')) AS words
    FROM messages m
    WHERE m.account_id = ${accountId} AND m.trashed_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM message_states s WHERE s.message_id = m.id AND s.account_id = ${accountId} AND s.archived)
  ) counted`

/** A cursor's position: its payload is signed, not encrypted (MessageList.ts encodeCursor). */
const cursorPosition = (cursor: string): { receivedAt: string; id: number } => {
  const decoded = JSON.parse(Buffer.from(cursor.split(".")[0]!, "base64url").toString("utf8")) as { r: string; i: number }
  return { receivedAt: decoded.r, id: decoded.i }
}

// ---------------------------------------------------------------------------------------------
// Plans

interface PlanNode {
  "Node Type": string
  "Actual Total Time"?: number
  "Actual Loops"?: number
  "Index Name"?: string
  "Relation Name"?: string
  "Alias"?: string
  Plans?: Array<PlanNode>
}

const explainText = async (db: PgClient, sql: string): Promise<{ text: string; ms: number }> => {
  const { rows } = await db.query<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`)
  const text = rows.map((r) => r["QUERY PLAN"]).join("\n")
  const msMatch = /Execution Time: ([\d.]+) ms/.exec(text)
  return { text, ms: msMatch === null ? Number.NaN : Number(msMatch[1]) }
}

const indexesIn = (text: string): Array<string> => {
  const found = new Set<string>()
  for (const m of text.matchAll(/(Index Only Scan|Index Scan|Bitmap Index Scan)(?: Backward)? (?:using|on) (\S+)/g)) found.add(`${m[2]} (${m[1]})`)
  for (const m of text.matchAll(/Seq Scan on (\S+)/g)) found.add(`${m[1]} (Seq Scan)`)
  return [...found]
}

/**
 * The plan nodes with the most time of their own (total x loops minus their children's). Below
 * a Gather, the loops are the leader and its workers running side by side, so their time is
 * divided by their number (wall time, not CPU time).
 */
const costliestNodes = async (db: PgClient, sql: string, top = 3): Promise<Array<string>> => {
  const { rows } = await db.query<{ "QUERY PLAN": Array<{ Plan: PlanNode; "Execution Time": number }> }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`)
  const root = rows[0]!["QUERY PLAN"][0]!
  const nodes: Array<{ label: string; self: number }> = []
  const walk = (node: PlanNode, parallel: number): number => {
    const below = node["Node Type"].startsWith("Gather") ? 1 + ((node as { "Workers Launched"?: number })["Workers Launched"] ?? 0) : parallel
    const totalMs = ((node["Actual Total Time"] ?? 0) * (node["Actual Loops"] ?? 1)) / parallel
    const children = (node.Plans ?? []).reduce((a, c) => a + walk(c, below), 0)
    const on = node["Index Name"] ?? node["Relation Name"] ?? ""
    nodes.push({ label: `${node["Node Type"]}${on === "" ? "" : ` ${on}`}${node.Alias !== undefined && node.Alias !== on ? ` ${node.Alias}` : ""}`, self: Math.max(0, totalMs - children) })
    return totalMs
  }
  walk(root.Plan, 1)
  const execution = root["Execution Time"]
  return nodes.sort((a, b) => b.self - a.self).slice(0, top).map((n) => `${n.label}: ${ms(n.self)} ms (${fmt((100 * n.self) / execution)} %)`)
}

/** The median of up to `runs` executions of the given statement alone, timed at the client (ms); at least 3, at most ~10 s. */
const timeSql = async (db: PgClient, sql: string, runs = 15): Promise<number> => {
  const samples: Array<number> = []
  const started = performance.now()
  for (let i = 0; i < runs && (i < 3 || performance.now() - started < 10_000); i++) {
    const t0 = performance.now()
    await db.query(sql)
    samples.push(performance.now() - t0)
  }
  return median(samples)
}

// ---------------------------------------------------------------------------------------------
// Main

const main = async (): Promise<number> => {
  out(`# bench-list: GET /api/v1/messages on ${fmt(total)} messages, ${accounts} accounts (largest ${fmt(largestCount)})`)
  out(`machine: ${availableParallelism()} cores (${cpus()[0]?.model ?? "?"}), Node ${process.version}, load average ${loadAverage()}`)
  if (total !== 1_000_000) out(`NOTE: BENCH_MESSAGES=${total}, not the 1,000,000 of the issue`)
  out()

  const service = await Burnbox.create(session, { logName: "bench-list", command: "serve", keepDataDir: process.env["BENCH_KEEP_DATA"] === "1" })
  session.afterCleanup(() => service.summarizeLog())
  const own = () => [service.pid, service.postmasterPid()].filter((p): p is number => p !== undefined)
  out(await waitForQuietMachine(log, "loading", { own }))
  await service.start()
  const token = await service.setupAccount(email, "read")
  const db = await service.db()
  // The store's own Messages.list on this database, to record the statements it sends (the service's secret signs its cursors).
  const recorder = await statementRecorder(service.service.embeddedDatabase(), readFileSync(join(service.service.dataDir, "secret"), "utf8").trim())
  session.onCleanup(() => recorder.close())
  const [{ version }] = (await db.query<{ version: string }>("SELECT version()")).rows as [{ version: string }]
  out(`database: ${version.split(",")[0]}`)
  const [account] = (await db.query<{ id: number }>("SELECT id FROM accounts WHERE email_key = $1", [email])).rows
  const [domain] = (await db.query<{ id: number; name: string }>("SELECT id, name FROM domains ORDER BY id LIMIT 1")).rows
  if (account === undefined || domain === undefined) throw new Error("account or domain missing after setup")

  // -- load -----------------------------------------------------------------------------------
  const corpus = makeCorpus()
  log(`loading ${fmt(total)} messages (corpus: ${corpus.subjects.length} subjects, ${corpus.sentences.length} sentences, ${corpus.vocabularySize} words)`)
  const loadStarted = performance.now()
  const steps = await loadMessages(db, corpus, {
    total,
    accounts,
    largestEvery,
    largestAccountId: account.id,
    largestAliases: 100,
    domainId: domain.id,
    domainName: domain.name,
    chunk,
    keepIndexes,
    log,
    checkInterrupted: () => session.checkInterrupted()
  })
  const loadSeconds = (performance.now() - loadStarted) / 1000
  out(`## Load (${keepIndexes ? "indexes kept in place" : "secondary indexes of messages dropped, rebuilt from pg_get_indexdef after"})`)
  out(table(["step", "rows", "seconds"], steps.map((s) => [s.step, s.rows === undefined ? "" : fmt(s.rows), fmt(s.seconds, 1)])))
  out(`loading took ${fmt(loadSeconds, 1)} s in all (${fmt(total / loadSeconds)} messages/s)`)
  const perAccount = (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM messages GROUP BY account_id ORDER BY 1 DESC")).rows.map((r) => r.n)
  const [sizes] = (await db.query<{ heap: string; indexes: string; search: string; searchToast: string; words: string; states: number }>(`
    SELECT pg_size_pretty(pg_table_size('messages')) AS heap, pg_size_pretty(pg_indexes_size('messages')) AS indexes,
           (SELECT pg_size_pretty(sum(pg_relation_size(relid))) FROM pg_partition_tree('message_search')) AS search,
           (SELECT pg_size_pretty(sum(pg_table_size(relid) - pg_relation_size(relid))) FROM pg_partition_tree('message_search')) AS "searchToast",
           (SELECT pg_size_pretty(sum(pg_relation_size(relid))) FROM pg_partition_tree('message_search_words')) AS words,
           (SELECT count(*)::int FROM message_states) AS states`)).rows
  const [corr] = (await db.query<{ correlation: number }>("SELECT correlation FROM pg_stats WHERE tablename = 'messages' AND attname = 'received_at'")).rows
  out(`messages per account: largest ${fmt(perAccount[0]!)}, 2nd ${fmt(perAccount[1] ?? 0)}, median ${fmt(median(perAccount))}, smallest ${fmt(perAccount[perAccount.length - 1]!)} (${perAccount.length} accounts)`)
  out(`messages heap ${sizes?.heap}, its indexes ${sizes?.indexes}; message_search heap ${sizes?.search} in 16 partitions (+ ${sizes?.searchToast} out of line), GIN message_search_words ${sizes?.words}; message_states rows ${fmt(sizes?.states ?? 0)}; received_at/heap order correlation ${corr?.correlation?.toFixed(3)}`)
  if (perAccount[0] !== largestCount) throw new Error(`the largest account holds ${perAccount[0]}, expected ${largestCount}`)

  const cases: ReadonlyArray<{ name: string; terms: ReadonlyArray<string>; goal: number }> = [
    { name: "first page", terms: [], goal: goals.firstP99 },
    { name: "q, 1 common term (github)", terms: ["github"], goal: goals.qP99 },
    { name: "q, 1 rare term (etsy)", terms: ["etsy"], goal: goals.qP99 },
    { name: "q, 3 terms (reset password github)", terms: ["reset", "password", "github"], goal: goals.qP99 }
  ]
  const [counted] = (await db.query<Record<string, number>>(expectedTotalsSql(account.id, cases.map((c) => c.terms)))).rows
  const expectedTotal = new Map(cases.map((c, i) => [c.name, counted![String(i)]!]))
  out(`matching (= total) in the largest account: ${cases.map((c) => `${c.name}: ${fmt(expectedTotal.get(c.name)!)}`).join("; ")}`)
  out()

  // -- HTTP -----------------------------------------------------------------------------------
  const base = `${service.baseUrl}/api/v1`
  const headers = { authorization: `Bearer ${token}` }
  const get = async (path: string): Promise<{ ms: number; status: number; text: string }> => {
    const t0 = performance.now()
    const response = await fetch(`${base}${path}`, { headers, signal: AbortSignal.timeout(30_000) })
    const text = await response.text()
    return { ms: performance.now() - t0, status: response.status, text }
  }
  /** One page request, checked (outside the timing): 200, a full page, the expected total. */
  const pageRequest = (path: string, expected: { total: number; items: number }) => async (): Promise<number | string> => {
    const r = await get(path)
    if (r.status !== 200) return `HTTP ${r.status}: ${r.text.slice(0, 200)}`
    const body = JSON.parse(r.text) as { items: Array<unknown>; total: number; nextCursor: string | null }
    if (body.total !== expected.total) return `total ${body.total}, expected ${expected.total}`
    if (body.items.length !== expected.items) return `${body.items.length} items, expected ${expected.items}`
    return r.ms
  }
  const q = (terms: ReadonlyArray<string>) => terms.length === 0 ? "" : `&q=${encodeURIComponent(terms.join(" "))}`
  const firstPath = (terms: ReadonlyArray<string>) => `/messages?limit=50${q(terms)}`
  const itemsOf = (n: number) => Math.min(50, n)

  const notes: Array<string> = []
  const note = (what: string) => {
    const n = interferenceNote(what, own())
    if (n !== undefined) notes.push(n)
  }
  const allTotal = expectedTotal.get("first page")!
  let deepCursors: Array<string> = []
  let deepPosition: { receivedAt: string; id: number }
  let chainReport: Array<string> = []
  if (httpPasses) {
    out(await waitForQuietMachine(log, "the warm-up and the cursor chain", { own }))
    log("warming up")
    for (const c of cases) for (let i = 0; i < 10; i++) await pageRequest(firstPath(c.terms), { total: expectedTotal.get(c.name)!, items: itemsOf(expectedTotal.get(c.name)!) })()
    for (let i = 0; i < 20; i++) await get("/me")

    // Follow the cursor chain, limit=100, timing each page as we go.
    log(`following nextCursor ${deepPages} pages of 100 deep (to message ~${fmt(deepPages * 100)} of ${fmt(allTotal)})`)
    const chainMs: Array<number> = []
    const chainCursors: Array<string> = []
    let cursor: string | null = null
    const chainStarted = performance.now()
    for (let p = 0; p < deepPages; p++) {
      session.checkInterrupted()
      const r = await get(`/messages?limit=100${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`)
      if (r.status !== 200) throw new Error(`cursor chain page ${p}: HTTP ${r.status}: ${r.text.slice(0, 200)}`)
      const body = JSON.parse(r.text) as { items: Array<{ id: number }>; total: number; nextCursor: string | null }
      if (body.total !== allTotal) throw new Error(`cursor chain page ${p}: total ${body.total}, expected ${allTotal}`)
      chainMs.push(r.ms)
      if (body.nextCursor === null) throw new Error(`cursor chain ended after ${p + 1} pages`)
      cursor = body.nextCursor
      chainCursors.push(cursor)
      if ((p + 1) % 200 === 0) log(`  ${p + 1} pages, median ${ms(median(chainMs.slice(-200)))} ms over the last 200`)
    }
    const chainSeconds = (performance.now() - chainStarted) / 1000
    note("the cursor chain")
    deepCursors = chainCursors.slice(-20)
    deepPosition = cursorPosition(deepCursors[deepCursors.length - 1]!)
    const buckets = 5
    chainReport = [
      `## Cursor chain: ${deepPages} pages of 100 followed in ${fmt(chainSeconds, 1)} s`,
      table(["pages (limit 100)", "p50 ms", "p99 ms"], Array.from({ length: buckets }, (_, b) => {
        const from = Math.floor((b * chainMs.length) / buckets)
        const to = Math.floor(((b + 1) * chainMs.length) / buckets)
        const slice = chainMs.slice(from, to).sort((x, y) => x - y)
        return [`${from + 1}..${to}`, ms(slice[Math.floor(slice.length / 2)] ?? Number.NaN), ms(slice[Math.min(slice.length - 1, Math.ceil(slice.length * 0.99) - 1)] ?? Number.NaN)]
      }))
    ]
  } else {
    // No HTTP: the position of message deepPages x 100 in the default view, for the plans only.
    const [row] = (await db.query<{ received_at: Date; id: number }>(
      `SELECT m.received_at, m.id FROM messages m LEFT JOIN message_states s ON s.message_id = m.id AND s.account_id = $1
       WHERE m.account_id = $1 AND m.trashed_at IS NULL AND coalesce(s.archived, false) = false
       ORDER BY m.received_at DESC, m.id DESC OFFSET $2 LIMIT 1`,
      [account.id, deepPages * 100 - 1]
    )).rows
    deepPosition = { receivedAt: row!.received_at.toISOString(), id: row!.id }
  }
  const [{ depth }] = (await db.query<{ depth: number }>(
    `SELECT count(*)::int AS depth FROM messages m LEFT JOIN message_states s ON s.message_id = m.id AND s.account_id = $1
     WHERE m.account_id = $1 AND m.trashed_at IS NULL AND coalesce(s.archived, false) = false AND (m.received_at, m.id) >= ($2::timestamptz, $3)`,
    [account.id, deepPosition.receivedAt, deepPosition.id]
  )).rows as [{ depth: number }]
  if (httpPasses) {
    out(`${chainReport[0]}; the last cursor points after message ${fmt(depth)} of ${fmt(allTotal)} (newest first)`)
    out(chainReport[1])
    out()
  }

  interface Measured {
    readonly name: string
    readonly goal: number | undefined
    readonly seq: Timed
    conc?: Timed
    cpu?: string
  }
  const measured: Array<Measured> = []
  if (httpPasses) {
    const deadlineFor = (n: number) => Date.now() + n * 2_000 + 60_000
    const scenarios: Array<{ name: string; goal: number | undefined; request: (i: number) => Promise<number | string> }> = [
      { name: "GET /me (floor: auth + one query)", goal: undefined, request: async () => {
        const r = await get("/me")
        return r.status === 200 ? r.ms : `HTTP ${r.status}`
      } },
      ...cases.slice(0, 1).map((c) => ({ name: c.name, goal: c.goal, request: pageRequest(firstPath(c.terms), { total: allTotal, items: 50 }) })),
      {
        name: `deep page (after message ~${fmt(depth)})`,
        goal: goals.firstP99,
        request: (i: number) => pageRequest(`/messages?limit=50&cursor=${encodeURIComponent(deepCursors[i % deepCursors.length]!)}`, { total: allTotal, items: 50 })()
      },
      ...cases.slice(1).map((c) => ({
        name: c.name,
        goal: c.goal,
        request: pageRequest(firstPath(c.terms), { total: expectedTotal.get(c.name)!, items: itemsOf(expectedTotal.get(c.name)!) })
      }))
    ]
    out(await waitForQuietMachine(log, "the sequential pass", { own }))
    for (const s of scenarios) {
      log(`sequential: ${s.name} x ${requests}`)
      const before = cpuSnapshot(service.pid)
      const seq = await timeRequests(requests, 1, s.request, deadlineFor(requests))
      const cpu = cpuShare(before, cpuSnapshot(service.pid))
      if (seq.failures > 0) throw new Error(`${s.name}: ${seq.failures} failures, first: ${seq.firstFailure}`)
      measured.push({ name: s.name, goal: s.goal, seq, cpu: `${fmt(cpu.server)} % service+pg, ${fmt(cpu.other)} % other` })
    }
    note("the sequential pass")
    if (concurrency > 1) {
      out(await waitForQuietMachine(log, `the concurrent pass (${concurrency} clients)`, { own }))
      for (const s of scenarios) {
        const n = Math.max(requests, concurrency * 10)
        log(`${concurrency} concurrent: ${s.name} x ${n}`)
        const conc = await timeRequests(n, concurrency, s.request, deadlineFor(n))
        if (conc.failures > 0) throw new Error(`${s.name} (concurrent): ${conc.failures} failures, first: ${conc.firstFailure}`)
        measured.find((m) => m.name === s.name)!.conc = conc
      }
      note("the concurrent pass")
    }
  }

  // -- plans ----------------------------------------------------------------------------------
  // @effect/sql-pg keeps each statement prepared under a name per pooled connection, so after
  // five executions PostgreSQL may switch that connection to a generic plan (plan_cache_mode
  // auto). The plans shown are therefore those of a named prepared statement with the service's
  // text and parameter types, after six executions, as a busy pooled connection has it.
  out("## Query plans")
  out("Each statement is PREPAREd with the service's text and parameter types (@effect/sql-pg binds integers as int4, booleans as bool, Dates as")
  out("timestamptz, strings untyped), EXECUTEd 6 times (a pooled connection of the service prepares it once and, after 5 executions, PostgreSQL")
  out("may switch it to a generic plan), then EXPLAIN (ANALYZE, BUFFERS) EXECUTE. The service sends a search's statements (q: the search index")
  out("message_search) unprepared, so they always get a custom plan: those are shown with plan_cache_mode force_custom_plan; and, but for")
  out("the walk, with enable_seqscan off, as the service plans them (SET LOCAL in their transaction; SearchIndex.ts onSearchIndex). For one")
  out("word the service runs the walk and the count concurrently; a walk that comes short is")
  out("followed by the sorted page; several words are one statement for the page and the total (its count query answers only a page past")
  out("the last match). Without q the page and its total are one statement (no count query); every page statement reads each row's")
  out("alias and the reader's tags on it in subqueries, for the page's rows only. The statements are those the store's Messages.list")
  out("compiles for each case, recorded with their values as it runs them on this database (lib/statements.ts).")
  await db.query("RESET work_mem")
  const sqlCases = [
    { name: "first page", shape: { accountId: account.id, terms: [], limit: 50 } as Shape },
    { name: `deep page (after message ~${fmt(depth)})`, shape: { accountId: account.id, terms: [], limit: 50, after: deepPosition } as Shape },
    ...cases.slice(1).map((c) => ({ name: c.name, shape: { accountId: account.id, terms: c.terms, limit: 50 } as Shape }))
  ]
  const sqlTimes: Array<Array<string>> = []
  const indexSummary: Array<Array<string>> = []
  let statementNo = 0
  for (const c of sqlCases) {
    const results: Partial<Record<Kind, { ms: number; customMs: number; mode: string; indexes: string }>> = {}
    const statements = await statementsOf(recorder, c.shape)
    for (const kind of kinds) {
      const st = statements.get(kind)
      if (st === undefined) continue
      const name = `bench_stmt_${++statementNo}`
      const unprepared = st.unprepared
      if (unprepared) await db.query("SET plan_cache_mode = force_custom_plan")
      if (st.seqscanOff) await db.query("SET enable_seqscan = off")
      await db.query(`PREPARE ${name}(${st.types.join(", ")}) AS ${st.text}`)
      const execute = `EXECUTE ${name}(${st.values.join(", ")})`
      for (let i = 0; i < 6; i++) await db.query(execute)
      const plan = await explainText(db, execute)
      const [counters] = (await db.query<{ generic_plans: string; custom_plans: string }>(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1", [name]
      )).rows
      const mode = Number(counters?.generic_plans ?? 0) > 0 ? "generic" : unprepared ? "custom, unprepared" : "custom"
      if (unprepared) await db.query("RESET plan_cache_mode")
      const costliest = await costliestNodes(db, execute)
      const alone = await timeSql(db, execute)
      await db.query("SET plan_cache_mode = force_custom_plan")
      const custom = await explainText(db, execute)
      const customMs = await timeSql(db, execute)
      await db.query("RESET plan_cache_mode; RESET enable_seqscan")
      await db.query(`DEALLOCATE ${name}`)
      out(`### ${c.name}: ${kind === "page" ? (c.shape.terms.length === 1 ? "page query (the walk)" : "page query") : kind === "count" ? "count query (total)" : "sorted page (after a walk that came short)"}`)
      out("```sql\n" + st.text.trim() + "\n```")
      out(`parameters: (${st.types.map((t, i) => `$${i + 1} ${t} = ${st.values[i]}`).join(", ")})`)
      out(`plan in use after 6 executions: ${mode} (pg_prepared_statements: ${counters?.generic_plans} generic, ${counters?.custom_plans} custom)`)
      out("```\n" + plan.text + "\n```")
      out(`costliest nodes: ${costliest.join("; ")}`)
      out(`for comparison, the custom plan (values known): ${ms(custom.ms)} ms execution, ${indexesIn(custom.text).join(", ")}`)
      out()
      results[kind] = { ms: alone, customMs, mode, indexes: indexesIn(plan.text).join(", ") }
    }
    const page = results["page"]!
    const count = results["count"]
    const sorted = results["sorted"]
    sqlTimes.push([
      c.name,
      `${ms(page.ms)} (${page.mode})`,
      count === undefined ? "in the page" : `${ms(count.ms)} (${count.mode})`,
      sorted === undefined ? "-" : ms(sorted.ms),
      ms(page.customMs),
      count === undefined ? "-" : ms(count.customMs),
      page.ms >= (count?.ms ?? 0) ? "page query" : "count (total)"
    ])
    indexSummary.push([c.name, page.indexes, count?.indexes ?? "in the page", sorted?.indexes ?? "-"])
  }
  out("## Indexes the plans use")
  out(table(["case", "page query", "count query", "sorted page"], indexSummary))
  out()
  out("## Each statement alone (median of up to 15 EXECUTEs, at least 3, ~10 s at most, from one client, ms; plan in use, then with a forced custom plan)")
  out(table(["case", "page", "count", "sorted page", "page, custom", "count, custom", "dominates"], sqlTimes))
  out()

  // -- what if --------------------------------------------------------------------------------
  if (whatIf) {
    out("## What-if (on this benchmark's temporary database only, not a change to the service; values written in, so custom plans)")
    const a = account.id
    const served = new Map<string, Map<Kind, Statement>>()
    for (const terms of [[], ["github"], ["etsy"], ["reset", "password", "github"]]) served.set(terms.join(" "), await statementsOf(recorder, { accountId: a, terms, limit: 50 }))
    const sent = (terms: ReadonlyArray<string>, kind: Kind) => {
      const st = served.get(terms.join(" "))?.get(kind)
      if (st === undefined) throw new Error(`the service sent no ${kind} statement for q=${terms.join(" ")}`)
      return literalSql(st)
    }
    const page = (terms: ReadonlyArray<string>) => sent(terms, "page")
    const count = (terms: ReadonlyArray<string>) => sent(terms, terms.length === 1 ? "count" : "page")
    const liveCount = () =>
      `SELECT count(*)::int FROM messages m WHERE m.account_id = ${a} AND m.trashed_at IS NULL` +
      ` AND NOT EXISTS (SELECT 1 FROM message_states s WHERE s.message_id = m.id AND s.account_id = ${a} AND s.archived)`
    const alternatives: Array<{ name: string; sql: string; setup?: ReadonlyArray<string>; teardown?: string }> = [
      { name: "first page with its total, the service's SQL", sql: page([]) },
      {
        name: "count without the aliases/domains joins (FKs guarantee them)",
        sql: `SELECT count(*)::int FROM messages m LEFT JOIN message_states s ON s.message_id = m.id AND s.account_id = ${a}
              WHERE m.account_id = ${a} AND m.trashed_at IS NULL AND coalesce(s.archived, false) = false`
      },
      { name: "count, archived as NOT EXISTS, no joins", sql: liveCount() },
      {
        name: "same + partial index (account_id, received_at DESC, id DESC) WHERE trashed_at IS NULL: index-only",
        setup: ["CREATE INDEX bench_whatif_live ON messages (account_id, received_at DESC, id DESC) WHERE trashed_at IS NULL"],
        sql: liveCount(),
        teardown: "DROP INDEX bench_whatif_live"
      },
      { name: "q=github count, the service's SQL", sql: count(["github"]) },
      { name: "q=etsy count, the service's SQL", sql: count(["etsy"]) },
      { name: "q=etsy page, the service's SQL", sql: page(["etsy"]) },
      { name: "q=reset password github page, the service's SQL", sql: page(["reset", "password", "github"]) }
    ]
    const whatIfRows: Array<Array<string>> = []
    for (const alt of alternatives) {
      session.checkInterrupted()
      if (alt.setup !== undefined) {
        const t0 = performance.now()
        for (const statement of alt.setup) await db.query(statement)
        await db.query("VACUUM (ANALYZE) messages")
        out(`(setup: ${alt.setup.join("; ")}; built in ${fmt((performance.now() - t0) / 1000, 1)} s with VACUUM ANALYZE)`)
      }
      const plan = await explainText(db, alt.sql)
      out(`### ${alt.name}`)
      out("```\n" + plan.text + "\n```")
      const t = await timeSql(db, alt.sql)
      const { rows } = await db.query<{ count?: number; total?: number }>(alt.sql)
      const n = rows.length === 1 && (rows[0]!.count !== undefined || rows[0]!.total !== undefined) ? `count ${fmt(rows[0]!.count ?? rows[0]!.total!)}` : `${rows.length} rows`
      whatIfRows.push([alt.name, n, ms(t), indexesIn(plan.text).filter((i) => i.startsWith("messages") || i.startsWith("bench_")).join(", ")])
      if (alt.teardown !== undefined) await db.query(alt.teardown)
    }
    const ext = (await db.query<{ name: string }>("SELECT name FROM pg_available_extensions WHERE name IN ('btree_gin', 'rum') ORDER BY name")).rows.map((r) => r.name)
    out(table(["alternative (custom plans)", "result", "median ms", "messages indexes used"], whatIfRows))
    out(`extensions available to this PostgreSQL among btree_gin/rum: ${ext.length === 0 ? "none" : ext.join(", ")}`)
    out()
  }

  // -- summary --------------------------------------------------------------------------------
  if (httpPasses) {
    out(`## Results (${availableParallelism()} cores; ${fmt(total)} messages, largest account ${fmt(largestCount)}; ${requests} sequential requests per case${concurrency > 1 ? `, then ${concurrency} concurrent clients` : ""}; ms at the client, keep-alive)`)
    const row = (m: Measured) => [
      m.name,
      ms(m.seq.latency.p50), ms(m.seq.latency.p95), ms(m.seq.latency.p99), ms(m.seq.latency.max),
      ...(concurrency > 1 && m.conc !== undefined ? [ms(m.conc.latency.p50), ms(m.conc.latency.p99), fmt(m.conc.perSecond)] : []),
      m.goal === undefined ? "-" : `p99 <= ${m.goal}: ${m.seq.latency.p99 <= m.goal ? "met" : "NOT met"}`
    ]
    out(table(
      ["case", "p50", "p95", "p99", "max", ...(concurrency > 1 ? [`c${concurrency} p50`, `c${concurrency} p99`, `c${concurrency} req/s`] : []), "goal (sequential)"],
      measured.map(row)
    ))
    const first = measured.find((m) => m.name === "first page")!
    const deep = measured.find((m) => m.name.startsWith("deep page"))!
    out(`deep page vs first page: p50 ${fmt(deep.seq.latency.p50 / first.seq.latency.p50, 2)}x, p99 ${fmt(deep.seq.latency.p99 / first.seq.latency.p99, 2)}x (goal: as fast as the first)`)
    out(`CPU during the sequential passes: ${measured.map((m) => `${m.name}: ${m.cpu}`).join("; ")}`)
  }
  out(`load average at the end: ${loadAverage()}`)
  for (const n of notes) out(n)
  return 0
}

await session.run(overallTimeoutMs, main)
