/**
 * SMTP accept rate: 5 KB mails carrying a code, 50 concurrent connections, each message durable
 * before its 250, against burnbox and, in the same run, against maildev 2.2.1 and Postfix's
 * smtp-sink (a discard sink: the ceiling). Goals: >= 2,000 messages/s, >= 4x maildev and
 * >= 0.3x smtp-sink (design/benchmarks.md: measure side by side, quote ratios).
 *
 * Usage: pnpm bench:smtp
 *
 * What it does:
 * 1. finds smtp-source/smtp-sink (Postfix) and maildev; a missing tool is reported with how to
 *    install it and its rows are skipped (burnbox is measured anyway);
 * 2. starts `burnbox start` (API, SMTP ingest and pipeline worker in one process, embedded
 *    PostgreSQL) on a temp data dir; creates a pro account with raised limits and quota and a
 *    token, and claims an alias over the API (the recipient of the burnbox load); also
 *    BENCH_SPREAD_ACCOUNTS more accounts with one alias each, for a diagnostic row;
 * 3. starts smtp-sink, maildev and smtp-server alone (lib/bare-smtp-server.ts: the SMTP
 *    library burnbox is built on, with burnbox's options, storing nothing: the ceiling of that
 *    library here) on 127.0.0.1;
 * 4. table 1, the same generator for all four targets: this script's node:net SMTP client with
 *    50 persistent connections and PIPELINING (MAIL+RCPT+DATA in one write, then the body), each
 *    connection bound to its own loopback source address (127.0.0.2 ... 127.0.0.51: 50 sending
 *    hosts; burnbox allows 20 connections per client address), opened before the clock starts;
 *    a discarded warm-up, then a measured closed-loop run of BENCH_SECONDS. Each target is also
 *    run with Postfix smtp-source -d (persistent sessions, no pipelining): 50 sessions against
 *    smtp-sink and maildev as in benchmarks.md, 20 against burnbox (smtp-source has one source
 *    address), plus a probe showing what 50 sessions from one address get from burnbox. All of
 *    it BENCH_ROUNDS times with the targets' order alternating; the summary takes medians. The
 *    generator is checked against smtp-source on smtp-sink (is it the limit?);
 * 5. table 2: one new connection per message (smtp-source without -d);
 * 6. counts what burnbox stored (every 250's "stored as <id>" looked up in PostgreSQL) and how
 *    long the pipeline took to process the backlog;
 * 7. diagnosis (BENCH_DIAGNOSE=1): what PostgreSQL's backends waited for during the burnbox runs
 *    (pg_stat_activity samples), the same load spread over several accounts, the same load on
 *    `burnbox ingest` (no pipeline in the process), and raw PostgreSQL commit rates for 5 KB
 *    inserts: 50 clients on independent rows, 50 clients that all update one shared row in each
 *    transaction (as every accept updates its account's and alias's counters), one client;
 * 8. prints the tables, ratios, core count, load average and the goals; stops everything.
 *
 * Environment: BENCH_CONNECTIONS (50), BENCH_SECONDS (measured seconds per run, 10), BENCH_ROUNDS (2),
 * BENCH_DRAIN_SECONDS (60: how long to watch the pipeline's backlog after the load),
 * BENCH_WARMUP_SECONDS (2), BENCH_SIZE (bytes per message, 5150, about smtp-source -l 5000 with
 * its headers), BENCH_PER_CONNECTION_SECONDS (4; 0 skips table 2), BENCH_SPREAD_ACCOUNTS (10),
 * BENCH_DIAGNOSE (1; 0 skips step 7), BENCH_LOG_DIR.
 */
import { type ChildProcess } from "node:child_process"
import { availableParallelism, cpus } from "node:os"
import { listenerPorts } from "@burnbox/testkit"
import { Burnbox, type PgClient, sampleWaits, serviceSource, Session, waitsByStatementText, waitsText } from "./lib/burnbox.ts"
import { cpuShare, cpuSnapshot, type CpuShare, envInt, fmt, loadAverage, median, serverCpuCell, sleep, table } from "./lib/common.ts"
import { countsText, findTools, type LoadResult, messageFactory, runSmtpLoad, runSmtpSource, startBareSmtpServer, startMaildev, startSmtpSink } from "./lib/smtp.ts"

const connections = envInt("BENCH_CONNECTIONS", 50, 1)
const seconds = envInt("BENCH_SECONDS", 10, 1)
const warmupSeconds = envInt("BENCH_WARMUP_SECONDS", 2, 0)
const size = envInt("BENCH_SIZE", 5_150, 200)
const perConnectionSeconds = envInt("BENCH_PER_CONNECTION_SECONDS", 4, 0)
const rounds = envInt("BENCH_ROUNDS", 2, 1)
const drainSecondsMax = envInt("BENCH_DRAIN_SECONDS", 60, 0)
const spreadAccounts = envInt("BENCH_SPREAD_ACCOUNTS", 10, 0)
const diagnose = envInt("BENCH_DIAGNOSE", 1, 0) === 1
const burnboxPerAddress = 20 // packages/ingest MaxConnectionsPerAddress
const sourceAddresses = Math.min(connections, 250)

const goalRate = 2_000
const goalVsMaildev = 4
const goalVsSink = 0.3
const email = "bench-smtp@example.com"
const sender = "sender@bench.localhost"
const cores = availableParallelism()
const runTimeoutMs = (seconds + 60) * 1000
const overallTimeoutMs = 30 * 60_000

const session = new Session("bench:smtp")
const log = session.log

type TargetName = "burnbox" | "maildev" | "smtp-sink" | "smtp-server alone"

interface Target {
  readonly name: TargetName
  readonly port: number
  readonly pid: () => number | undefined
  /** the recipient of message `index` of run `run` */
  readonly to: (run: string) => string | ((index: number, connection: number) => string)
}

interface Row {
  readonly round?: number
  readonly target: string
  readonly generator: string
  readonly connections: number
  readonly messages: number
  readonly accepted: number
  readonly failures: string
  readonly seconds: number
  readonly rate: number
  readonly cpu: CpuShare | undefined
  readonly waits?: string
  readonly waitsByStatement?: string
}

const verdict = (ok: boolean | undefined) => ok === undefined ? "NOT MEASURED" : ok ? "MET" : "NOT MET"
const clamp = (n: number, lo: number, hi: number) => Math.max(lo, Math.min(hi, Math.round(Number.isFinite(n) ? n : lo)))
const slug = (text: string) => text.replace(/\W/g, "")

const main = async (): Promise<number> => {
  const tools = findTools()
  for (const hint of tools.missing) log(`NOTE ${hint}`)
  const out: Array<string> = []

  // ---- burnbox
  const burnbox = await Burnbox.create(session, { logName: "bench-smtp" })
  session.afterCleanup(() => burnbox.summarizeLog())
  await burnbox.start("start")
  const token = await burnbox.setupAccount(email)
  const alias = await burnbox.claimAlias(token)
  log(`claimed alias ${alias.address} (id ${alias.id})`)
  const spread = spreadAccounts > 0 ? await burnbox.createAccountsWithAliases("bench-smtp-spread", spreadAccounts) : []
  if (spread.length > 0) log(`${spread.length} more accounts with one alias each: ${spread[0]!.address} ...`)
  let db: PgClient = await burnbox.db()
  const durability = (await db.query<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'wal_sync_method', 'commit_delay') ORDER BY name`
  )).rows.map((r) => `${r.name}=${r.setting}`).join(" ")
  const [local, domain] = alias.address.split("@") as [string, string]
  /** A recipient per run (a subaddress of the alias), so each run's stored messages can be counted apart. */
  const recipient = (run: string) => `${local}+${run}@${domain}`
  /** Spread over the extra accounts by connection (a sending host): connection i always writes to account i mod n. */
  const spreadRecipient = (run: string) => (_index: number, connection: number) => {
    const [l, d] = spread[connection % spread.length]!.address.split("@") as [string, string]
    return `${l}+${run}@${d}`
  }

  // ---- references
  const [sinkPort, maildevPort, maildevWebPort, barePort] = (await listenerPorts(4)) as [number, number, number, number]
  let sink: ChildProcess | undefined
  let maildev: ChildProcess | undefined
  if (tools.smtpSink !== undefined) {
    sink = await startSmtpSink(session, tools.smtpSink, sinkPort)
    log(`smtp-sink (pid ${sink.pid}) on 127.0.0.1:${sinkPort}`)
  }
  if (tools.maildev !== undefined) {
    maildev = await startMaildev(session, tools.maildev, maildevPort, maildevWebPort, session.tempDir("bench-smtp-maildev-"))
    log(`maildev (pid ${maildev.pid}) on 127.0.0.1:${maildevPort}`)
  }
  // smtp-server with nothing behind it: what the SMTP library burnbox must use can do here at all.
  const bare = await startBareSmtpServer(session, barePort)
  log(`smtp-server alone (pid ${bare.pid}) on 127.0.0.1:${barePort}`)
  const targets: Array<Target> = [{ name: "smtp-server alone", port: barePort, pid: () => bare.pid, to: () => "x@y.test" }]
  if (sink !== undefined) targets.push({ name: "smtp-sink", port: sinkPort, pid: () => sink.pid, to: () => "x@y.test" })
  if (maildev !== undefined) targets.push({ name: "maildev", port: maildevPort, pid: () => maildev.pid, to: () => "x@y.test" })
  const burnboxTarget: Target = { name: "burnbox", port: burnbox.smtpPort, pid: () => burnbox.pid, to: recipient }
  targets.push(burnboxTarget)

  /** "stored as <id>" ids from burnbox's 250 replies, by run. */
  const storedIds = new Map<string, Array<number>>()

  /** A closed-loop run of the node generator for `secs` seconds. */
  const nodeRun = async (target: Target, run: string, secs: number, options: { connectionPerMessage?: boolean; to?: string | ((index: number, connection: number) => string); sample?: boolean } = {}) => {
    session.checkInterrupted()
    const factory = messageFactory({ from: sender, to: options.to ?? target.to(run), size, tag: run })
    const ids: Array<number> = []
    storedIds.set(run, ids)
    const sampler = options.sample === true ? sampleWaits(db) : undefined
    const before = cpuSnapshot(target.pid())
    const result = await runSmtpLoad({
      port: target.port,
      connections,
      sourceAddresses,
      make: factory.make,
      messages: Number.MAX_SAFE_INTEGER,
      durationSeconds: secs,
      timeoutMs: runTimeoutMs,
      ...(options.connectionPerMessage === true ? { connectionPerMessage: true } : {}),
      onDelivery: (d) => {
        const match = /stored as ([\d,]+)/.exec(d.reply.text)
        if (match !== null) for (const id of match[1]!.split(",")) ids.push(Number(id))
      }
    })
    const cpu = cpuShare(before, cpuSnapshot(target.pid()))
    burnbox.checkAlive()
    const sampled = sampler === undefined ? undefined : await sampler.stop()
    const waits = sampled === undefined ? undefined : { text: waitsText(sampled), byStatement: waitsByStatementText(sampled) }
    log(`${target.name} ${run}: ${fmt(result.accepted)} accepted in ${((result.endedAt - result.startedAt) / 1000).toFixed(2)} s = ${fmt(result.acceptedPerSecond)} msg/s; rejected ${countsText(result.rejected)}; errors ${countsText(result.errors)}${waits === undefined ? "" : `; pg: ${waits.text}`}`)
    return { result, cpu, waits }
  }

  const loadRow = (target: string, generator: string, result: LoadResult, cpu: CpuShare, waits?: { text: string; byStatement: string }): Row => ({
    target,
    generator,
    connections,
    messages: result.issued,
    accepted: result.accepted,
    failures: [
      ...(result.rejected.size > 0 ? [`rejected: ${countsText(result.rejected)}`] : []),
      ...(result.errors.size > 0 ? [`errors: ${countsText(result.errors)}`] : []),
      ...(result.inFlight.length > 0 ? [`no reply: ${result.inFlight.length}`] : [])
    ].join("; ") || "-",
    seconds: (result.endedAt - result.startedAt) / 1000,
    rate: result.acceptedPerSecond,
    cpu,
    ...(waits === undefined ? {} : { waits: waits.text, waitsByStatement: waits.byStatement })
  })

  const sourceRow = async (target: Target, sessions: number, count: number, reuse: boolean, run: string): Promise<Row | undefined> => {
    if (tools.smtpSource === undefined) return undefined
    session.checkInterrupted()
    const to = target.to(run)
    const args = [
      ...(reuse ? ["-d"] : []),
      "-s", String(sessions), "-m", String(count), "-l", "5000",
      "-f", sender, "-t", typeof to === "string" ? to : to(0, 0), "-S", `Your ${run} code is 482913`,
      `127.0.0.1:${target.port}`
    ]
    let sourcePid: number | undefined
    const before = cpuSnapshot(target.pid())
    const source = await runSmtpSource(session, tools.smtpSource, args, runTimeoutMs, (pid) => sourcePid = pid)
    const cpu = cpuShare(before, cpuSnapshot(target.pid(), sourcePid === undefined ? [] : [sourcePid]))
    burnbox.checkAlive()
    const ok = source.exitCode === 0
    log(`${target.name}: smtp-source ${args.join(" ")}: exit ${source.exitCode} in ${source.seconds.toFixed(2)} s${ok ? "" : `: ${source.output.split("\n").slice(0, 3).join(" | ")}`}`)
    return {
      target: target.name,
      generator: `smtp-source${reuse ? " -d" : ""}`,
      connections: sessions,
      messages: count,
      // smtp-source stops (fatal) at the first reply it does not expect: exit 0 means all were accepted.
      accepted: ok ? count : Number.NaN,
      failures: ok ? "-" : `exit ${source.exitCode}: ${source.output.split("\n")[0]?.slice(0, 100) ?? ""}`,
      seconds: source.seconds,
      rate: ok ? count / source.seconds : Number.NaN,
      cpu: { ...cpu, generator: cpu.external, external: 0 }
    }
  }

  // ---- table 1: persistent connections, in rounds (the order of the targets alternates)
  const loadBefore = loadAverage()
  const rows: Array<Row> = []
  const crossRows: Array<Row> = []
  for (let round = 1; round <= rounds; round++) {
    const order = round % 2 === 1 ? targets : targets.toReversed()
    for (const target of order) {
      if (round === 1 && warmupSeconds > 0) {
        log(`${target.name}: warm-up ${warmupSeconds} s (not counted)`)
        await nodeRun(target, `warmup-${slug(target.name)}`, warmupSeconds)
      }
      const { result, cpu, waits } = await nodeRun(target, `main-${slug(target.name)}-r${round}`, seconds, { sample: target.name === "burnbox" })
      rows.push({ ...loadRow(target.name, "node pipelined", result, cpu, waits), round })
      // smtp-source: about as many messages as the node generator managed, within benchmarks.md's counts.
      const count = clamp(result.acceptedPerSecond * seconds, 500, target.name === "maildev" ? 5_000 : 20_000)
      const row = target.name === "burnbox"
        ? await sourceRow(target, Math.min(connections, burnboxPerAddress), count, true, `source-burnbox-r${round}`)
        : await sourceRow(target, connections, count, true, `source-${slug(target.name)}-r${round}`)
      if (row !== undefined) crossRows.push({ ...row, round })
    }
  }
  /** The median over the rounds of a target's rate with a generator. */
  const rateOf = (list: ReadonlyArray<Row>, target: string, generator: string) => {
    const rates = list.filter((r) => r.target === target && r.generator === generator && Number.isFinite(r.rate)).map((r) => r.rate)
    return rates.length === 0 ? Number.NaN : median(rates)
  }
  let probe = ""
  if (tools.smtpSource !== undefined && connections > burnboxPerAddress) {
    const result = await runSmtpSource(session, tools.smtpSource, [
      "-d", "-s", String(connections), "-m", String(connections * 4), "-l", "5000", "-f", sender, "-t", recipient("probe"), `127.0.0.1:${burnbox.smtpPort}`
    ], 60_000)
    probe = `smtp-source -d -s ${connections} from one source address against burnbox: exit ${result.exitCode}${result.exitCode === 0 ? "" : `, "${result.output.split("\n")[0]?.slice(0, 140)}"`}`
    log(probe)
    await sleep(500)
  }
  const diagRows: Array<Row> = []
  if (spread.length > 0) {
    const { result, cpu, waits } = await nodeRun(burnboxTarget, "spread-start", seconds, { to: spreadRecipient("spread-start"), sample: true })
    diagRows.push(loadRow(`burnbox start, ${spread.length} accounts`, "node pipelined", result, cpu, waits))
  }

  // ---- table 2: a new connection for every message
  const perConnRows: Array<Row> = []
  if (perConnectionSeconds > 0) {
    for (const target of targets) {
      const run = `perconn-${slug(target.name)}`
      const { result, cpu } = await nodeRun(target, run, perConnectionSeconds, { connectionPerMessage: true })
      perConnRows.push(loadRow(target.name, "node, new conn/msg", result, cpu))
      if (target.name !== "burnbox") {
        const count = clamp(result.acceptedPerSecond * perConnectionSeconds, 200, 10_000)
        const row = await sourceRow(target, connections, count, false, `perconn-source-${slug(target.name)}`)
        if (row !== undefined) perConnRows.push(row)
      }
    }
  }
  const loadAfter = loadAverage()

  // ---- what burnbox stored, and the pipeline
  burnbox.checkAlive()
  const acknowledged = [...storedIds.values()].flat()
  const storedOfAcked = Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM messages WHERE id = ANY($1::bigint[])`, [acknowledged])).rows[0]!.n)
  const byRecipient = new Map((await db.query<{ recipient: string; n: string }>(
    `SELECT recipient, count(*) AS n FROM messages GROUP BY recipient`
  )).rows.map((r) => [r.recipient, Number(r.n)]))
  const storedTotal = [...byRecipient.values()].reduce((a, b) => a + b, 0)
  const mainAcked = rows.filter((r) => r.target === "burnbox").reduce((n, r) => n + r.accepted, 0)
  const mainStored = rows.filter((r) => r.target === "burnbox").reduce((n, r) => n + (byRecipient.get(recipient(`main-burnbox-r${r.round}`)) ?? 0), 0)
  const backlogAt = Date.now()
  const pending = async () => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM messages WHERE processing_status IN ('stub', 'processing')`)).rows[0]!.n)
  const backlog = await pending()
  let left = backlog
  const processedAtStart = storedTotal - backlog
  while (left > 0 && Date.now() - backlogAt < drainSecondsMax * 1000) {
    session.checkInterrupted()
    burnbox.checkAlive()
    await sleep(500)
    left = await pending()
  }
  const drainSeconds = (Date.now() - backlogAt) / 1000
  const drainRate = (storedTotal - left - processedAtStart) / Math.max(drainSeconds, 1e-3)
  const statuses = (await db.query<{ processing_status: string; n: string }>(
    `SELECT processing_status, count(*) AS n FROM messages GROUP BY processing_status ORDER BY 1`
  )).rows.map((r) => `${r.processing_status}: ${fmt(Number(r.n))}`).join(", ")
  const mainIds = storedIds.get("main-burnbox-r1") ?? []
  const sample = mainIds[Math.floor(mainIds.length / 2)]
  let sampleLine = ""
  if (sample !== undefined) {
    const detail = await burnbox.api("GET", `/api/v1/messages/${sample}`, token)
    const body = detail.body as { processingStatus?: string; otpCodes?: Array<string>; subject?: string } | undefined
    sampleLine = `GET /api/v1/messages/${sample}: ${detail.status}, processingStatus ${body?.processingStatus}, otpCodes ${JSON.stringify(body?.otpCodes)}, subject "${body?.subject}"`
  }

  // ---- diagnosis: the ingest role alone, and PostgreSQL's commit rates
  const commitRows: Array<Array<string>> = []
  if (diagnose) {
    await burnbox.closeDb(db)
    await burnbox.stop()
    await burnbox.start("ingest")
    db = await burnbox.db()
    const ingestTarget: Target = { ...burnboxTarget, pid: () => burnbox.pid }
    if (warmupSeconds > 0) await nodeRun(ingestTarget, "warmup-ingest", warmupSeconds)
    {
      const { result, cpu, waits } = await nodeRun(ingestTarget, "ingest-one", seconds, { sample: true })
      diagRows.push(loadRow("burnbox ingest, 1 account", "node pipelined", result, cpu, waits))
    }
    if (spread.length > 0) {
      const { result, cpu, waits } = await nodeRun(ingestTarget, "ingest-spread", seconds, { to: spreadRecipient("ingest-spread"), sample: true })
      diagRows.push(loadRow(`burnbox ingest, ${spread.length} accounts`, "node pipelined", result, cpu, waits))
    }
    const commitSeconds = 3
    const commitRate = async (label: string, clients: number, sharedRow: boolean) => {
      session.checkInterrupted()
      const pool: Array<PgClient> = []
      for (let i = 0; i < clients; i++) pool.push(await burnbox.db())
      const payload = Buffer.alloc(5_000, 0x61)
      let commits = 0
      const started = performance.now()
      const stopAt = started + commitSeconds * 1000
      await Promise.all(pool.map(async (client) => {
        while (performance.now() < stopAt) {
          if (sharedRow) {
            await client.query("BEGIN")
            await client.query("UPDATE bench_commit_counter SET n = n + 1 WHERE id = 1")
            await client.query("INSERT INTO bench_commit (b) VALUES ($1)", [payload])
            await client.query("COMMIT")
          } else {
            await client.query("INSERT INTO bench_commit (b) VALUES ($1)", [payload])
          }
          commits++
        }
      }))
      const rate = commits / ((performance.now() - started) / 1000)
      for (const client of pool) await burnbox.closeDb(client)
      commitRows.push([label, String(clients), fmt(rate), fmt(1000 / rate * (sharedRow ? 1 : clients), 2)])
      log(`PostgreSQL ${label}: ${fmt(rate)} commits/s`)
    }
    await db.query("CREATE TABLE bench_commit (id bigserial PRIMARY KEY, b bytea NOT NULL)")
    await db.query("CREATE TABLE bench_commit_counter (id int PRIMARY KEY, n bigint NOT NULL)")
    await db.query("INSERT INTO bench_commit_counter VALUES (1, 0)")
    try {
      await commitRate("5 KB insert, autocommit, independent rows", connections, false)
      await commitRate("5 KB insert + UPDATE of one shared row", connections, true)
      await commitRate("5 KB insert, autocommit, one client", 1, false)
    } finally {
      await db.query("DROP TABLE bench_commit, bench_commit_counter")
    }
  }

  // ---- report
  const header = ["target", "generator", "conns", "messages", "accepted", "seconds", "msg/s", "cpu % gen", "server", "other", "failures"]
  const cells = (r: Row) => [
    rounds > 1 && r.round !== undefined ? `${r.target} #${r.round}` : r.target, r.generator, String(r.connections), fmt(r.messages), fmt(r.accepted), r.seconds.toFixed(2), fmt(r.rate),
    r.cpu === undefined ? "-" : fmt(r.cpu.generator), r.cpu === undefined ? "-" : serverCpuCell(r.cpu), r.cpu === undefined ? "-" : fmt(r.cpu.other), r.failures
  ]
  const burnboxRate = rateOf(rows, "burnbox", "node pipelined")
  const maildevRate = rateOf(rows, "maildev", "node pipelined")
  const sinkRate = rateOf(rows, "smtp-sink", "node pipelined")
  const vsMaildev = burnboxRate / maildevRate
  const vsSink = burnboxRate / sinkRate
  /** The ceiling: the higher of the two generators' sink figures. */
  const sinkCeiling = Math.max(sinkRate, Number.isFinite(rateOf(crossRows, "smtp-sink", "smtp-source -d")) ? rateOf(crossRows, "smtp-sink", "smtp-source -d") : 0)
  const vsCeiling = burnboxRate / sinkCeiling

  out.push("")
  out.push(`SMTP accept rate, ${fmt(size)}-byte messages with a code; machine: ${cores} cores (${cpus()[0]?.model ?? "unknown CPU"}), Node ${process.version}`)
  out.push(`load average (1/5/15 min): before ${loadBefore}, after ${loadAfter} (other sessions may share this machine)`)
  out.push(`service code: ${serviceSource()}`)
  out.push(`burnbox: \`burnbox start\` (API + SMTP ingest + pipeline worker in one node process), embedded PostgreSQL with ${durability}`)
  if (cores <= 2) out.push(`note: ${cores} cores: the generator, the server under test (and burnbox's PostgreSQL and pipeline) share them.`)
  out.push("")
  out.push(`Table 1: ${connections} persistent connections (opened before the clock starts), closed loop, ${seconds} s measured after a ${warmupSeconds} s warm-up, ${rounds} round(s) in alternating order`)
  out.push("node pipelined = this script's generator, one loopback source address per connection; smtp-source -d = Postfix's, from 127.0.0.1")
  out.push(table(header, [...rows, ...crossRows].map(cells)))
  out.push("cpu % = share of one core during the run: gen = the load generator; server = the target process with its children")
  out.push("(burnbox: node + embedded PostgreSQL, shown as node+pg); other = the rest of the machine (other sessions included).")
  if (probe !== "") out.push(`probe: ${probe}`)
  if (perConnRows.length > 0) {
    out.push("")
    out.push(`Table 2: a new connection for every message (as smtp-source without -d), ${connections} at a time, ${perConnectionSeconds} s`)
    out.push(table(header, perConnRows.map(cells)))
    out.push("smtp-server (burnbox's and maildev's SMTP library) waits 100 ms after accepting a connection before it greets (to catch")
    out.push(`early talkers), so one message per connection caps a server at connections / 0.1 s = ${fmt(connections * 10)} msg/s whatever it does next.`)
    out.push("It also looks each client address up in DNS first (up to 1.5 s): the node generator's 127.0.0.x addresses go to this machine's")
    out.push("resolver, which drops some concurrent queries (see bench-pipeline's DNS probe), while smtp-source connects from 127.0.0.1.")
    out.push("maildev has both. burnbox and smtp-server alone do neither: burnbox patches the wait into an option and sets it to 0, and")
    out.push("turns the reverse lookup off (packages/ingest). smtp-source cannot load burnbox here: it connects from one address, and")
    out.push(`burnbox takes at most ${burnboxPerAddress} connections per client address.`)
  }
  out.push("")
  out.push(table(["burnbox storage check", "count"], [
    ["250 replies with \"stored as <id>\" (all node-generator runs)", fmt(acknowledged.length)],
    ["  of these ids found in messages", fmt(storedOfAcked)],
    ["messages stored in all (incl. smtp-source runs)", fmt(storedTotal)],
    ["main runs: 250s / stored for their recipients", `${fmt(mainAcked)} / ${fmt(mainStored)}`]
  ]))
  out.push(`pipeline: ${fmt(backlog)} messages not yet processed when the load ended; ${left === 0 ? `all processed ${drainSeconds.toFixed(1)} s later` : `${fmt(left)} still unprocessed after ${drainSeconds.toFixed(0)} s`}, ${fmt(drainRate, 1)} msg/s processed meanwhile (${statuses})`)
  if (sampleLine !== "") out.push(`sample: ${sampleLine}`)
  if (diagRows.length > 0 || commitRows.length > 0) {
    out.push("")
    out.push("Diagnosis: where the time goes")
    const waitRows = [...rows.filter((r) => r.waits !== undefined), ...diagRows]
    const label = (r: Row) => r.target === "burnbox" ? `burnbox start, 1 account (table 1${rounds > 1 ? ` #${r.round}` : ""})` : r.target
    const cpuPerMessage = (r: Row, part: "server" | "serverProcess") =>
      r.cpu === undefined || r.accepted === 0 ? "-" : fmt((r.cpu[part] / 100) * r.seconds * 1000 / r.accepted, 2)
    out.push(table(["burnbox run", "msg/s", "cpu % server (node+pg)", "cpu ms/msg node+pg", "of it node", "PostgreSQL backends with work: mean busy, what they wait for"], waitRows.map((r) => [
      label(r),
      fmt(r.rate),
      r.cpu === undefined ? "-" : serverCpuCell(r.cpu),
      cpuPerMessage(r, "server"),
      cpuPerMessage(r, "serverProcess"),
      r.waits ?? "-"
    ])))
    for (const r of waitRows) out.push(`  ${label(r)}, by statement: ${r.waitsByStatement ?? "-"}`)
    out.push("cpu ms/msg = CPU time of burnbox (node + its PostgreSQL) during the run / messages accepted: with `start` it includes the")
    out.push("pipeline work done meanwhile; with `ingest` only the accept path.")
    out.push("waits: pg_stat_activity every 50 ms, client backends active or idle in a transaction; CPU = running (no wait event);")
    out.push("Lock:transactionid/tuple = waiting for another transaction's row lock; IO:WalSync/LWLock:WALWrite = commit flush; Client:ClientRead = waiting for node.")
    if (commitRows.length > 0) {
      out.push("")
      out.push(table(["PostgreSQL alone (same cluster), 3 s each", "clients", "commits/s", "ms per commit per client"], commitRows))
      out.push("(reference, benchmarks.md: pgbench -c 50 durable 5 KB inserts ~10,300/s on this kind of machine)")
    }
  }
  out.push("")
  const sourceSink = rateOf(crossRows, "smtp-sink", "smtp-source -d")
  const sourceMaildev = rateOf(crossRows, "maildev", "smtp-source -d")
  const sourceBurnbox = rateOf(crossRows, "burnbox", "smtp-source -d")
  const bareRate = rateOf(rows, "smtp-server alone", "node pipelined")
  const sourceBare = rateOf(crossRows, "smtp-server alone", "smtp-source -d")
  // A reference tool that is not installed is unavailable (NOTE below says how to install it), not a failure.
  const unavailable = "unavailable"
  const withSource = (cell: string) => tools.smtpSource === undefined ? unavailable : cell
  out.push(table([`summary (median of ${rounds} round(s))`, "node pipelined, 50 conns", "smtp-source -d"], [
    ["burnbox", fmt(burnboxRate), withSource(`${fmt(sourceBurnbox)} (${Math.min(connections, burnboxPerAddress)} sessions)`)],
    ["maildev 2.2.1", tools.maildev === undefined ? unavailable : fmt(maildevRate), tools.maildev === undefined ? unavailable : withSource(fmt(sourceMaildev))],
    ["smtp-sink (discards)", tools.smtpSink === undefined ? unavailable : fmt(sinkRate), tools.smtpSink === undefined ? unavailable : withSource(fmt(sourceSink))],
    ["smtp-server alone (burnbox's library, discards)", fmt(bareRate), withSource(fmt(sourceBare))],
    ["ratio burnbox / maildev (same generator)", Number.isFinite(vsMaildev) ? `${vsMaildev.toFixed(2)}x` : "-", "-"],
    ["ratio burnbox / smtp-sink (same generator)", Number.isFinite(vsSink) ? `${vsSink.toFixed(3)}x` : "-", "-"]
  ]))
  if (Number.isFinite(sourceSink) && Number.isFinite(sinkRate)) {
    out.push(sinkRate >= 0.9 * sourceSink
      ? `generator check: on smtp-sink the node generator did ${fmt(sinkRate)} msg/s, smtp-source -d ${fmt(sourceSink)} msg/s: at least as fast, so it is not the limit`
      : `generator check: on smtp-sink the node generator did ${fmt(sinkRate)} msg/s, smtp-source -d ${fmt(sourceSink)} msg/s: the sink's ceiling is partly generator-bound, ` +
        `so the sink goal below is judged against the higher figure; burnbox (${fmt(burnboxRate)}) and maildev (${fmt(maildevRate)}) are far below what the generator can send`)
  }
  if (Number.isFinite(bareRate)) {
    out.push(`the library's ceiling: smtp-server storing nothing did ${fmt(bareRate)} msg/s (node pipelined) = ${(bareRate / maildevRate).toFixed(2)}x maildev, ` +
      `${(bareRate / sinkCeiling).toFixed(3)}x smtp-sink; with smtp-source -d ${fmt(sourceBare)} = ${(sourceBare / sourceSink).toFixed(3)}x smtp-sink. ` +
      `${goalVsMaildev}x maildev is ${fmt(goalVsMaildev * maildevRate)} msg/s, ${goalVsSink}x smtp-sink ${fmt(goalVsSink * sinkCeiling)} msg/s.`)
  }
  out.push(`goal >= ${fmt(goalRate)} msg/s:   ${verdict(Number.isFinite(burnboxRate) ? burnboxRate >= goalRate : undefined)} (${fmt(burnboxRate)})`)
  out.push(`goal >= ${goalVsMaildev}x maildev:      ${verdict(Number.isFinite(vsMaildev) ? vsMaildev >= goalVsMaildev : undefined)} (${Number.isFinite(vsMaildev) ? vsMaildev.toFixed(2) + "x" : "maildev not measured"})`)
  out.push(`goal >= ${goalVsSink}x smtp-sink:  ${verdict(Number.isFinite(vsCeiling) && sinkCeiling > 0 ? vsCeiling >= goalVsSink : undefined)} (${Number.isFinite(vsCeiling) && sinkCeiling > 0 ? `${vsCeiling.toFixed(3)}x of ${fmt(sinkCeiling)} msg/s` : "smtp-sink not measured"})`)
  out.push(`every 250 stored:      ${storedOfAcked === acknowledged.length && mainStored === mainAcked ? "yes" : "NO"}`)
  out.push(`load average during the run (1/5/15 min): before ${loadBefore}, after ${loadAfter}`)
  for (const hint of tools.missing) out.push(`NOTE ${hint}`)
  await burnbox.closeDb(db)
  process.stdout.write(out.join("\n") + "\n")
  return 0
}

await session.run(overallTimeoutMs, main)
