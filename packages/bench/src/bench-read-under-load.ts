/**
 * The API while mail pours in (#36 item 3): GET /messages (p99 goal 50 ms) and GET /me (p99 goal
 * 20 ms) read ten times a second each, on the idle service and while `burnbox start` accepts mail
 * at its full rate, side by side in one run, with the ingest rate next to the latencies.
 *
 * Usage: pnpm bench:read-under-load
 *
 * What it does:
 * 1. starts `burnbox start` (API, SMTP ingest and worker in one process, embedded PostgreSQL) on
 *    a temporary data dir, with lib/loop-delay.ts preloaded (the service's event-loop delay and
 *    utilization each second); a pro account with raised limits, a token, an alias; READ_SEED
 *    messages so GET /messages answers a full page of 50;
 * 2. READ_ROUNDS times, alternating: "idle" (the reader alone, READ_IDLE_SECONDS) and "load"
 *    (the reader while READ_MESSAGES messages of 5 KB go in at full rate: Postfix `smtp-source -d
 *    -s READ_SESSIONS` when installed, else this package's SMTP client with as many connections);
 *    the reader (lib/reader.ts, a worker thread) requests GET /api/v1/messages?limit=50 and GET
 *    /api/v1/me on a fixed schedule of READ_PER_SECOND each;
 * 3. beside the reader, where a read's time can go: the same page's SQL on a connection of this
 *    script's own (PostgreSQL alone, no pool, no event loop), every 100 ms; the service's busy
 *    PostgreSQL connections (pg_stat_activity, every 50 ms: active or in a transaction; the pool
 *    holds BURNBOX pool sizes of them); the service's event-loop delay (p50/p99/max) and busy
 *    share;
 * 4. prints one table (medians over the rounds), the load average at each phase's start, and
 *    the goals. Each phase starts after the backlog is processed and `ANALYZE messages` (the table
 *    doubles in a load phase; stale statistics planned the page as a sort of every row).
 *
 * Environment: READ_ROUNDS (2), READ_MESSAGES (8000), READ_SESSIONS (16), READ_IDLE_SECONDS (10),
 * READ_PER_SECOND (10), READ_SEED (200), BENCH_LOG_DIR; BENCH_BURNBOX_ROOT measures another tree
 * (lib/burnbox.ts), e.g. a snapshot of main for a before/after in alternation.
 */
import { readFileSync } from "node:fs"
import { cpus } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Burnbox, type PgClient, Session } from "./lib/burnbox.ts"
import { cpuShare, cpuSnapshot, distribution, type Distribution, envInt, epochMs, fmt, loadAverage, median, serverCpuCell, sleep, table, waitFor } from "./lib/common.ts"
import { type ReadResult, startReader } from "./lib/reader.ts"
import { findTools, messageFactory, runSmtpLoad, runSmtpSource } from "./lib/smtp.ts"

const rounds = envInt("READ_ROUNDS", 2, 1)
const messages = envInt("READ_MESSAGES", 8_000, 10)
const sessions = envInt("READ_SESSIONS", 16, 1)
const idleSeconds = envInt("READ_IDLE_SECONDS", 10, 1)
const perSecond = envInt("READ_PER_SECOND", 10, 1)
const seed = envInt("READ_SEED", 200, 0)
const goals = { messagesP99: 50, meP99: 20 }

const session = new Session("bench:read-under-load")
const log = session.log

interface Phase {
  readonly kind: "idle" | "load"
  readonly round: number
  readonly loadAverage: string
  readonly reads: ReadonlyArray<ReadResult>
  readonly sql: Distribution
  /** the service's PostgreSQL connections busy (active or in a transaction): mean, max */
  readonly busy: { readonly mean: number; readonly max: number }
  readonly loop: { readonly p50: number; readonly p99: number; readonly max: number; readonly busy: number }
  readonly ingest: { readonly accepted: number; readonly seconds: number } | undefined
  readonly cpu: ReturnType<typeof cpuShare>
}

/** The service's event-loop lines (lib/loop-delay.ts) written between `from` and `to`. */
const loopBetween = (file: string, from: number, to: number) => {
  let lines: Array<{ at: number; p50: number; p99: number; max: number; busy: number }> = []
  try {
    lines = readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as (typeof lines)[number])
  } catch {
    // no line yet
  }
  const within = lines.filter((l) => l.at > from && l.at <= to + 1000)
  return {
    p50: median(within.map((l) => l.p50)),
    // the worst second's p99, and the worst single delay
    p99: within.length === 0 ? Number.NaN : Math.max(...within.map((l) => l.p99)),
    max: within.length === 0 ? Number.NaN : Math.max(...within.map((l) => l.max)),
    busy: within.reduce((s, l) => s + l.busy, 0) / Math.max(1, within.length)
  }
}

/** Until `stop`: the page's SQL on a connection of its own every 100 ms, and the service's busy connections every 50 ms. */
const probe = (sqlDb: PgClient, activityDb: PgClient, accountId: number) => {
  const state = { running: true }
  const sql: Array<number> = []
  const busy: Array<number> = []
  const sqlLoop = (async () => {
    while (state.running) {
      const started = performance.now()
      await sqlDb.query(
        `SELECT id, subject, sender_address, snippet, received_at FROM messages
         WHERE account_id = $1 AND trashed_at IS NULL ORDER BY received_at DESC, id DESC LIMIT 50`,
        [accountId]
      )
      sql.push(performance.now() - started)
      await sleep(100)
    }
  })()
  const activityLoop = (async () => {
    while (state.running) {
      const { rows } = await activityDb.query<{ n: string }>(`
        SELECT count(*)::text AS n FROM pg_stat_activity
        WHERE backend_type = 'client backend' AND application_name LIKE 'burnbox/%'
          AND state IN ('active', 'idle in transaction') AND query NOT LIKE 'LISTEN%'`)
      busy.push(Number(rows[0]!.n))
      await sleep(50)
    }
  })()
  return {
    stop: async () => {
      state.running = false
      await Promise.all([sqlLoop, activityLoop])
      return { sql: distribution(sql), busy: { mean: busy.reduce((a, b) => a + b, 0) / Math.max(1, busy.length), max: Math.max(0, ...busy) } }
    }
  }
}

const main = async (): Promise<number> => {
  const loopFile = join(session.tempDir("bench-read-loop-"), "loop.jsonl")
  const preload = fileURLToPath(new URL("./lib/loop-delay.ts", import.meta.url))
  process.env["BENCH_NODE_ARGS"] = `${process.env["BENCH_NODE_ARGS"] ?? ""} --import=${preload}`
  const burnbox = await Burnbox.create(session, { logName: "read-under-load", extraEnv: { BENCH_LOOP_FILE: loopFile } })
  session.afterCleanup(() => burnbox.summarizeLog())
  await burnbox.start("start")
  const email = "reader@bench.test"
  const token = await burnbox.setupAccount(email, "read,manage-aliases")
  const alias = await burnbox.claimAlias(token)
  const db = await burnbox.db()
  const sqlDb = await burnbox.db()
  const activityDb = await burnbox.db()
  const accountId = Number((await db.query<{ id: number }>("SELECT id FROM accounts WHERE email = $1", [email])).rows[0]!.id)
  const pending = async () => Number((await db.query<{ n: string }>(
    "SELECT count(*)::text AS n FROM messages WHERE processing_status NOT IN ('processed', 'failed')"
  )).rows[0]!.n)

  const smtpSource = findTools().smtpSource
  const generator = smtpSource === undefined ? `this package's SMTP client, ${sessions} connections` : `smtp-source -d -s ${sessions}`
  if (seed > 0) {
    const { make } = messageFactory({ from: "sender@bench.test", to: alias.address, size: 5_000, tag: "seed" })
    await runSmtpLoad({ port: burnbox.smtpPort, connections: 4, sourceAddresses: 0, make, messages: seed, timeoutMs: 120_000 })
    await waitFor(async () => (await pending()) === 0 || undefined, 120_000, "the seed processed")
  }
  const headers = { authorization: `Bearer ${token}` }
  const targets = [
    { name: "GET /messages", url: `${burnbox.baseUrl}/api/v1/messages?limit=50`, headers },
    { name: "GET /me", url: `${burnbox.baseUrl}/api/v1/me`, headers }
  ]
  // Warm: the token's cache, the plans, the first pages.
  for (let i = 0; i < 20; i++) for (const t of targets) await fetch(t.url, { headers }).then((r) => r.arrayBuffer())

  const send = async (): Promise<{ accepted: number; seconds: number }> => {
    if (smtpSource !== undefined) {
      const args = ["-d", "-s", String(sessions), "-m", String(messages), "-l", "5000", "-f", "sender@bench.test", "-t", alias.address, `127.0.0.1:${burnbox.smtpPort}`]
      const run = await runSmtpSource(session, smtpSource, args, 30 * 60_000)
      if (run.exitCode !== 0) throw new Error(`smtp-source failed: ${run.output}`)
      return { accepted: messages, seconds: run.seconds }
    }
    const { make } = messageFactory({ from: "sender@bench.test", to: alias.address, size: 5_000, tag: "load" })
    const result = await runSmtpLoad({ port: burnbox.smtpPort, connections: sessions, sourceAddresses: 0, make, messages, timeoutMs: 30 * 60_000 })
    return { accepted: result.accepted, seconds: (result.endedAt - result.startedAt) / 1000 }
  }

  const phases: Array<Phase> = []
  const runPhase = async (kind: Phase["kind"], round: number) => {
    session.checkInterrupted()
    // The previous load's backlog drains first, so an idle phase is idle.
    await waitFor(async () => (await pending()) === 0 || undefined, 10 * 60_000, "the backlog processed", 250)
    // The table doubles in a load phase: fresh statistics, as autovacuum keeps them for a mailbox that
    // grows by a small share at a time (stale ones planned the page as a bitmap scan and a sort of every row).
    await db.query("ANALYZE messages")
    const load = loadAverage()
    log(`round ${round}: ${kind} (load average ${load})`)
    const from = epochMs()
    const cpuBefore = cpuSnapshot(burnbox.pid)
    const probes = probe(sqlDb, activityDb, accountId)
    const reader = startReader({ targets, perSecond })
    const ingest = kind === "load" ? await send() : (await sleep(idleSeconds * 1000), undefined)
    const reads = await reader.stop()
    const { sql, busy } = await probes.stop()
    const cpu = cpuShare(cpuBefore, cpuSnapshot(burnbox.pid))
    const to = epochMs()
    await sleep(1_100) // the loop file's last second
    burnbox.checkAlive()
    const phase: Phase = { kind, round, loadAverage: load, reads, sql, busy, loop: loopBetween(loopFile, from, to), ingest, cpu }
    phases.push(phase)
    log(`  ${reads.map((r) => `${r.name} p50 ${fmt(r.latency.p50, 1)} p99 ${fmt(r.latency.p99, 1)} ms (${r.latency.count}, client lag p99 ${fmt(r.lag.p99, 1)})`).join("; ")}` +
      `${ingest === undefined ? "" : `; ingest ${fmt(ingest.accepted / ingest.seconds)} msg/s`}; loop p99 ${fmt(phase.loop.p99, 1)} ms busy ${fmt(phase.loop.busy * 100)} %`)
  }
  for (let round = 1; round <= rounds; round++) {
    await runPhase("idle", round)
    await runPhase("load", round)
  }

  const of = (kind: Phase["kind"]) => phases.filter((p) => p.kind === kind)
  const readOf = (p: Phase, name: string) => p.reads.find((r) => r.name === name)!
  const med = (kind: Phase["kind"], f: (p: Phase) => number) => median(of(kind).map(f))
  const out: Array<string> = []
  out.push("")
  out.push(`bench:read-under-load: \`burnbox start\`, GET /messages?limit=50 and GET /me each ${perSecond}/s (open loop, keep-alive), idle and under`)
  out.push(`${fmt(messages)} messages of 5 KB to one alias (${generator}), ${rounds} round(s) alternating; ${cpus().length} cores, Node ${process.version}`)
  out.push("")
  const rowsFor = (p: Phase) => {
    const m = readOf(p, "GET /messages")
    const me = readOf(p, "GET /me")
    const failures = [...m.failures, ...me.failures].map(([k, n]) => `${k}: ${n}`).join(", ") || "-"
    return [
      `${p.kind} #${p.round}`, p.loadAverage.split(" ")[0]!,
      p.ingest === undefined ? "-" : fmt(p.ingest.accepted / p.ingest.seconds),
      fmt(m.latency.p50, 1), fmt(m.latency.p99, 1), fmt(me.latency.p50, 1), fmt(me.latency.p99, 1),
      `${fmt(m.lag.p99, 1)}, ${fmt(me.lag.p99, 1)}`,
      fmt(p.sql.p50, 1), fmt(p.sql.p99, 1),
      `${fmt(p.busy.mean, 1)} / ${p.busy.max}`,
      `${fmt(p.loop.p50, 1)} / ${fmt(p.loop.p99, 1)} / ${fmt(p.loop.max, 1)}`, fmt(p.loop.busy * 100),
      serverCpuCell(p.cpu), failures
    ]
  }
  const header = ["phase", "load avg", "ingest msg/s", "/messages p50", "p99", "/me p50", "p99", "client lag p99 (/messages, /me)", "page SQL alone p50", "p99", "busy conns mean / max", "loop delay p50 / p99 / max", "loop busy %", "cpu % node+pg", "failures"]
  out.push(table(header, phases.map(rowsFor)))
  out.push("")
  out.push("ms throughout. page SQL alone = the list's newest-first page on this script's own connection (PostgreSQL without the service's pool")
  out.push("or event loop); busy conns = the service's PostgreSQL connections active or in a transaction (pg_stat_activity every 50 ms);")
  out.push("loop delay = the service's main-thread event-loop delay per second (median of the seconds' p50, worst second's p99, worst delay);")
  out.push("loop busy = the share of the time its event loop ran. cpu = share of one core (node + its PostgreSQL).")
  out.push("client lag = how late the reader's own thread sent each request (counted in its latency): the benchmark's client shares the cores.")
  out.push("Each phase starts once the pipeline's backlog is processed, after ANALYZE messages.")
  out.push("")
  const summary = (kind: Phase["kind"]) => [
    kind,
    kind === "load" ? fmt(med(kind, (p) => p.ingest!.accepted / p.ingest!.seconds)) : "-",
    fmt(med(kind, (p) => readOf(p, "GET /messages").latency.p50), 1), fmt(med(kind, (p) => readOf(p, "GET /messages").latency.p99), 1),
    fmt(med(kind, (p) => readOf(p, "GET /me").latency.p50), 1), fmt(med(kind, (p) => readOf(p, "GET /me").latency.p99), 1)
  ]
  out.push(table([`median of ${rounds} round(s)`, "ingest msg/s", "GET /messages p50", "p99", "GET /me p50", "p99"], [summary("idle"), summary("load")]))
  const messagesP99 = med("load", (p) => readOf(p, "GET /messages").latency.p99)
  const meP99 = med("load", (p) => readOf(p, "GET /me").latency.p99)
  out.push(`goal GET /messages p99 <= ${goals.messagesP99} ms under load: ${messagesP99 <= goals.messagesP99 ? "MET" : "NOT MET"} (${fmt(messagesP99, 1)})`)
  out.push(`goal GET /me p99 <= ${goals.meP99} ms under load:       ${meP99 <= goals.meP99 ? "MET" : "NOT MET"} (${fmt(meP99, 1)})`)
  out.push(`load average (1/5/15 min) at the end: ${loadAverage()}`)
  process.stdout.write(out.join("\n") + "\n")
  return 0
}

await session.run(60 * 60_000, main)
