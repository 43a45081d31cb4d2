/**
 * SMTP accept rate side by side (issue #36's benchmark): 5 KB messages over 16 persistent
 * sessions, with Postfix's `smtp-source -d -s 16` and with this script's own generator, to one
 * alias and to 100 aliases of 10 accounts, against:
 * - Postfix `smtp-sink` (discards: the ceiling) and smtp-server alone (the SMTP library burnbox is
 *   built on, storing nothing: lib/bare-smtp-server.ts);
 * - Haraka 3.3.4, the production Node.js MTA, in one process (lib/haraka.ts): discarding, writing
 *   each message to its own file, and writing it with fsync before the 250 (what burnbox promises);
 * - maildev 2.2.1 (in memory);
 * - `burnbox ingest` (the SMTP role alone: each message durable before its 250, no pipeline) and
 *   `burnbox start` (API, ingest and pipeline in one process), each on its own embedded
 *   PostgreSQL; during every `burnbox start` case a reader GETs /api/v1/messages and another
 *   /api/v1/me, 10 a second each, with the receiving account's token (p50/p99);
 * then the disk per stored message: a load of SMTP_DISK_MESSAGES messages of words (compressing
 * about as text does) over the 100 aliases to `burnbox start`, processed, with the data dir's size
 * (burnbox's data dir and its PostgreSQL cluster, with and without pg_wal) before and after, after
 * a CHECKPOINT, over the raw bytes sent.
 *
 * Goals (#36, printed beside the figures): burnbox start >= 1.0x Haraka to disk while durable, on
 * both loads; disk <= 1.0x the raw bytes; GET /messages p99 <= 50 ms, GET /me p99 <= 20 ms.
 *
 * Usage: pnpm bench:smtp   (a 100,000-message disk load: SMTP_DISK_MESSAGES=100000 pnpm bench:smtp)
 *
 * How the loads are sent:
 * - the node generator: SMTP_SESSIONS persistent connections from 127.0.0.1 with PIPELINING,
 *   closed loop for SMTP_SECONDS; to 100 aliases, message i goes to alias i mod 100 (the aliases
 *   interleaved over the accounts);
 * - smtp-source sends to one recipient (-t) a run, so to one alias it is one `smtp-source -d -s
 *   16`, and to 100 aliases 100 runs of `smtp-source -d -s 1`, one per alias with a hundredth of
 *   the messages each, 16 running at a time (16 sessions at any moment; each run opens its own);
 *   it sends about as many messages as the node generator accepted in SMTP_SECONDS.
 * Each case runs after a warm-up of the target (SMTP_WARMUP_SECONDS with the node generator, in the
 * first round); the targets' order alternates between rounds; after each `burnbox start` case the
 * pipeline's backlog is awaited (SMTP_DRAIN_SECONDS at most), so the next case starts from none.
 *
 * A reference that cannot be found or installed shows as unavailable (exit 0): Postfix with
 * `apt-get install postfix`; Haraka and maildev are looked for (HARAKA_BIN, /tmp/haraka; MAILDEV_BIN,
 * /tmp/maildev) and otherwise installed with npm into a temporary folder (SMTP_INSTALL=0: never).
 *
 * Environment: SMTP_SESSIONS (16), SMTP_SECONDS (5), SMTP_WARMUP_SECONDS (1), SMTP_ROUNDS (1),
 * SMTP_SIZE (bytes per message, 5150: smtp-source -l 5000 with its headers), SMTP_ACCOUNTS (10),
 * SMTP_ALIASES (100), SMTP_READ_RATE (10 a second each), SMTP_DISK_MESSAGES (5000; 0 skips),
 * SMTP_DRAIN_SECONDS (120), SMTP_GENERATORS ("smtp-source,node"), SMTP_TARGETS (all: "sink,bare,
 * haraka-discard,haraka-file,haraka-fsync,maildev,ingest,start"), SMTP_INSTALL (1), SMTP_HARAKA_NODELAY
 * (1: TCP_NODELAY on Haraka's sockets, see lib/haraka.ts), BENCH_LOG_DIR.
 */
import type { ChildProcess } from "node:child_process"
import { availableParallelism, cpus } from "node:os"
import { join } from "node:path"
import { zstdCompressSync } from "node:zlib"
import { clusterLocation } from "@burnbox/store"
import { listenerPorts } from "@burnbox/testkit"
import { Burnbox, type PgClient, relationSizes, serviceSource, Session } from "./lib/burnbox.ts"
import { cpuShare, cpuSnapshot, type CpuShare, diskUsage, envInt, fmt, loadAverage, median, mib, serverCpuCell, sleep, table } from "./lib/common.ts"
import { type HarakaMode, harakaBin, harakaHint, harakaNoDelay, startHaraka } from "./lib/haraka.ts"
import { type ReadResult, startReader } from "./lib/reader.ts"
import { countsText, findTools, maildevBin, maildevHint, messageFactory, postfixHint, runSmtpLoad, runSmtpSource, startBareSmtpServer, startMaildev, startSmtpSink } from "./lib/smtp.ts"

const sessions = envInt("SMTP_SESSIONS", 16, 1)
const seconds = envInt("SMTP_SECONDS", 5, 1)
const warmupSeconds = envInt("SMTP_WARMUP_SECONDS", 1, 0)
const rounds = envInt("SMTP_ROUNDS", 1, 1)
const size = envInt("SMTP_SIZE", 5_150, 400)
const accountCount = envInt("SMTP_ACCOUNTS", 10, 1)
const aliasCount = Math.max(accountCount, envInt("SMTP_ALIASES", 100, 1))
const readRate = envInt("SMTP_READ_RATE", 10, 0)
const diskMessages = envInt("SMTP_DISK_MESSAGES", 5_000, 0)
const drainSecondsMax = envInt("SMTP_DRAIN_SECONDS", 120, 0)
const install = envInt("SMTP_INSTALL", 1, 0) === 1
const generatorsWanted = (process.env["SMTP_GENERATORS"] ?? "smtp-source,node").split(",").map((g) => g.trim())
const allTargets = ["sink", "bare", "haraka-discard", "haraka-file", "haraka-fsync", "maildev", "ingest", "start"] as const
type TargetKey = typeof allTargets[number]
const targetsWanted = new Set((process.env["SMTP_TARGETS"] ?? allTargets.join(",")).split(",").map((t) => t.trim()))
for (const t of targetsWanted) if (!(allTargets as ReadonlyArray<string>).includes(t)) throw new Error(`SMTP_TARGETS: unknown target "${t}" (known: ${allTargets.join(", ")})`)

/** smtp-source -l: the body's length, so its messages (with its few headers) are about `size` bytes. */
const sourceLength = Math.max(100, size - 150)
const aliasesPerAccount = Math.ceil(aliasCount / accountCount)
const sender = "sender@bench.localhost"
const cores = availableParallelism()
const overallTimeoutMs = 60 * 60_000
const goals = { vsHaraka: 1.0, diskVsRaw: 1.0, messagesP99: 50, meP99: 20 }

const session = new Session("bench:smtp")
const log = session.log

type LoadName = "one alias" | `${number} aliases`
type Generator = "smtp-source -d" | "node pipelined"

interface Target {
  readonly key: TargetKey
  readonly name: string
  readonly port: number
  readonly pid: () => number | undefined
  /** the burnbox instance, for the storage check and the readers */
  readonly burnbox?: Instance
}

interface Instance {
  readonly burnbox: Burnbox
  readonly command: "start" | "ingest"
  /** the first account's token (it owns the one-alias load's alias) */
  readonly readerToken: string
  readonly one: string
  readonly spread: ReadonlyArray<string>
  accepted: number
}

interface Row {
  readonly round: number
  readonly load: LoadName
  readonly target: Target
  readonly generator: Generator
  readonly messages: number
  readonly accepted: number
  readonly seconds: number
  readonly rate: number
  readonly cpu: CpuShare
  readonly failures: string
  readonly load1: string
  readonly reads?: ReadonlyArray<ReadResult>
  readonly drain?: string
}

const verdict = (ok: boolean | undefined) => ok === undefined ? "NOT MEASURED" : ok ? "MET" : "NOT MET"
const clamp = (n: number, lo: number, hi: number) => Math.max(lo, Math.min(hi, Math.round(Number.isFinite(n) ? n : lo)))
const oneMinuteLoad = () => loadAverage().split(" ")[0]!

/**
 * Accounts (plan pro, limits and quota raised) with aliases: the first account's first alias takes
 * the one-alias load; the spread load goes to `aliasCount` aliases interleaved over the accounts.
 */
const setUpAccounts = async (burnbox: Burnbox, prefix: string) => {
  const accounts: Array<{ token: string; aliases: Array<string> }> = []
  for (let start = 0; start < accountCount; start += 2) {
    accounts.push(...await Promise.all(Array.from({ length: Math.min(2, accountCount - start) }, async (_, i) => {
      const email = `${prefix}-${start + i}@example.com`
      const token = await burnbox.setupAccount(email, "read,manage-aliases")
      const aliases = await burnbox.claimAliases(email, token, aliasesPerAccount)
      return { token, aliases: aliases.map((a) => a.address) }
    })))
  }
  const spread: Array<string> = []
  for (let k = 0; k < aliasCount; k++) spread.push(accounts[k % accountCount]!.aliases[Math.floor(k / accountCount)]!)
  return { readerToken: accounts[0]!.token, one: accounts[0]!.aliases[0]!, spread }
}

const pendingOf = async (db: PgClient) =>
  Number((await db.query<{ n: string }>("SELECT count(*)::text AS n FROM messages WHERE processing_status NOT IN ('processed', 'failed')")).rows[0]!.n)

/** Waits (at most `maxSeconds`) until the pipeline has processed every stored message; answers what it saw. */
const drainBacklog = async (db: PgClient, maxSeconds: number): Promise<{ backlog: number; left: number; seconds: number }> => {
  const started = performance.now()
  const backlog = await pendingOf(db)
  let left = backlog
  while (left > 0 && performance.now() - started < maxSeconds * 1000) {
    session.checkInterrupted()
    await sleep(250)
    left = await pendingOf(db)
  }
  return { backlog, left, seconds: (performance.now() - started) / 1000 }
}

const main = async (): Promise<number> => {
  const tools = findTools()
  const notes: Array<string> = []
  if (tools.smtpSource === undefined || tools.smtpSink === undefined) notes.push(postfixHint)
  // The node generator first: smtp-source then sends about as many messages as it accepted in SMTP_SECONDS.
  const generators: ReadonlyArray<Generator> = (["node pipelined", "smtp-source -d"] as const).filter((g) =>
    generatorsWanted.includes(g === "node pipelined" ? "node" : "smtp-source") && (g === "node pipelined" || tools.smtpSource !== undefined))
  const unavailable = new Map<string, string>()
  const out: Array<string> = []

  // ---- burnbox: `start`, and `ingest` on a data dir of its own
  const instances: Array<Instance> = []
  for (const command of ["start", "ingest"] as const) {
    if (!targetsWanted.has(command)) continue
    const burnbox = await Burnbox.create(session, { logName: `bench-smtp-${command}` })
    session.afterCleanup(() => burnbox.summarizeLog())
    await burnbox.start("start")
    const setup = await setUpAccounts(burnbox, `bench-smtp-${command}`)
    if (command === "ingest") {
      await burnbox.stop()
      await burnbox.start("ingest")
    }
    log(`burnbox ${command} (pid ${burnbox.pid}): ${accountCount} accounts, ${aliasCount} aliases; one-alias load to ${setup.one}`)
    instances.push({ burnbox, command, ...setup, accepted: 0 })
  }
  const startInstance = instances.find((i) => i.command === "start")
  const recipients = startInstance ?? instances[0]
  const oneAlias = recipients?.one ?? "x@bench.test"
  const spreadAliases = recipients?.spread ?? Array.from({ length: aliasCount }, (_, k) => `x${k}@bench.test`)

  // ---- the references
  const ports = await listenerPorts(8)
  let nextPort = 0
  const port = () => ports[nextPort++]!
  const targets: Array<Target> = []
  if (targetsWanted.has("sink")) {
    if (tools.smtpSink === undefined) unavailable.set("smtp-sink", "Postfix is not installed")
    else {
      const p = port()
      const sink: ChildProcess = await startSmtpSink(session, tools.smtpSink, p)
      targets.push({ key: "sink", name: "Postfix smtp-sink (discards)", port: p, pid: () => sink.pid })
    }
  }
  if (targetsWanted.has("bare")) {
    const p = port()
    const bare = await startBareSmtpServer(session, p)
    targets.push({ key: "bare", name: "smtp-server alone (discards)", port: p, pid: () => bare.pid })
  }
  const harakaModes: ReadonlyArray<readonly [TargetKey, HarakaMode, string]> = [
    ["haraka-discard", "discard", "Haraka 3.3.4, discard"],
    ["haraka-file", "file", "Haraka 3.3.4, to file"],
    ["haraka-fsync", "file-fsync", "Haraka 3.3.4, to file + fsync"]
  ]
  if (harakaModes.some(([key]) => targetsWanted.has(key))) {
    const bin = await harakaBin(session, install)
    if (bin === undefined) notes.push(harakaHint)
    for (const [key, mode, name] of harakaModes) {
      if (!targetsWanted.has(key)) continue
      if (bin === undefined) {
        unavailable.set(name, "not installed")
        continue
      }
      const p = port()
      try {
        const haraka = await startHaraka(session, bin, p, mode)
        targets.push({ key, name, port: p, pid: () => haraka.child.pid })
        log(`${name} (pid ${haraka.child.pid}) on 127.0.0.1:${p}`)
      } catch (error) {
        unavailable.set(name, error instanceof Error ? error.message.slice(0, 200) : String(error))
        log(`${name}: ${error instanceof Error ? error.message : String(error)}`)
      }
    }
  }
  if (targetsWanted.has("maildev")) {
    const bin = await maildevBin(session, install)
    if (bin === undefined) {
      notes.push(maildevHint)
      unavailable.set("maildev 2.2.1", "not installed")
    } else {
      const p = port()
      const maildev = await startMaildev(session, bin, p, port(), session.tempDir("bench-smtp-maildev-"))
      targets.push({ key: "maildev", name: "maildev 2.2.1 (in memory)", port: p, pid: () => maildev.pid })
    }
  }
  for (const instance of instances) {
    targets.push({
      key: instance.command,
      name: instance.command === "start" ? "burnbox start (durable)" : "burnbox ingest (durable)",
      port: instance.burnbox.smtpPort,
      pid: () => instance.burnbox.pid,
      burnbox: instance
    })
  }
  const recipientsOf = (target: Target, load: LoadName): string | ReadonlyArray<string> =>
    load === "one alias" ? target.burnbox?.one ?? oneAlias : target.burnbox?.spread ?? spreadAliases

  // ---- one case
  const nodeRun = async (target: Target, load: LoadName, secs: number) => {
    const to = recipientsOf(target, load)
    const factory = messageFactory({ from: sender, to: typeof to === "string" ? to : (index) => to[index % to.length]!, size, tag: "bench" })
    const before = cpuSnapshot(target.pid())
    const result = await runSmtpLoad({
      port: target.port,
      connections: sessions,
      sourceAddresses: 0,
      make: factory.make,
      messages: Number.MAX_SAFE_INTEGER,
      durationSeconds: secs,
      timeoutMs: (secs + 120) * 1000
    })
    const cpu = cpuShare(before, cpuSnapshot(target.pid()))
    const failures = [
      ...(result.rejected.size > 0 ? [`rejected: ${countsText(result.rejected)}`] : []),
      ...(result.errors.size > 0 ? [`errors: ${countsText(result.errors)}`] : []),
      ...(result.inFlight.length > 0 ? [`no reply: ${result.inFlight.length}`] : [])
    ].join("; ") || "-"
    return { messages: result.issued, accepted: result.accepted, seconds: (result.endedAt - result.startedAt) / 1000, cpu, failures }
  }

  const sourceRun = async (target: Target, load: LoadName, count: number) => {
    const to = recipientsOf(target, load)
    const args = (recipient: string, sess: number, messages: number) =>
      ["-d", "-s", String(sess), "-m", String(messages), "-l", String(sourceLength), "-f", sender, "-t", recipient, `127.0.0.1:${target.port}`]
    const before = cpuSnapshot(target.pid())
    const started = performance.now()
    const failed: Array<string> = []
    let sent = 0
    if (typeof to === "string") {
      const run = await runSmtpSource(session, tools.smtpSource!, args(to, sessions, count), 600_000)
      if (run.exitCode !== 0) failed.push(`exit ${run.exitCode}: ${run.output.split("\n")[0]?.slice(0, 100) ?? ""}`)
      sent = count
    } else {
      // one run per alias, `sessions` at a time
      const each = Math.max(1, Math.ceil(count / to.length))
      let next = 0
      await Promise.all(Array.from({ length: Math.min(sessions, to.length) }, async () => {
        while (next < to.length && failed.length === 0) {
          const recipient = to[next++]!
          const run = await runSmtpSource(session, tools.smtpSource!, args(recipient, 1, each), 600_000)
          if (run.exitCode !== 0) failed.push(`exit ${run.exitCode}: ${run.output.split("\n")[0]?.slice(0, 100) ?? ""}`)
          sent += each
        }
      }))
    }
    const wall = (performance.now() - started) / 1000
    const cpu = cpuShare(before, cpuSnapshot(target.pid()))
    const ok = failed.length === 0
    // smtp-source stops at the first reply it does not expect: exit 0 means every message was accepted.
    return { messages: sent, accepted: ok ? sent : Number.NaN, seconds: wall, cpu: { ...cpu, generator: cpu.external, external: 0 }, failures: ok ? "-" : failed[0]! }
  }

  const rows: Array<Row> = []
  const loads: ReadonlyArray<LoadName> = ["one alias", `${aliasCount} aliases`]
  const loadBefore = loadAverage()
  const warmed = new Set<TargetKey>()
  for (let round = 1; round <= rounds; round++) {
    const order = round % 2 === 1 ? targets : targets.toReversed()
    for (const load of loads) {
      for (const target of order) {
        session.checkInterrupted()
        if (!warmed.has(target.key) && warmupSeconds > 0) {
          warmed.add(target.key)
          log(`${target.name}: warm-up ${warmupSeconds} s (not counted)`)
          const warmup = await nodeRun(target, load, warmupSeconds)
          if (target.burnbox !== undefined) target.burnbox.accepted += warmup.accepted
          if (target.burnbox?.command === "start") {
            const db = await target.burnbox.burnbox.db()
            await drainBacklog(db, drainSecondsMax)
            await target.burnbox.burnbox.closeDb(db)
          }
        }
        let nodeRate = Number.NaN
        for (const generator of generators) {
          const instance = target.burnbox
          const readers = instance?.command === "start" && readRate > 0
            ? [startReader({
              targets: [["GET /messages", "/api/v1/messages"], ["GET /me", "/api/v1/me"]].map(([name, path]) => ({
                name: name!,
                url: `${instance.burnbox.baseUrl}${path!}`,
                headers: { authorization: `Bearer ${instance.readerToken}` }
              })),
              perSecond: readRate
            })]
            : []
          const count = Number.isFinite(nodeRate) ? clamp(nodeRate * seconds, 100, 500_000) : clamp((target.key === "sink" ? 10_000 : 1_000) * seconds, 100, 500_000)
          const run = generator === "node pipelined" ? await nodeRun(target, load, seconds) : await sourceRun(target, load, count)
          const reads = (await Promise.all(readers.map((r) => r.stop()))).flat()
          const rate = run.accepted / run.seconds
          if (generator === "node pipelined") nodeRate = rate
          if (instance !== undefined) {
            instance.burnbox.checkAlive()
            instance.accepted += Number.isFinite(run.accepted) ? run.accepted : 0
          }
          let drain: string | undefined
          if (instance?.command === "start") {
            const db = await instance.burnbox.db()
            const d = await drainBacklog(db, drainSecondsMax)
            await instance.burnbox.closeDb(db)
            drain = d.left === 0 ? `${fmt(d.backlog)} unprocessed at the end, done ${d.seconds.toFixed(1)} s later` : `${fmt(d.left)} of ${fmt(d.backlog)} still unprocessed after ${d.seconds.toFixed(0)} s`
          }
          const row: Row = { round, load, target, generator, ...run, rate, load1: oneMinuteLoad(), ...(reads.length > 0 ? { reads } : {}), ...(drain === undefined ? {} : { drain }) }
          rows.push(row)
          log(`${target.name}, ${load}, ${generator}: ${fmt(run.accepted)} accepted in ${run.seconds.toFixed(2)} s = ${fmt(rate)} msg/s (load ${row.load1})` +
            `${run.failures === "-" ? "" : `; ${run.failures}`}${reads.map((r) => `; ${r.name} p50 ${fmt(r.latency.p50, 1)} p99 ${fmt(r.latency.p99, 1)} ms`).join("")}${drain === undefined ? "" : `; pipeline: ${drain}`}`)
        }
      }
    }
  }
  const loadAfter = loadAverage()

  // ---- what burnbox stored
  const stored: Array<Array<string>> = []
  for (const instance of instances) {
    const db = await instance.burnbox.db()
    const n = Number((await db.query<{ n: string }>("SELECT count(*)::text AS n FROM messages")).rows[0]!.n)
    await instance.burnbox.closeDb(db)
    stored.push([`burnbox ${instance.command}`, fmt(instance.accepted), fmt(n), n === instance.accepted ? "yes" : "NO"])
  }

  // ---- disk per stored message
  let disk: { lines: Array<string>; ratio: number } | undefined
  if (diskMessages > 0 && startInstance !== undefined) disk = await diskLoad(startInstance)

  // ---- report
  const rateOf = (key: TargetKey, load: LoadName, generator: Generator) => {
    const rates = rows.filter((r) => r.target.key === key && r.load === load && r.generator === generator && Number.isFinite(r.rate)).map((r) => r.rate)
    return rates.length === 0 ? Number.NaN : median(rates)
  }
  const names = new Map<string, string>(targets.map((t) => [t.key, t.name]))
  out.push("")
  out.push(`bench:smtp: ${fmt(size)}-byte messages, ${sessions} sessions; ${cores} cores (${cpus()[0]?.model ?? "unknown CPU"}), Node ${process.version}`)
  out.push(`load average (1/5/15 min): before ${loadBefore}, after ${loadAfter} (other sessions may share this machine)`)
  out.push(`service code: ${serviceSource()}`)
  out.push(`loads: "one alias" = every message to one alias of one account; "${aliasCount} aliases" = ${aliasCount} aliases of ${accountCount} accounts, interleaved`)
  out.push(`generators: smtp-source -d = Postfix's, ${sessions} sessions from 127.0.0.1 (${aliasCount} aliases: ${aliasCount} runs of -s 1, one per alias, ${sessions} at a time);`)
  out.push(`node pipelined = this script's, ${sessions} persistent connections from 127.0.0.1, PIPELINING, closed loop for ${seconds} s`)
  out.push("")
  const header = ["load", "target", "generator", "messages", "msg/s", "cpu % gen", "server", "other", "load 1m", "failures"]
  out.push(table(header, rows.map((r) => [
    `${r.load}${rounds > 1 ? ` #${r.round}` : ""}`, r.target.name, r.generator, fmt(r.messages), fmt(r.rate), fmt(r.cpu.generator), serverCpuCell(r.cpu), fmt(r.cpu.other), r.load1, r.failures
  ])))
  out.push("cpu % = share of one core during the case: gen = the generator(s); server = the target with its children (burnbox: node+PostgreSQL); other = the rest of the machine.")

  const readRows = rows.filter((r) => r.reads !== undefined)
  if (readRows.length > 0) {
    out.push("")
    out.push(`Reads during the load (burnbox start): GET /api/v1/messages and GET /api/v1/me, ${readRate} a second each (open loop, from a worker thread: lib/reader.ts), the receiving account's token; ms from each request's due time to its body's end`)
    out.push(table(["load", "generator", "msg/s", "GET /messages p50", "p99", "max", "n", "GET /me p50", "p99", "max", "n", "failures", "pipeline after the load"], readRows.map((r) => {
      const [messages, me] = r.reads! as [ReadResult, ReadResult]
      const failures = [...messages.failures, ...me.failures]
      return [`${r.load}${rounds > 1 ? ` #${r.round}` : ""}`, r.generator, fmt(r.rate), fmt(messages.latency.p50, 1), fmt(messages.latency.p99, 1), fmt(messages.latency.max, 1), fmt(messages.latency.count),
        fmt(me.latency.p50, 1), fmt(me.latency.p99, 1), fmt(me.latency.max, 1), fmt(me.latency.count), failures.length === 0 ? "-" : failures.map(([k, n]) => `${n} x ${k}`).join("; "), r.drain ?? "-"]
    })))
  }

  out.push("")
  const cell = (key: TargetKey, load: LoadName, generator: Generator) => {
    if (!generators.includes(generator)) return "unavailable"
    return fmt(rateOf(key, load, generator))
  }
  const summaryHeader = [`summary, msg/s${rounds > 1 ? ` (median of ${rounds} rounds)` : ""}`, ...loads.flatMap((l) => (["smtp-source -d", "node pipelined"] as const).map((g) => `${l}: ${g}`))]
  const summaryRows: Array<Array<string>> = []
  for (const key of allTargets) {
    const name = names.get(key)
    if (name !== undefined) summaryRows.push([name, ...loads.flatMap((l) => (["smtp-source -d", "node pipelined"] as const).map((g) => cell(key, l, g)))])
  }
  for (const [name] of unavailable) summaryRows.push([name, ...loads.flatMap(() => ["unavailable", "unavailable"])])
  const ratio = (a: TargetKey, b: TargetKey, load: LoadName, generator: Generator) => {
    const r = rateOf(a, load, generator) / rateOf(b, load, generator)
    return Number.isFinite(r) ? `${r.toFixed(2)}x` : "-"
  }
  for (const [a, b, label] of [
    ["start", "haraka-file", "ratio burnbox start / Haraka to file"],
    ["start", "haraka-fsync", "ratio burnbox start / Haraka to file + fsync"],
    ["ingest", "haraka-fsync", "ratio burnbox ingest / Haraka to file + fsync"],
    ["start", "maildev", "ratio burnbox start / maildev"]
  ] as const) {
    if (names.has(a)) summaryRows.push([label, ...loads.flatMap((l) => (["smtp-source -d", "node pipelined"] as const).map((g) => ratio(a, b, l, g)))])
  }
  out.push(table(summaryHeader, summaryRows))
  out.push(`Haraka: one process (smtp.ini nodes unset), log level warn, no reverse DNS, every recipient accepted, TCP_NODELAY ${harakaNoDelay ? "on (without it a pipelining client waits ~40 ms a message on Nagle's algorithm: SMTP_HARAKA_NODELAY=0)" : "off (SMTP_HARAKA_NODELAY=0)"} (lib/haraka.ts); to file = a queue plugin`)
  out.push("streaming each message to its own file, 250 when it is closed (page cache, not durable); + fsync = fsync of the file before the 250")
  out.push("(its directory is not fsynced). burnbox: each message committed to PostgreSQL (synchronous_commit on, fsync on) before its 250.")
  out.push("")
  out.push(table(["burnbox storage check", "250s (smtp-source exit 0 = all)", "messages stored", "equal"], stored))
  if (disk !== undefined) {
    out.push("")
    out.push(...disk.lines)
  }

  // ---- goals
  out.push("")
  const judged: Generator = generators.includes("smtp-source -d") ? "smtp-source -d" : "node pipelined"
  for (const load of loads) {
    for (const [b, label] of [["haraka-file", "Haraka to file"], ["haraka-fsync", "Haraka to file + fsync"]] as const) {
      const r = rateOf("start", load, judged) / rateOf(b, load, judged)
      out.push(`goal burnbox start >= ${goals.vsHaraka.toFixed(1)}x ${label}, ${load} (${judged}): ${verdict(Number.isFinite(r) ? r >= goals.vsHaraka : undefined)}` +
        `${Number.isFinite(r) ? ` (${r.toFixed(2)}x: ${fmt(rateOf("start", load, judged))} vs ${fmt(rateOf(b, load, judged))} msg/s)` : ""}`)
    }
  }
  out.push(`goal disk <= ${goals.diskVsRaw.toFixed(1)}x the raw bytes (without pg_wal, after a CHECKPOINT): ${verdict(disk === undefined ? undefined : disk.ratio <= goals.diskVsRaw)}${disk === undefined ? "" : ` (${disk.ratio.toFixed(2)}x)`}`)
  const worst = (i: 0 | 1) => {
    const p99s = readRows.map((r) => r.reads![i]!.latency.p99).filter(Number.isFinite)
    return p99s.length === 0 ? Number.NaN : Math.max(...p99s)
  }
  out.push(`goal GET /messages p99 <= ${goals.messagesP99} ms during the load (worst case): ${verdict(Number.isFinite(worst(0)) ? worst(0) <= goals.messagesP99 : undefined)}${Number.isFinite(worst(0)) ? ` (${fmt(worst(0), 1)} ms)` : ""}`)
  out.push(`goal GET /me p99 <= ${goals.meP99} ms during the load (worst case):       ${verdict(Number.isFinite(worst(1)) ? worst(1) <= goals.meP99 : undefined)}${Number.isFinite(worst(1)) ? ` (${fmt(worst(1), 1)} ms)` : ""}`)
  out.push(`load average (1/5/15 min): before ${loadBefore}, after the rate cases ${loadAfter}, at the end ${loadAverage()}`)
  for (const note of notes) out.push(`NOTE ${note}`)
  process.stdout.write(out.join("\n") + "\n")
  return 0
}

/** Each table's growth (its partitions, named <table>_p<n>, counted with it), largest first. */
const growthByTable = (before: ReadonlyMap<string, { heap: number; index: number }>, after: ReadonlyMap<string, { heap: number; index: number }>) => {
  const growth = new Map<string, { name: string; heap: number; index: number }>()
  for (const [name, a] of after) {
    const b = before.get(name) ?? { heap: 0, index: 0 }
    const parent = name.replace(/_p\d+$/, "")
    const g = growth.get(parent) ?? { name: parent, heap: 0, index: 0 }
    growth.set(parent, { name: parent, heap: g.heap + a.heap - b.heap, index: g.index + a.index - b.index })
  }
  return [...growth.values()].filter((g) => g.heap + g.index > 0).sort((l, r) => (r.heap + r.index) - (l.heap + l.index))
}

/**
 * The disk a stored message takes: `diskMessages` messages of words over the aliases to `burnbox
 * start`, processed; its data dir (and its PostgreSQL cluster where that lives outside it) before
 * and after, each after a CHECKPOINT, over the raw bytes sent.
 */
const diskLoad = async (instance: Instance): Promise<{ lines: Array<string>; ratio: number }> => {
  const burnbox = instance.burnbox
  const db = await burnbox.db()
  const dataDir = burnbox.service.dataDir
  const pgdata = clusterLocation(dataDir, { create: false }).pgdata
  const wal = join(pgdata, "pg_wal")
  const roots = pgdata.startsWith(dataDir + "/") ? [dataDir] : [dataDir, pgdata]
  const measure = () => {
    const whole = roots.reduce((sum, dir) => sum + diskUsage(dir).allocated, 0)
    const walBytes = diskUsage(wal).allocated
    return { whole, wal: walBytes, rest: whole - walBytes }
  }
  const scalar = async (sql: string) => Number((await db.query<{ n: string }>(sql)).rows[0]!.n)
  const walSettings = (await db.query<{ name: string; setting: string; unit: string | null }>(
    "SELECT name, setting, unit FROM pg_settings WHERE name IN ('min_wal_size', 'max_wal_size', 'wal_compression', 'default_toast_compression') ORDER BY name"
  )).rows.map((r) => `${r.name}=${r.setting}${r.unit ?? ""}`).join(", ")

  await drainBacklog(db, drainSecondsMax)
  await db.query("CHECKPOINT")
  const before = measure()
  const tablesBefore = await relationSizes(db)
  const countBefore = await scalar("SELECT count(*)::text AS n FROM messages")
  const sizeBefore = await scalar("SELECT coalesce(sum(size_bytes), 0)::text AS n FROM messages")
  const walWrittenBefore = await scalar("SELECT wal_bytes::text AS n FROM pg_stat_wal")
  const factory = messageFactory({ from: sender, to: (index) => instance.spread[index % instance.spread.length]!, size, tag: "disk", bodies: 64 })
  const compressed = zstdCompressSync(factory.make(1).data).length
  let raw = 0
  const load1 = oneMinuteLoad()
  log(`disk: sending ${fmt(diskMessages)} messages of ${fmt(factory.size)} bytes over ${instance.spread.length} aliases (load ${load1})`)
  const result = await runSmtpLoad({
    port: burnbox.smtpPort,
    connections: sessions,
    sourceAddresses: 0,
    make: factory.make,
    messages: diskMessages,
    timeoutMs: 60 * 60_000,
    onDelivery: (d) => {
      if (d.reply.code >= 200 && d.reply.code < 300) raw += factory.sizeOf(d.index)
    }
  })
  burnbox.checkAlive()
  instance.accepted += result.accepted
  const loadSeconds = (result.endedAt - result.startedAt) / 1000
  const drain = await drainBacklog(db, Math.max(drainSecondsMax, 600))
  const unprocessed = drain.left
  const afterLoad = measure()
  await db.query("CHECKPOINT")
  const after = measure()
  const tablesAfter = await relationSizes(db)
  const count = (await scalar("SELECT count(*)::text AS n FROM messages")) - countBefore
  const sizeBytes = (await scalar("SELECT coalesce(sum(size_bytes), 0)::text AS n FROM messages")) - sizeBefore
  const walWritten = (await scalar("SELECT wal_bytes::text AS n FROM pg_stat_wal")) - walWrittenBefore
  await burnbox.closeDb(db)
  const per = (bytes: number) => fmt(bytes / count)
  const x = (bytes: number) => `${(bytes / raw).toFixed(2)}x`
  const lines = [
    `Disk per stored message: ${fmt(result.accepted)} of ${fmt(diskMessages)} messages accepted (${fmt(result.accepted / loadSeconds)} msg/s, load ${load1} at the start), ` +
      `${fmt(count)} stored, ${unprocessed === 0 ? `all processed ${drain.seconds.toFixed(0)} s after the load` : `${fmt(unprocessed)} NOT processed after ${drain.seconds.toFixed(0)} s`};`,
    `raw bytes sent ${fmt(raw)} = ${fmt(raw / Math.max(1, result.accepted))} per message (messages.size_bytes: ${fmt(sizeBytes / Math.max(1, count))}); bodies of words: one compresses ` +
      `${(factory.size / compressed).toFixed(1)}x with zstd (smtp-source's repeated lines compress ~12x: they would flatter compression)`,
    `data dir: ${roots.join(" + ")}; PostgreSQL ${walSettings}`,
    table(["on disk (du)", "before (after a CHECKPOINT)", "after load + processing", "after a CHECKPOINT", "growth per message, bytes", "growth / raw"], [
      ["whole data dir, with pg_wal", mib(before.whole), mib(afterLoad.whole), mib(after.whole), per(after.whole - before.whole), x(after.whole - before.whole)],
      ["pg_wal alone", mib(before.wal), mib(afterLoad.wal), mib(after.wal), per(after.wal - before.wal), x(after.wal - before.wal)],
      ["data dir without pg_wal", mib(before.rest), mib(afterLoad.rest), mib(after.rest), per(after.rest - before.rest), x(after.rest - before.rest)]
    ]),
    `where the growth without pg_wal went, bytes per message (table with TOAST + its indexes; partitions with their table): ${growthByTable(tablesBefore, tablesAfter)
      .slice(0, 8).map((g) => `${g.name} ${fmt(g.heap / count)} + ${fmt(g.index / count)}`).join(", ")}`,
    `WAL written during the load and processing: ${fmt(walWritten / count)} bytes per message (${x(walWritten)} raw). pg_wal is a ring of recycled segments between ` +
      "min_wal_size and max_wal_size: after a CHECKPOINT it keeps its size rather than shrinking with the data, so the goal is judged without it."
  ]
  return { lines, ratio: (after.rest - before.rest) / raw }
}

await session.run(overallTimeoutMs, main)
