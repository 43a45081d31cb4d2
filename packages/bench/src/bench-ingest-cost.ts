/**
 * Where each message's cost goes (#36 item 1): `burnbox start` on the embedded PostgreSQL takes
 * a load of 5 KB messages to one alias from Postfix smtp-source (-d, 16 sessions) and processes
 * it; this prints, per message, side by side with the message's own raw size as the reference:
 * - CPU of the service's node process and of its PostgreSQL (all backends), load and drain;
 * - WAL written (pg_stat_wal: bytes, records, full-page images) and WAL fsyncs per second;
 * - each statement's share of PostgreSQL's execution time and of the WAL (pg_stat_statements,
 *   loaded at a restart of the service with `shared_preload_libraries`);
 * - disk: each table's growth (heap, TOAST, indexes) and large objects, over the raw bytes.
 *
 * Usage: pnpm bench:ingest-cost
 * Environment: COST_MESSAGES (20000), COST_SESSIONS (16), COST_SIZE (smtp-source -l, 5000), COST_GENERATOR
 * (`node`: this script's own SMTP client even where smtp-source is installed; it is used without Postfix),
 * COST_MAX_WAL_MB (PostgreSQL's max_wal_size in MB, min_wal_size a quarter of it; unset: the cluster's own),
 * COST_BODIES (1: smtp-source's one repeated line; N > 1: N bodies of words drawn at random, the
 * message's own number in each, sent by this script's client: prose-like mail, whose raw bytes,
 * renderings and search words compress as real text does), COST_SEARCH (words: GET /messages?q=<words>&limit=50
 * read 10 times a second during the load, its latency printed; unset: no reads).
 */
import { execFileSync } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { cpus } from "node:os"
import { cpuSnapshot, envInt, fmt, loadAverage, table, waitFor } from "./lib/common.ts"
import { Burnbox, type PgClient, Session, statementStats } from "./lib/burnbox.ts"
import { type ReadResult, startReader } from "./lib/reader.ts"
import { findTools, messageFactory, postfixHint, runSmtpLoad, runSmtpSource } from "./lib/smtp.ts"

const messages = envInt("COST_MESSAGES", 20_000, 100)
const sessions = envInt("COST_SESSIONS", 16, 1)
const size = envInt("COST_SIZE", 5_000, 100)
const bodies = envInt("COST_BODIES", 1, 1)
const searchWords = process.env["COST_SEARCH"]

const session = new Session("bench:ingest-cost")
const log = session.log

const du = (path: string) => Number(execFileSync("du", ["-sb", path], { encoding: "utf8" }).split(/\s/)[0])
const mb = (bytes: number) => `${fmt(bytes / 1_048_576, 1)} MB`

/** The data directory's bytes on disk, and pg_wal's (du: what the files take, WAL segments recycled or not). */
const dataDirBytes = async (db: PgClient): Promise<{ total: number; wal: number }> => {
  const dir = (await db.query<{ dir: string }>("SELECT current_setting('data_directory') AS dir")).rows[0]!.dir
  return { total: du(dir), wal: du(join(dir, "pg_wal")) }
}

/**
 * The bytes of each table's parts: its heap (main fork with its free-space and visibility maps),
 * its TOAST (with the TOAST index) and each index, keyed `table`, `table (TOAST)` and `table: index`;
 * partitions (`<table>_p<n>`) counted with their table.
 */
const relationParts = async (db: PgClient): Promise<Map<string, number>> => {
  const rows = await db.query<{ name: string; bytes: string }>(`
    SELECT regexp_replace(t.relname, '_p\\d+$', '') AS name, sum(pg_table_size(t.oid) - coalesce(pg_total_relation_size(t.reltoastrelid), 0))::text AS bytes
    FROM pg_class t JOIN pg_namespace n ON n.oid = t.relnamespace
    WHERE t.relkind = 'r' AND (n.nspname = 'public' OR t.relname = 'pg_largeobject') GROUP BY 1
    UNION ALL
    SELECT regexp_replace(t.relname, '_p\\d+$', '') || ' (TOAST)', sum(pg_total_relation_size(t.reltoastrelid))::text
    FROM pg_class t JOIN pg_namespace n ON n.oid = t.relnamespace
    WHERE t.relkind = 'r' AND t.reltoastrelid <> 0 AND n.nspname = 'public' GROUP BY 1
    UNION ALL
    SELECT regexp_replace(t.relname, '_p\\d+$', '') || ': ' || coalesce(pi.relname, i.relname), sum(pg_relation_size(i.oid))::text
    FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
    LEFT JOIN pg_inherits h ON h.inhrelid = i.oid LEFT JOIN pg_class pi ON pi.oid = h.inhparent
    WHERE t.relkind = 'r' AND n.nspname = 'public' GROUP BY 1`)
  return new Map(rows.rows.map((r) => [r.name, Number(r.bytes)]))
}

/** The average stored size (pg_column_size: compressed or not, inline or out of line) of each column of messages and events, for the rows of the load. */
const columnSizes = async (db: PgClient, skipMessages: number): Promise<Array<{ table: string; column: string; bytes: number }>> => {
  const out: Array<{ table: string; column: string; bytes: number }> = []
  for (const name of ["messages", "events"]) {
    const cols = (await db.query<{ attname: string }>(
      "SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
      [name]
    )).rows.map((r) => r.attname)
    const rows = (await db.query<Record<string, string>>(
      `SELECT ${cols.map((c) => `coalesce(avg(pg_column_size("${c}")), 0)::text AS "${c}"`).join(", ")}
       FROM (SELECT * FROM ${name} ORDER BY ${name === "messages" ? "id" : "time"} OFFSET ${name === "messages" ? skipMessages : 0}) t`
    )).rows[0]!
    for (const c of cols) out.push({ table: name, column: c, bytes: Number(rows[c]) })
  }
  return out
}

interface WalStats {
  readonly bytes: number
  readonly records: number
  readonly fpi: number
  readonly fsyncs: number
}

/** pg_stat_wal, with WAL fsyncs from pg_stat_io where PostgreSQL keeps them (18) or pg_stat_wal (older). */
const walStats = async (db: PgClient): Promise<WalStats> => {
  const wal = (await db.query<{ wal_bytes: string; wal_records: string; wal_fpi: string }>(
    "SELECT wal_bytes::text, wal_records::text, wal_fpi::text FROM pg_stat_wal"
  )).rows[0]!
  let fsyncs = 0
  try {
    fsyncs = Number((await db.query<{ n: string }>("SELECT coalesce(sum(fsyncs), 0)::text AS n FROM pg_stat_io WHERE object = 'wal'")).rows[0]!.n)
  } catch {
    fsyncs = Number((await db.query<{ n: string }>("SELECT wal_sync::text AS n FROM pg_stat_wal")).rows[0]!.n)
  }
  return { bytes: Number(wal.wal_bytes), records: Number(wal.wal_records), fpi: Number(wal.wal_fpi), fsyncs }
}

/** CPU seconds of the PostgreSQL processes (the postmaster, its live children and the reaped ones). */
const postgresCpuSeconds = (postmasterPid: number | undefined): number => {
  if (postmasterPid === undefined) return 0
  const ticks = 100
  const stat = (pid: number) => {
    try {
      const text = readFileSync(`/proc/${pid}/stat`, "utf8")
      const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
      return { ppid: Number(fields[1]), own: Number(fields[11]) + Number(fields[12]), reaped: Number(fields[13]) + Number(fields[14]) }
    } catch {
      return undefined
    }
  }
  const root = stat(postmasterPid)
  if (root === undefined) return 0
  let total = root.own + root.reaped
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    const s = stat(Number(entry))
    if (s !== undefined && s.ppid === postmasterPid) total += s.own
  }
  return total / ticks
}

const main = async (): Promise<number> => {
  const found = findTools().smtpSource
  if (found === undefined) log(`${postfixHint} The load is sent by this script's own SMTP client instead.`)
  const tools = { smtpSource: process.env["COST_GENERATOR"] === "node" || bodies > 1 ? undefined : found }
  const generator = (tools.smtpSource === undefined ? "this script's SMTP client" : "smtp-source -d") +
    (bodies > 1 ? `, ${bodies} bodies of words` : "")
  const burnbox = await Burnbox.create(session, { logName: "ingest-cost" })
  // COST_MAX_WAL_MB: PostgreSQL's max_wal_size for the run (min_wal_size a quarter of it, at least 32 MB).
  const maxWalMb = process.env["COST_MAX_WAL_MB"] === undefined ? undefined : envInt("COST_MAX_WAL_MB", 1024, 32)
  const db = await burnbox.startWithStatementStats(undefined, "all", maxWalMb === undefined ? {} : {
    max_wal_size: `${maxWalMb}MB`,
    min_wal_size: `${Math.max(32, Math.floor(maxWalMb / 4))}MB`
  })
  const version = (await db.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]!.v
  const settings = (await db.query<{ name: string; setting: string }>(
    "SELECT name, setting || coalesce(unit, '') AS setting FROM pg_settings WHERE name IN ('synchronous_commit', 'fsync', 'wal_compression', 'full_page_writes', 'default_toast_compression', 'max_wal_size', 'min_wal_size')"
  )).rows.map((r) => `${r.name}=${r.setting}`).join(", ")

  const token = await burnbox.setupAccount("cost@bench.test")
  const alias = await burnbox.claimAlias(token)
  const pending = async () => Number((await db.query<{ n: string }>(
    "SELECT count(*)::text AS n FROM messages WHERE processing_status NOT IN ('processed', 'failed')"
  )).rows[0]!.n)

  /** Sends `count` messages over `connections` persistent sessions; answers the wall seconds to the last reply. */
  const send = async (count: number, connections: number): Promise<number> => {
    if (tools.smtpSource !== undefined) {
      const args = ["-d", "-s", String(connections), "-m", String(count), "-l", String(size), "-f", "sender@bench.test", "-t", alias.address, `127.0.0.1:${burnbox.smtpPort}`]
      const run = await runSmtpSource(session, tools.smtpSource, args, 30 * 60_000)
      if (run.exitCode !== 0) throw new Error(`smtp-source failed: ${run.output}`)
      return run.seconds
    }
    const { make } = messageFactory({ from: "sender@bench.test", to: alias.address, size, tag: "cost", bodies })
    const result = await runSmtpLoad({ port: burnbox.smtpPort, connections, sourceAddresses: 0, make, messages: count, timeoutMs: 30 * 60_000 })
    if (result.accepted !== count) throw new Error(`${count - result.accepted} of ${count} messages were not accepted`)
    return (result.endedAt - result.startedAt) / 1000
  }

  // A warm-up (the plan cache, the first pages of each table), then the clean slate for the counters.
  await send(Math.min(200, messages), 4)
  await waitFor(async () => (await pending()) === 0 || undefined, 120_000, "the warm-up processed")
  await db.query("CHECKPOINT")
  await db.query("SELECT pg_stat_statements_reset()")
  const sizesBefore = await relationParts(db)
  const dirBefore = await dataDirBytes(db)
  const walBefore = await walStats(db)
  const countBefore = Number((await db.query<{ n: string }>("SELECT count(*)::text AS n FROM messages")).rows[0]!.n)
  const rawBefore = Number((await db.query<{ n: string }>("SELECT coalesce(sum(size_bytes), 0)::text AS n FROM messages")).rows[0]!.n)
  const pgBefore = postgresCpuSeconds(burnbox.postmasterPid())
  const load = `load average ${loadAverage()}`
  log(`loading ${messages} messages of ${size} bytes over ${sessions} sessions (${load})`)

  // COST_SEARCH: a search of the growing mailbox, read from a worker thread on a fixed schedule while the load goes in.
  const reader = searchWords === undefined ? undefined : startReader({
    targets: [{ name: "search", url: `${burnbox.baseUrl}/api/v1/messages?limit=50&q=${encodeURIComponent(searchWords)}`, headers: { authorization: `Bearer ${token}` } }],
    perSecond: 10
  })
  const cpuStart = cpuSnapshot(burnbox.pid)
  const source = { seconds: await send(messages, sessions) }
  const searched: ReadonlyArray<ReadResult> = reader === undefined ? [] : await reader.stop()
  const cpuLoaded = cpuSnapshot(burnbox.pid)
  const pgLoaded = postgresCpuSeconds(burnbox.postmasterPid())
  const walLoaded = await walStats(db)
  const drainStarted = performance.now()
  await waitFor(async () => (await pending()) === 0 || undefined, 30 * 60_000, "the load processed", 200)
  const drainSeconds = (performance.now() - drainStarted) / 1000
  const cpuEnd = cpuSnapshot(burnbox.pid)
  const pgEnd = postgresCpuSeconds(burnbox.postmasterPid())
  const walAfter = await walStats(db)
  await db.query("CHECKPOINT")
  const sizesAfter = await relationParts(db)
  const dirAfter = await dataDirBytes(db)
  const stored = Number((await db.query<{ n: string }>("SELECT count(*)::text AS n FROM messages")).rows[0]!.n) - countBefore
  const rawBytes = Number((await db.query<{ n: string }>("SELECT coalesce(sum(size_bytes), 0)::text AS n FROM messages")).rows[0]!.n) - rawBefore
  const rawPerMessage = rawBytes / stored
  const statements = await statementStats(db)
  const columns = await columnSizes(db, countBefore)

  const nodeSeconds = (a: ReturnType<typeof cpuSnapshot>, b: ReturnType<typeof cpuSnapshot>) => (b.server.root - a.server.root) / 100
  const loadedNode = nodeSeconds(cpuStart, cpuLoaded)
  const drainNode = nodeSeconds(cpuLoaded, cpuEnd)
  const perMsg = (seconds: number) => fmt((seconds * 1000) / stored, 3)
  const out: Array<string> = []
  out.push(`bench:ingest-cost: ${stored} messages of ${fmt(rawPerMessage)} raw bytes to one alias, ${generator}, ${sessions} sessions; PostgreSQL ${version} (${settings})`)
  out.push(`${load} at the start; ${cpus().length} cores`)
  for (const r of searched) {
    out.push(`GET /messages?q=${searchWords}&limit=50 10 times a second during the load: ${r.latency.count} answers, p50 ${fmt(r.latency.p50, 1)} ms, ` +
      `p99 ${fmt(r.latency.p99, 1)} ms, max ${fmt(r.latency.max, 1)} ms; failures ${r.failures.size === 0 ? "none" : [...r.failures].map(([k, n]) => `${k} x${n}`).join(", ")}`)
  }
  out.push("")
  out.push(table(["", "load (to the last 250)", "drain (the pipeline's backlog)", "whole"], [
    ["wall s", fmt(source.seconds, 1), fmt(drainSeconds, 1), fmt(source.seconds + drainSeconds, 1)],
    ["msg/s accepted", fmt(stored / source.seconds), "", ""],
    ["node CPU ms/msg", perMsg(loadedNode), perMsg(drainNode), perMsg(loadedNode + drainNode)],
    ["PostgreSQL CPU ms/msg", perMsg(pgLoaded - pgBefore), perMsg(pgEnd - pgLoaded), perMsg(pgEnd - pgBefore)],
    ["WAL bytes/msg (raw bytes/msg: " + fmt(rawPerMessage) + ")", fmt((walLoaded.bytes - walBefore.bytes) / stored), fmt((walAfter.bytes - walLoaded.bytes) / stored), `${fmt((walAfter.bytes - walBefore.bytes) / stored)} (${fmt((walAfter.bytes - walBefore.bytes) / rawBytes, 2)}x raw)`],
    ["WAL records/msg", fmt((walLoaded.records - walBefore.records) / stored, 1), fmt((walAfter.records - walLoaded.records) / stored, 1), fmt((walAfter.records - walBefore.records) / stored, 1)],
    ["WAL full-page images/msg", fmt((walLoaded.fpi - walBefore.fpi) / stored, 2), fmt((walAfter.fpi - walLoaded.fpi) / stored, 2), fmt((walAfter.fpi - walBefore.fpi) / stored, 2)],
    ["WAL fsyncs/s", fmt((walLoaded.fsyncs - walBefore.fsyncs) / source.seconds), fmt((walAfter.fsyncs - walLoaded.fsyncs) / Math.max(drainSeconds, 0.001)), ""],
    ["messages per WAL fsync", fmt(stored / Math.max(1, walLoaded.fsyncs - walBefore.fsyncs), 1), "", ""]
  ]))
  out.push("")
  const totalMs = statements.reduce((sum, s) => sum + s.ms, 0)
  const totalWal = statements.reduce((sum, s) => sum + s.wal, 0)
  out.push(`PostgreSQL's statements (pg_stat_statements), by execution time; per message = over the ${stored} messages:`)
  out.push(table(["statement", "calls", "exec ms/msg", "share of exec", "WAL bytes/msg", "share of WAL"], statements.slice(0, 14).map((s) => [
    s.query.replace(/\s+/g, " ").trim().slice(0, 70),
    fmt(s.calls),
    fmt(s.ms / stored, 3),
    `${fmt((100 * s.ms) / totalMs, 1)} %`,
    fmt(s.wal / stored),
    `${fmt((100 * s.wal) / Math.max(1, totalWal), 1)} %`
  ])))
  out.push("")
  const growth = [...sizesAfter].map(([name, after]) => ({ name, bytes: after - (sizesBefore.get(name) ?? 0) }))
    .filter((g) => g.bytes > 0).sort((a, b) => b.bytes - a.bytes)
  const grown = growth.reduce((sum, g) => sum + g.bytes, 0)
  out.push(`Disk: growth of each table's heap, TOAST and indexes (partitions with their table) per message, against the raw ${fmt(rawPerMessage)} bytes:`)
  out.push(table(["relation", "B/msg", "x raw"], [
    ...growth.slice(0, 24).map((g) => [g.name, fmt(g.bytes / stored), fmt(g.bytes / rawBytes, 3)]),
    ["all tables", `${fmt(grown / stored)}`, `${fmt(grown / rawBytes, 2)}x`]
  ]))
  out.push(`Columns of the load's rows, average stored bytes (pg_column_size; >= 8 shown): ${
    columns.filter((c) => c.bytes >= 8).sort((a, b) => b.bytes - a.bytes).map((c) => `${c.table}.${c.column} ${fmt(c.bytes)}`).join(", ")
  }`)
  out.push(
    `Data directory (du, after a CHECKPOINT): ${mb(dirBefore.total)} -> ${mb(dirAfter.total)}, ${fmt((dirAfter.total - dirBefore.total) / stored)} B/msg = ` +
      `${fmt((dirAfter.total - dirBefore.total) / rawBytes, 2)}x raw; of it pg_wal ${mb(dirBefore.wal)} -> ${mb(dirAfter.wal)} ` +
      `(segments kept for reuse, up to max_wal_size; the tables' growth above is the rest)`
  )
  out.push("")
  out.push("Method: one run; CPU from /proc (node: the service's process; PostgreSQL: the postmaster, its live children and the")
  out.push("reaped ones). The counters start after a 200-message warm-up and a CHECKPOINT; sizes after a CHECKPOINT at the end.")
  out.push("WAL the size of the raw bytes is the floor for storing them in PostgreSQL's heap (once, uncompressed). smtp-source's")
  out.push("bodies repeat one line, so they compress far better than real mail: message_raw's bytes here are a lower bound.")
  process.stdout.write(out.join("\n") + "\n")
  return 0
}

await session.run(40 * 60_000, main)
