/**
 * From 250 to the `wait` answer: for every message, the time from burnbox's SMTP 250 to the
 * moment a waiting GET /api/v1/messages?wait request answers it. Goal (issue #16): p50 <= 20 ms,
 * p99 <= 100 ms, at 5 and 200 messages/s with WAIT_WAITERS (500) requests waiting.
 *
 * Usage: pnpm bench:wait
 *
 * What it does:
 * 1. starts `burnbox start` (API, SMTP ingest and pipeline in one process, embedded PostgreSQL);
 *    a pro account with raised request and alias limits, a token, WAIT_WAITERS claimed aliases;
 * 2. one waiter per alias tails it: GET /messages?alias=ID&sort=oldest&limit=100&wait=120, then
 *    again with the answer's nextCursor, so every waiter is always waiting for the next message of
 *    its own alias, and each message (message i goes to alias i mod WAIT_WAITERS) wakes exactly one
 *    waiter; the others hear nothing of it (Realtime tests the alias before it wakes anyone);
 * 3. LISTENs on `burnbox_realtime` for the reference of the same run: the pipeline's NOTIFY, sent
 *    in the transaction that marks a message processed and delivered at its commit (what
 *    bench:pipeline measures), stamped with the same clock;
 * 4. phases: WAIT_LOW_RATE (5) msg/s for 10 s, then WAIT_RATE (200) msg/s for WAIT_SECONDS (5);
 *    after each, until every message was answered (at most 30 s);
 * 5. per message: wait = arrival of the first answer holding it minus its 250; notify = its
 *    NOTIFY minus its 250; and wait minus notify (the cost of waking and answering). A message a
 *    waiter found at once (it came while the waiter was between two requests) is counted apart:
 *    its latency is then the re-arming's, still from its 250;
 * 6. where the time goes: the service runs with BURNBOX_PHASE_STAMPS (store/platform/PhaseStamps.ts)
 *    and stamps each message at each step (accept asked, its group commit's batch, commit, 250
 *    handed to the socket, the claimer's wake-up, the claim, the work, the store's batch and
 *    commit, the realtime NOTIFY heard, the wait's wake-up and read) on the same clock; the
 *    breakdown prints p50/p99 of each step's share of the held messages' time;
 * 7. the event loops: lib/loop-delay.ts is preloaded, and each phase prints the event-loop delay
 *    (median of the seconds' p50, worst second's p99) and busy share of the main thread (HTTP API,
 *    waits) and of `start`'s ingest-and-worker thread (SMTP sessions, group commits, claims, the
 *    inline work of small mail, stores), and the sizes of the batches its messages went in (accept
 *    group commits, claims, store group commits; from the stamps: one batch, one stamp).
 *
 * With WAIT_STATEMENTS=1 the service's PostgreSQL loads pg_stat_statements (one restart before
 * the setup), and each phase prints its statements' calls and mean execution time. With
 * WAIT_SAMPLE_WAITS=1 each phase samples what the service's busy backends wait for (pg_stat_activity
 * every 50 ms: CPU, a lock, the WAL flush...) and in which statement.
 *
 * Environment: WAIT_WAITERS (500), WAIT_RATE (200), WAIT_SECONDS (5), WAIT_LOW_RATE (5),
 * WAIT_CONNECTIONS (20), WAIT_STATEMENTS (0), BENCH_LOG_DIR, BENCH_BURNBOX_ROOT.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { Burnbox, sampleWaits, Session, waitsByStatementText, waitsText } from "./lib/burnbox.ts"
import { distribution, type Distribution, envInt, epochMs, fmt, loadAverage, sleep, table } from "./lib/common.ts"
import { countsText, messageFactory, runSmtpLoad } from "./lib/smtp.ts"

const waiters = envInt("WAIT_WAITERS", 500, 1)
const rate = envInt("WAIT_RATE", 200, 1)
const seconds = envInt("WAIT_SECONDS", 5, 1)
const lowRate = envInt("WAIT_LOW_RATE", 5, 0)
const connections = envInt("WAIT_CONNECTIONS", 20, 1)
const statements = envInt("WAIT_STATEMENTS", 0, 0) > 0
const sampleBackends = envInt("WAIT_SAMPLE_WAITS", 0, 0) > 0
const goalP50 = 20
const goalP99 = 100
const email = "bench-wait@example.com"
const session = new Session("bench:wait")
const log = session.log

const ms = (n: number) => fmt(n, 1)
const cellsOf = (d: Distribution) => [fmt(d.count), ms(d.p50), ms(d.p95), ms(d.p99), ms(d.max)]

const main = async (): Promise<number> => {
  const stampsDir = session.tempDir("bench-wait-stamps-")
  const stampsFile = join(stampsDir, "stamps.jsonl")
  const loopFile = join(stampsDir, "loop.jsonl")
  const preload = fileURLToPath(new URL("./lib/loop-delay.ts", import.meta.url))
  process.env["BENCH_NODE_ARGS"] = `${process.env["BENCH_NODE_ARGS"] ?? ""} --import=${preload}`
  const burnbox = await Burnbox.create(session, {
    logName: "bench-wait",
    extraEnv: { BURNBOX_PHASE_STAMPS: stampsFile, BENCH_LOOP_FILE: loopFile, BENCH_LOOP_THREADS: IngestThread }
  })
  session.afterCleanup(() => burnbox.summarizeLog())
  await burnbox.start("start")
  if (statements) {
    // pg_stat_statements needs loading at PostgreSQL's start: set it, and start the service again.
    const setup = await burnbox.db()
    await setup.query("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
    await burnbox.closeDb(setup)
    await burnbox.stop()
    await burnbox.start("start")
  }
  const token = await burnbox.setupAccount(email)
  const aliases = await burnbox.claimAliases(email, token, waiters)
  log(`claimed ${aliases.length} aliases`)

  const statementsDb = statements ? await burnbox.db() : undefined
  await statementsDb?.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
  const listener = await burnbox.db()
  const notified = new Map<number, number>()
  listener.on("notification", (message) => {
    const at = epochMs()
    const payload = JSON.parse(message.payload ?? "{}") as { messageId?: number }
    if (typeof payload.messageId === "number" && !notified.has(payload.messageId)) notified.set(payload.messageId, at)
  })
  await listener.query("LISTEN burnbox_realtime")

  /** message id -> when a wait answer first held it, and whether that request found it at once. */
  const answered = new Map<number, { at: number; atOnce: boolean }>()
  const state = { running: true }
  let requests = 0
  let failures = 0
  const tail = async (alias: { id: number }) => {
    let cursor: string | null = null
    while (state.running) {
      const sentAt = epochMs()
      requests++
      try {
        const query = `alias=${alias.id}&sort=oldest&limit=100&wait=120${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`
        const response = await fetch(`${burnbox.baseUrl}/api/v1/messages?${query}`, { headers: { authorization: `Bearer ${token}` } })
        const at = epochMs()
        const body = await response.json() as { items?: Array<{ id: number }>; nextCursor?: string | null }
        if (response.status !== 200) throw new Error(`GET /messages answered ${response.status}`)
        for (const item of body.items ?? []) {
          if (!answered.has(item.id)) answered.set(item.id, { at, atOnce: (notified.get(item.id) ?? Number.POSITIVE_INFINITY) < sentAt })
        }
        cursor = body.nextCursor ?? cursor
      } catch (error) {
        failures++
        log(`waiter ${alias.id}: ${String(error)}`)
        await sleep(100)
      }
    }
  }
  const tails = aliases.map(tail)
  // Every waiter's first request is held before the load starts.
  await sleep(3_000)
  log(`${requests} waits open`)

  const rows: Array<Array<string>> = []
  const breakdowns: Array<string> = []
  const goals: Array<string> = []
  const phase = async (name: string, phaseRate: number, secs: number) => {
    const factory = messageFactory({ from: "sender@bench.localhost", to: (index) => aliases[index % aliases.length]!.address, size: 2_000, tag: name.replace(/\W/g, "") })
    const sent: Array<{ id: number; repliedAt: number }> = []
    log(`${name}: ${phaseRate} msg/s for ${secs} s`)
    await statementsDb?.query("SELECT pg_stat_statements_reset()")
    const loadFrom = epochMs()
    const sampler = sampleBackends ? sampleWaits(await burnbox.db()) : undefined
    const result = await runSmtpLoad({
      port: burnbox.smtpPort,
      connections,
      sourceAddresses: connections,
      make: factory.make,
      rate: phaseRate,
      seconds: secs,
      timeoutMs: (secs + 60) * 1000,
      onDelivery: (delivery) => {
        const match = /stored as (\d+)/.exec(delivery.reply.text)
        if (match !== null) sent.push({ id: Number(match[1]), repliedAt: delivery.repliedAt })
      }
    })
    const loadTo = epochMs()
    const waits = await sampler?.stop()
    const deadline = Date.now() + 30_000
    while (Date.now() < deadline && !sent.every((s) => answered.has(s.id) && notified.has(s.id))) await sleep(100)
    burnbox.checkAlive()
    log(`${name}: ${result.accepted} accepted, rejected ${countsText(result.rejected)}, errors ${countsText(result.errors)}`)
    const seen = sent.filter((s) => answered.has(s.id) && notified.has(s.id))
    const held = seen.filter((s) => !answered.get(s.id)!.atOnce)
    const wait = distribution(held.map((s) => answered.get(s.id)!.at - s.repliedAt))
    const notify = distribution(held.map((s) => notified.get(s.id)! - s.repliedAt))
    const wake = distribution(held.map((s) => answered.get(s.id)!.at - notified.get(s.id)!))
    const atOnce = distribution(seen.filter((s) => answered.get(s.id)!.atOnce).map((s) => answered.get(s.id)!.at - s.repliedAt))
    rows.push(
      [`${name}: 250 -> wait answer (held requests)`, ...cellsOf(wait)],
      [`${name}: 250 -> NOTIFY (reference, bench:pipeline's figure)`, ...cellsOf(notify)],
      [`${name}: NOTIFY -> wait answer`, ...cellsOf(wake)],
      [`${name}: 250 -> answer, found at once on re-arming`, ...cellsOf(atOnce)]
    )
    // The stamps are written every 200 ms.
    await sleep(500)
    const stamps = readStamps(stampsFile)
    breakdowns.push(`${name}, held messages:`, breakdown(stamps, held.map((s) => ({ ...s, answeredAt: answered.get(s.id)!.at }))))
    if (waits !== undefined) {
      breakdowns.push(`${name}, the service's busy backends while the load ran (${waits.samples} samples): ${waitsText(waits, 6)}`)
      breakdowns.push(`  by statement: ${waitsByStatementText(waits, 8)}`)
    }
    breakdowns.push(
      `${name}, event loops while the load ran (load average ${loadAverage()}) and batch sizes:`,
      loopsAndBatches(loopFile, loadFrom, loadTo, stamps, sent.map((s) => s.id))
    )
    if (statementsDb !== undefined) {
      const top = (await statementsDb.query<{ query: string; calls: string; mean: number; total: number }>(`
        SELECT query, calls::text, mean_exec_time AS mean, total_exec_time AS total FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '%pg_stat_statements%'
        ORDER BY total_exec_time DESC LIMIT 12`)).rows
      breakdowns.push(`${name}, PostgreSQL's statements by execution time (pg_stat_statements):`, table(
        ["statement", "calls", "mean ms", "total ms"],
        top.map((t) => [t.query.replace(/\s+/g, " ").trim().slice(0, 90), t.calls, ms(t.mean), fmt(t.total)])
      ))
    }
    const missing = sent.length - seen.length
    goals.push(`${name}: ${sent.length} messages, ${missing} never answered; goal p50 <= ${goalP50} ms: ${wait.p50 <= goalP50 ? "MET" : "NOT MET"} (${ms(wait.p50)}); goal p99 <= ${goalP99} ms: ${wait.p99 <= goalP99 ? "MET" : "NOT MET"} (${ms(wait.p99)})`)
  }
  if (lowRate > 0) await phase(`${lowRate} msg/s`, lowRate, 10)
  await phase(`${rate} msg/s`, rate, seconds)
  state.running = false
  log(`${requests} wait requests, ${failures} failed; stopping (the waiters' last requests end with the server)`)
  void Promise.allSettled(tails)

  const out = [
    "",
    `bench:wait: ${waiters} waiters, each tailing its own alias (sort=oldest, cursor, wait=120); load average ${loadAverage()}`,
    table(["ms, per message", "n", "p50", "p95", "p99", "max"], rows),
    ...goals.map((g) => `  ${g}`),
    "",
    "Where the time goes (ms per message; each step from the one before it, so the p50s add up to about the total's):",
    ...breakdowns,
    "",
    "Method: the generator stamps each 250 (with its \"stored as <id>\"), each waiter the arrival of each answer, and a LISTEN",
    "connection each NOTIFY on burnbox_realtime, with one clock (performance.timeOrigin + performance.now()). Each message goes",
    "to one alias, whose one waiter it wakes. \"Held\" rows count the messages whose answering request was sent before the",
    "message's NOTIFY; a request sent after it found the message at once (its row shows the re-arming's cost)."
  ]
  process.stdout.write(out.join("\n") + "\n")
  return 0
}

/** The service's phase stamps: message id -> phase -> epoch ms (the first stamp of each). */
const readStamps = (file: string): Map<number, Map<string, number>> => {
  const stamps = new Map<number, Map<string, number>>()
  let text = ""
  try {
    text = readFileSync(file, "utf8")
  } catch {
    return stamps
  }
  for (const line of text.split("\n")) {
    if (line === "") continue
    const [id, phase, at] = JSON.parse(line) as [number, string, number]
    const of = stamps.get(id) ?? new Map<string, number>()
    if (!of.has(phase)) of.set(phase, at)
    stamps.set(id, of)
  }
  return stamps
}

/**
 * The steps in the order a message passes them: each row is a step's end minus the latest of the
 * steps before it (a claimer woken before the commit, by an earlier message, counts 0 for the
 * wake-up). "client" rows are the benchmark's own stamps.
 */
const steps: ReadonlyArray<readonly [string, string]> = [
  ["accept.asked", "SMTP DATA ended: the accept asked"],
  ["accept.batch", "  group commit: gathering window and a free batch slot"],
  ["accept.committed", "  accept statement and commit"],
  ["accept.replied", "  commit -> 250 handed to the socket"],
  ["client.replied", "  -> 250 at the client"],
  ["claim.woke", "  -> the claimer woke (NOTIFY heard, or its last claim came back full)"],
  ["claim.sent", "  -> claim sent (room in the pipeline's places)"],
  ["claim.answered", "  claim round trip"],
  ["work.started", "  -> work started (work budget, fibers' turn)"],
  ["work.done", "  the work (parse, analysis, SPF/DKIM/DMARC)"],
  ["store.sent", "  -> store sent (waiting for the group commit)"],
  ["store.committed", "  store statement and commit"],
  ["realtime.heard", "  -> realtime NOTIFY heard by the server"],
  ["wait.woke", "  -> the wait woke"],
  ["wait.read", "  the wait's read"],
  ["client.answered", "  -> the answer at the client"]
]

/** The thread of `burnbox start` that runs the SMTP ingest and the worker (cli/src/IngestWorker.ts). */
const IngestThread = "burnbox-ingest-worker"

interface LoopLine {
  readonly thread?: string
  readonly at: number
  readonly p50: number
  readonly p99: number
  readonly max: number
  readonly busy: number
}

/**
 * The event loops' seconds (lib/loop-delay.ts) that ended while the load ran, per thread, and
 * how many of the phase's messages went in each batch: the messages that share one batch share
 * its stamp (one accept group commit: its `accept.batch`; one claim: its `claim.answered`; one
 * store: its `store.sent`).
 */
const loopsAndBatches = (
  file: string,
  from: number,
  to: number,
  stamps: Map<number, Map<string, number>>,
  ids: ReadonlyArray<number>
): string => {
  let lines: Array<LoopLine> = []
  try {
    lines = readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as LoopLine)
  } catch {
    // no line yet
  }
  const within = lines.filter((l) => l.at > from + 1000 && l.at <= to + 1000)
  const loopRow = (label: string, of: ReadonlyArray<LoopLine>) => [
    label,
    fmt(of.length),
    ms(distribution(of.map((l) => l.p50)).p50),
    ms(distribution(of.map((l) => l.p99)).max),
    ms(distribution(of.map((l) => l.max)).max),
    fmt(100 * of.reduce((s, l) => s + l.busy, 0) / Math.max(1, of.length))
  ]
  const loops = table(["event loop", "seconds", "delay p50", "worst p99", "max", "busy %"], [
    loopRow("main thread (HTTP API, waits)", within.filter((l) => l.thread === undefined)),
    loopRow(`${IngestThread} (SMTP, accepts, claims, work, stores)`, within.filter((l) => l.thread === IngestThread))
  ])
  const batchRow = (label: string, phase: string) => {
    const sizes = new Map<number, number>()
    for (const id of ids) {
      const at = stamps.get(id)?.get(phase)
      if (at !== undefined) sizes.set(at, (sizes.get(at) ?? 0) + 1)
    }
    const d = distribution([...sizes.values()])
    return [label, fmt(d.count), fmt(d.p50, 1), fmt(d.p99, 1), fmt(d.max)]
  }
  const batches = table(["messages a batch", "batches", "p50", "p99", "max"], [
    batchRow("accept group commit", "accept.batch"),
    batchRow("claim", "claim.answered"),
    batchRow("store group commit", "store.sent")
  ])
  return `${loops}\n${batches}`
}

const cells = (values: ReadonlyArray<number>) => {
  const d = distribution(values)
  return [ms(d.p50), ms(d.p99), ms(d.max)]
}

const breakdown = (
  stamps: Map<number, Map<string, number>>,
  held: ReadonlyArray<{ id: number; repliedAt: number; answeredAt: number }>
): string => {
  const complete = held.flatMap((s) => {
    const of = new Map(stamps.get(s.id) ?? [])
    of.set("client.replied", s.repliedAt)
    of.set("client.answered", s.answeredAt)
    return steps.every(([phase]) => of.has(phase)) ? [of] : []
  })
  const rows = steps.slice(1).map(([phase, label], i) =>
    [label, ...cells(complete.map((of) => of.get(phase)! - Math.max(...steps.slice(0, i + 1).map(([before]) => of.get(before)!))))]
  )
  rows.push(
    ["250 at the client -> store committed (processed)", ...cells(complete.map((of) => of.get("store.committed")! - of.get("client.replied")!))],
    ["250 at the client -> the answer at the client", ...cells(complete.map((of) => of.get("client.answered")! - of.get("client.replied")!))],
    ["store committed -> the answer at the client", ...cells(complete.map((of) => of.get("client.answered")! - of.get("store.committed")!))]
  )
  return `${complete.length} of ${held.length} messages with every stamp\n` + table(["step", "p50", "p99", "max"], rows)
}

await session.run(10 * 60_000, main)
