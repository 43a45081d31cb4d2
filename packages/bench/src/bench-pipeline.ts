/**
 * From 250 to processed: for every message, the time from burnbox's SMTP 250 to the moment the
 * message is processed and its code readable over the API. Goal: p50 <= 20 ms, p99 <= 100 ms
 * at 500 messages/s.
 *
 * Usage: ./pnpmw bench:pipeline (bench:hostile: with hostile mail)
 *
 * What it does:
 * 1. starts `burnbox start` (API, SMTP ingest and pipeline worker in one process, embedded
 *    PostgreSQL) on a temp data dir; a pro account with raised limits, a token, one claimed alias
 *    (and, with PIPELINE_ACCOUNTS > 0, more accounts with one alias each for an extra phase);
 * 2. LISTENs on the pipeline's realtime channel (`burnbox_realtime`), on which the pipeline's
 *    transaction sends {accountId, messageId} when it marks a message processed: PostgreSQL
 *    delivers a NOTIFY at the commit of the sending transaction, the moment the processed
 *    message becomes visible to the API;
 * 3. phases, each after the previous one's backlog drained: a reference at a low rate
 *    (PIPELINE_LOW_RATE, 5 msg/s, for 6 s), then the goal's PIPELINE_RATE (500) msg/s for
 *    PIPELINE_SECONDS (10) (after PIPELINE_WARMUP_SECONDS at the low rate). The paced generator
 *    (node:net, PIPELINING, 50 connections with their own loopback source addresses) makes
 *    message i due at start + i/rate and gives it to the next free connection; every message
 *    has a unique six-digit code; each 250 and its "stored as <id>" is recorded;
 * 4. measures, per message, on this machine's clock:
 *    - notify: arrival of the pipeline's NOTIFY for the id minus the 250 (primary);
 *    - processed_at: messages.processed_at minus the 250. burnbox takes that timestamp from its
 *      clock when the pipeline's store step begins, before its transaction commits, so it is a
 *      lower bound; with processing_started_at (the claim) it splits the time into waiting for
 *      a worker, the work before storing (read raw, parse, SPF/DKIM/DMARC) and store + commit;
 *    - API: for every PIPELINE_API_EVERY-th message (25), at most 4 at a time, GET
 *      /api/v1/messages/{id} every 5 ms (after 100 ms: every 25 ms) until processingStatus is
 *      processed (an upper bound: HTTP round trip plus the polling interval); the message's code
 *      in otpCodes is checked too; the polls give up 2 s after the load (a check of the method at
 *      low latency, not a sample of long waits);
 *    A message not processed within PIPELINE_DRAIN_SECONDS (120) of the phase's end counts as
 *    "> that" in the percentiles;
 * 5. probes this machine's DNS resolver the way burnbox's pipeline uses it (SPF and DMARC
 *    lookups: node:dns Resolver, 1.5 s timeout, one try), since those lookups are part of
 *    processing;
 * 6. prints p50/p95/p99/max, the offered and achieved rates, the pipeline's drain rate, and the
 *    goals.
 *
 * 7. with PIPELINE_HOSTILE_PER_SECOND > 0 (`bench:hostile`: 1 per second in 200 msg/s), sends
 *    that many hostile messages per second (testkit's HostileMail: deep nesting, huge attribute
 *    lists, thousands of parts, a 14 MB line, ...; each on a connection of its own, cycling through
 *    the kinds) to the same alias during each measured phase; the table then holds the ordinary
 *    mail alone, and each hostile message's outcome (processed / failed and why, how long) is
 *    listed; issue #15's goal: ordinary mail's p99 under 250 ms;
 * 8. probes the service's responsiveness during each measured phase: GET /api/v1/me one after
 *    the other every 50 ms, and an SMTP connection's greeting (connect -> 220) every 200 ms
 *    (issue #15: no message holds the API or SMTP for more than 50 ms).
 * 9. with PIPELINE_RULES > 0 (issue #34: `PIPELINE_RULES=50 ./pnpmw bench:pipeline`), the cost of
 *    the rules step: the account gets that many mail rules (POST /rules), each but the last with a
 *    body substring no message has (so every message walks every rule and lowers its texts), the
 *    last one matching every message and starring and reading it (the marks' writes; with
 *    PIPELINE_RULES_READ=0 only starring, so the alias's unread count is not written; with
 *    PIPELINE_RULES_MATCHING=0 it is a body condition too: the walk's cost alone); then the
 *    one-alias phase at PIPELINE_RATE runs PIPELINE_RULES_ROUNDS (2) times without the rules and
 *    with them, alternating (rules switched with PATCH enabled), and a side-by-side table
 *    compares latency and CPU per message.
 *
 * Environment: PIPELINE_RATE (500), PIPELINE_SECONDS (10), PIPELINE_LOW_RATE (5; 0 skips),
 * PIPELINE_WARMUP_SECONDS (2), PIPELINE_CONNECTIONS (50), PIPELINE_ACCOUNTS (0), PIPELINE_API_EVERY
 * (25), PIPELINE_DRAIN_SECONDS (120), PIPELINE_HOSTILE_PER_SECOND (0), PIPELINE_RULES (0),
 * PIPELINE_RULES_ROUNDS (2), PIPELINE_RULES_READ (1),
 * PIPELINE_RULES_MATCHING (1), BENCH_LOG_DIR, BENCH_BURNBOX_ROOT.
 */
import { promises as dns } from "node:dns"
import { connect } from "node:net"
import { dotStuff, hostileMails, SmtpClient } from "@burnbox/testkit"
import { availableParallelism, cpus } from "node:os"
import { Burnbox, sampleWaits, serviceSource, Session, waitsByStatementText, waitsText } from "./lib/burnbox.ts"
import { cpuShare, cpuSnapshot, distribution, type Distribution, envInt, epochMs, fmt, loadAverage, median, serverCpuCell, sleep, table } from "./lib/common.ts"
import { codeOf, countsText, type Delivery, messageFactory, runSmtpLoad } from "./lib/smtp.ts"

const rate = envInt("PIPELINE_RATE", 500, 1)
const seconds = envInt("PIPELINE_SECONDS", 10, 1)
const lowRate = envInt("PIPELINE_LOW_RATE", 5, 0)
const warmupSeconds = envInt("PIPELINE_WARMUP_SECONDS", 2, 0)
const connections = envInt("PIPELINE_CONNECTIONS", 50, 1)
const extraAccounts = envInt("PIPELINE_ACCOUNTS", 0, 0)
const apiEvery = envInt("PIPELINE_API_EVERY", 25, 1)
const drainTimeoutMs = envInt("PIPELINE_DRAIN_SECONDS", 120, 1) * 1000
const hostilePerSecond = envInt("PIPELINE_HOSTILE_PER_SECOND", 0, 0)
const ruleCount = envInt("PIPELINE_RULES", 0, 0)
const ruleRounds = envInt("PIPELINE_RULES_ROUNDS", 2, 1)
/** 0: the matching rule only stars (its reading changes the alias's unread count, a row ingest updates too). */
const ruleReads = envInt("PIPELINE_RULES_READ", 1, 0) > 0
/** 0: no rule matches (the walk's cost alone, no marks written). */
const ruleMatches = envInt("PIPELINE_RULES_MATCHING", 1, 0) > 0
/** Ordinary mail's p99 with hostile mail mixed in (issue #15). */
const goalMixedP99 = 250
/** Longest pause of the API or SMTP greeting any message may cause (issue #15). */
const goalPauseMs = 50
/** At most this many messages polled over the API at once (a sample is skipped while they are busy). */
const maxPolls = 4
const size = 5_150

const goalP50 = 20
const goalP99 = 100
const email = "bench-pipeline@example.com"
const sender = "sender@bench.localhost"
const cores = availableParallelism()
const overallTimeoutMs = 25 * 60_000

const session = new Session("bench:pipeline")
const log = session.log

interface Phase {
  readonly name: string
  /** Mail rules the account runs during the phase. */
  readonly rules: number
  readonly rate: number
  readonly offered: number
  readonly accepted: number
  readonly achievedRate: number
  readonly maxStartLagMs: number
  readonly failures: string
  readonly accept: Distribution
  readonly notify: Distribution
  readonly processedAt: Distribution
  readonly api: Distribution
  readonly wait: Distribution
  readonly work: Distribution
  readonly store: Distribution
  readonly apiCodesOk: number
  readonly unprocessed: number
  readonly serverCpu: string
  readonly waits: string
  readonly waitsByStatement: string
  readonly backlogPeak: number
  readonly drainSeconds: number
  readonly drainRate: number
  readonly drainCpu: string
  readonly cpuPerMessage: number
  /** CPU ms (node + PostgreSQL) per accepted message from the load's start to the drain's end: ingest, pipeline and all. */
  readonly totalCpuPerMessage: number
  readonly me: Distribution
  readonly greeting: Distribution
  readonly hostile: ReadonlyArray<string>
}

/** `b` as a multiple of `a`. */
const ratio = (a: number, b: number) => Number.isFinite(a) && Number.isFinite(b) && a > 0 ? `x${(b / a).toFixed(3)}` : "-"
const ms = (n: number) => Number.isFinite(n) ? fmt(n, 1) : `> ${fmt(drainTimeoutMs)}`
const cellsOf = (x: Distribution) => [fmt(x.count), ms(x.p50), ms(x.p95), ms(x.p99), ms(x.max)]

/** This machine's resolver as burnbox's pipeline uses it: `count` TXT lookups, `parallel` at a time. */
const probeDns = async (count: number, parallel: number) => {
  const resolver = new dns.Resolver({ timeout: 1_500, tries: 1 })
  const times: Array<number> = []
  let timeouts = 0
  let next = 0
  await Promise.all(Array.from({ length: parallel }, async () => {
    while (next < count) {
      const i = next++
      const started = performance.now()
      try {
        await resolver.resolveTxt(`probe-${i}-${process.pid}.bench.localhost`)
      } catch (error) {
        if ((error as { code?: string }).code === "ETIMEOUT") timeouts++
      }
      times.push(performance.now() - started)
    }
  }))
  const d = distribution(times)
  return `${parallel} at a time: p50 ${fmt(d.p50, 1)} ms, p99 ${fmt(d.p99, 1)} ms, max ${fmt(d.max)} ms, ${timeouts}/${count} timed out`
}

/** Time from connecting to the SMTP listener to its 220 greeting, ms (the connection is then dropped). */
const greeting = (port: number) =>
  new Promise<number>((resolve) => {
    const started = performance.now()
    const socket = connect({ host: "127.0.0.1", port })
    const done = () => {
      socket.destroy()
      resolve(performance.now() - started)
    }
    socket.once("data", done)
    socket.once("error", done)
    socket.setTimeout(10_000, done)
  })

const hostileQueue: Array<{ readonly name: string; readonly stuffed: Buffer }> = []
let hostileNext = 0

const main = async (): Promise<number> => {
  const burnbox = await Burnbox.create(session, { logName: "bench-pipeline" })
  session.afterCleanup(() => burnbox.summarizeLog())
  await burnbox.start("start")
  const token = await burnbox.setupAccount(email)
  const alias = await burnbox.claimAlias(token)
  log(`claimed alias ${alias.address} (id ${alias.id})`)
  const spread = extraAccounts > 0 ? await burnbox.createAccountsWithAliases("bench-pipeline-spread", extraAccounts) : []
  const db = await burnbox.db()
  const listener = await burnbox.db()
  const notified = new Map<number, number>()
  listener.on("notification", (message) => {
    const at = epochMs()
    try {
      const payload = JSON.parse(message.payload ?? "{}") as { messageId?: number }
      if (typeof payload.messageId === "number" && !notified.has(payload.messageId)) notified.set(payload.messageId, at)
    } catch {
      // not ours
    }
  })
  await listener.query("LISTEN burnbox_realtime")

  const pendingCount = async () =>
    Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM messages WHERE processing_status IN ('stub', 'processing')`)).rows[0]!.n)
  const processedCount = async () =>
    Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM messages WHERE processing_status IN ('processed', 'failed')`)).rows[0]!.n)

  const runPhase = async (
    name: string,
    to: string | ((index: number, connection: number) => string),
    measured: boolean,
    secs: number,
    phaseRate: number,
    rules = 0
  ): Promise<Phase | undefined> => {
    session.checkInterrupted()
    const tag = name.replace(/\W/g, "")
    const factory = messageFactory({ from: sender, to, size, tag })
    const deliveries: Array<{ delivery: Delivery; ids: Array<number> }> = []
    const apiTimes = new Map<number, number>()
    let apiCodesOk = 0
    const polls: Array<Promise<void>> = []
    let pollUntil = Number.POSITIVE_INFINITY
    let polling = 0
    const poll = async (id: number, index: number, after: number) => {
      polling++
      try {
        await pollOne(id, index, after)
      } finally {
        polling--
      }
    }
    const pollOne = async (id: number, index: number, after: number) => {
      while (Date.now() < pollUntil && !session.exiting) {
        const response = await burnbox.api("GET", `/api/v1/messages/${id}`, token)
        const body = response.body as { processingStatus?: string; otpCodes?: Array<string> } | undefined
        if (response.status === 200 && body?.processingStatus === "processed") {
          apiTimes.set(id, epochMs() - after)
          if (body.otpCodes?.includes(codeOf(index)) === true) apiCodesOk++
          return
        }
        // Every 5 ms for the first 100 ms, then every 25 ms: the polls must not load the service they measure.
        await sleep(epochMs() - after < 100 ? 5 : 25)
      }
    }
    let backlogPeak = 0
    const backlogSampler = { running: true }
    const backlogLoop = (async () => {
      while (backlogSampler.running) {
        backlogPeak = Math.max(backlogPeak, await pendingCount())
        await sleep(200)
      }
    })()
    const sampler = measured ? sampleWaits(db) : undefined
    const probes = { running: measured }
    const meTimes: Array<number> = []
    const greetingTimes: Array<number> = []
    const meLoop = (async () => {
      while (probes.running) {
        const started = performance.now()
        await burnbox.api("GET", "/api/v1/me", token)
        meTimes.push(performance.now() - started)
        await sleep(50)
      }
    })()
    const greetingLoop = (async () => {
      while (probes.running) {
        greetingTimes.push(await greeting(burnbox.smtpPort))
        await sleep(200)
      }
    })()
    const hostileSent: Array<Promise<{ name: string; sentAt: number; id: number | null; reply: string }>> = []
    const hostileTimer = measured && hostilePerSecond > 0 && typeof to === "string"
      ? setInterval(() => {
        const mail = hostileQueue[hostileNext++ % hostileQueue.length]!
        const sentAt = epochMs()
        hostileSent.push(SmtpClient.sendOne(burnbox.smtpPort, to, mail.stuffed, sender, { stuffed: true }).then(
          (reply) => ({ name: mail.name, sentAt, id: Number(/stored as (\d+)/.exec(reply.text)?.[1] ?? Number.NaN) || null, reply: `${reply.code}` }),
          (error: unknown) => ({ name: mail.name, sentAt, id: null, reply: String(error) })
        ))
      }, 1000 / hostilePerSecond)
      : undefined
    const before = cpuSnapshot(burnbox.pid)
    const loadStart = Date.now()
    log(`${name}: ${measured ? "measured" : "warm-up"}, ${phaseRate} msg/s for ${secs} s over ${connections} connections`)
    const result = await runSmtpLoad({
      port: burnbox.smtpPort,
      connections,
      sourceAddresses: connections,
      make: factory.make,
      rate: phaseRate,
      seconds: secs,
      timeoutMs: (secs + 120) * 1000,
      onDelivery: (delivery) => {
        const match = /stored as ([\d,]+)/.exec(delivery.reply.text)
        const ids = match === null ? [] : match[1]!.split(",").map(Number)
        deliveries.push({ delivery, ids })
        // Only messages of the main account can be read with its token.
        if (measured && typeof to === "string" && delivery.index % apiEvery === 0 && ids.length === 1 && polling < maxPolls) {
          polls.push(poll(ids[0]!, delivery.index, delivery.repliedAt))
        }
      }
    })
    const cpu = cpuShare(before, cpuSnapshot(burnbox.pid))
    clearInterval(hostileTimer)
    probes.running = false
    await Promise.all([meLoop, greetingLoop])
    const hostileReplies = await Promise.all(hostileSent)
    burnbox.checkAlive()
    const sampled = sampler === undefined ? undefined : await sampler.stop()
    // The API polls stop 2 s after the load, so they do not load the drain measured next.
    pollUntil = Date.now() + 2_000
    await Promise.all(polls)
    // Drain: until nothing is left to process, or the timeout.
    const drainStart = Date.now()
    const processedBefore = await processedCount()
    const drainCpuBefore = cpuSnapshot(burnbox.pid)
    let left = await pendingCount()
    while (left > 0 && Date.now() - drainStart < drainTimeoutMs) {
      session.checkInterrupted()
      burnbox.checkAlive()
      await sleep(100)
      left = await pendingCount()
    }
    const drainSeconds = (Date.now() - drainStart) / 1000
    const drainedCount = await processedCount() - processedBefore
    const drainRate = drainedCount / Math.max(drainSeconds, 1e-3)
    const drainCpu = cpuShare(drainCpuBefore, cpuSnapshot(burnbox.pid))
    const totalCpu = cpuShare(before, cpuSnapshot(burnbox.pid))
    const totalCpuPerMessage = result.accepted > 0 ? (totalCpu.server / 100) * (Date.now() - loadStart) / result.accepted : Number.NaN
    // CPU ms (node + PostgreSQL) per message processed while nothing else was sent.
    const cpuPerMessage = drainedCount > 0 ? (drainCpu.server / 100) * drainSeconds * 1000 / drainedCount : Number.NaN
    backlogSampler.running = false
    await backlogLoop
    await sleep(200) // the last notifications
    log(`${name}: ${result.accepted} accepted (${fmt(result.acceptedPerSecond)}/s), rejected ${countsText(result.rejected)}, errors ${countsText(result.errors)}; ${left} unprocessed ${drainSeconds.toFixed(1)} s after the load`)
    if (!measured) return undefined

    const ids = deliveries.flatMap((d) => d.ids.map((id) => ({ id, repliedAt: d.delivery.repliedAt })))
    const timings = new Map((await db.query<{ id: number; claimed: number | null; at: number | null; status: string }>(
      `SELECT id, extract(epoch FROM processing_started_at) * 1000 AS claimed, extract(epoch FROM processed_at) * 1000 AS at, processing_status AS status
       FROM messages WHERE id = ANY($1::int[])`,
      [ids.map((i) => i.id)]
    )).rows.map((r) => [Number(r.id), r]))
    const notifyLatencies: Array<number> = []
    const processedAtLatencies: Array<number> = []
    const wait: Array<number> = []
    const work: Array<number> = []
    const store: Array<number> = []
    let unprocessed = 0
    for (const { id, repliedAt } of ids) {
      const n = notified.get(id)
      const row = timings.get(id)
      const done = row?.status === "processed"
      if (!done) unprocessed++
      notifyLatencies.push(n === undefined ? Number.POSITIVE_INFINITY : n - repliedAt)
      processedAtLatencies.push(done && row.at !== null ? Number(row.at) - repliedAt : Number.POSITIVE_INFINITY)
      if (done && row.claimed !== null && row.at !== null) {
        wait.push(Number(row.claimed) - repliedAt)
        work.push(Number(row.at) - Number(row.claimed))
        if (n !== undefined) store.push(n - Number(row.at))
      }
    }
    const hostileIds = hostileReplies.flatMap((h) => (h.id === null ? [] : [h.id]))
    const hostileRows = new Map((await db.query<{ id: number; status: string; reason: string | null; done: number | null }>(
      `SELECT id, processing_status AS status, failure_reason AS reason,
              extract(epoch FROM coalesce(processed_at, processing_started_at)) * 1000 AS done
       FROM messages WHERE id = ANY($1::int[])`,
      [hostileIds]
    )).rows.map((r) => [Number(r.id), r]))
    const hostile = hostileReplies.map((h) => {
      const row = h.id === null ? undefined : hostileRows.get(h.id)
      if (row === undefined) return `${h.name}: not stored (${h.reply.slice(0, 80)})`
      const notifiedAt = notified.get(h.id!)
      const took = notifiedAt === undefined ? "" : `, ${fmt(notifiedAt - h.sentAt)} ms from sending to its NOTIFY`
      return `${h.name}: ${row.status}${row.reason === null ? "" : ` (${row.reason})`}${took}`
    })
    const span = (result.endedAt - result.startedAt) / 1000
    return {
      name,
      rules,
      rate: phaseRate,
      offered: Math.round(phaseRate * secs),
      accepted: result.accepted,
      achievedRate: result.accepted / span,
      maxStartLagMs: result.maxStartLagMs,
      failures: [countsText(result.rejected), countsText(result.errors)].filter((t) => t !== "none").join("; ") || "-",
      accept: distribution(deliveries.map((d) => d.delivery.repliedAt - d.delivery.sentAt)),
      notify: distribution(notifyLatencies),
      processedAt: distribution(processedAtLatencies),
      api: distribution([...apiTimes.values()]),
      wait: distribution(wait),
      work: distribution(work),
      store: distribution(store),
      apiCodesOk,
      unprocessed,
      serverCpu: serverCpuCell(cpu),
      waits: sampled === undefined ? "-" : waitsText(sampled),
      waitsByStatement: sampled === undefined ? "-" : waitsByStatementText(sampled),
      backlogPeak,
      drainSeconds,
      drainRate,
      drainCpu: serverCpuCell(drainCpu),
      cpuPerMessage,
      totalCpuPerMessage,
      me: distribution(meTimes),
      greeting: distribution(greetingTimes),
      hostile
    }
  }

  const dnsLines = [await probeDns(100, 1), await probeDns(200, 4)]
  if (hostilePerSecond > 0) {
    for (const mail of hostileMails(`${alias.address.split("@")[0]}+pipeline@${alias.address.split("@")[1]}`)) hostileQueue.push({ name: mail.name, stuffed: dotStuff(mail.raw) })
    log(`hostile mail: ${hostileQueue.length} kinds, ${hostilePerSecond}/s during each measured phase`)
  }
  const loadBefore = loadAverage()
  const phases: Array<Phase> = []
  const [local, domain] = alias.address.split("@") as [string, string]
  const drained = () => phases.every((p) => p.unprocessed === 0)
  if (warmupSeconds > 0) await runPhase("warm-up", `${local}+warmup@${domain}`, false, warmupSeconds, Math.max(lowRate, 5))
  if (lowRate > 0) {
    const low = await runPhase(`one alias at ${lowRate} msg/s (reference)`, `${local}+low@${domain}`, true, 6, lowRate)
    if (low !== undefined) phases.push(low)
  }
  const skipped: Array<string> = []
  if (drained()) {
    const one = await runPhase(`one alias at ${rate} msg/s`, `${local}+pipeline@${domain}`, true, seconds, rate)
    if (one !== undefined) phases.push(one)
  } else skipped.push(`${rate} msg/s on one alias: the previous phase's backlog did not drain`)
  if (spread.length > 0) {
    if (drained()) {
      const to = (_index: number, connection: number) => {
        const [l, d] = spread[connection % spread.length]!.address.split("@") as [string, string]
        return `${l}+pipeline@${d}`
      }
      const many = await runPhase(`${spread.length} accounts at ${rate} msg/s`, to, true, seconds, rate)
      if (many !== undefined) phases.push(many)
    } else skipped.push(`${rate} msg/s over ${spread.length} accounts: the previous phase's backlog did not drain`)
  }
  // The rules step's cost (issue #34): the same phase without and with the account's rules, alternating.
  const ruleIds: Array<number> = []
  for (let i = 0; i < ruleCount; i++) {
    const last = ruleMatches && i === ruleCount - 1
    const answer = await burnbox.api("POST", "/api/v1/rules", token, {
      name: `bench rule ${i}`,
      position: i,
      match: last ? { from: "bench.localhost" } : { body: `no message says ${i} zebras` },
      actions: last ? [{ type: "star" }, ...(ruleReads ? [{ type: "mark_read" }] : [])] : [{ type: "archive" }]
    })
    if (answer.status !== 201) throw new Error(`POST /rules answered ${answer.status}: ${JSON.stringify(answer.body)}`)
    ruleIds.push((answer.body as { id: number }).id)
  }
  const switchRules = async (enabled: boolean) => {
    for (const id of ruleIds) {
      const answer = await burnbox.api("PATCH", `/api/v1/rules/${id}`, token, { enabled })
      if (answer.status !== 200) throw new Error(`PATCH /rules/${id} answered ${answer.status}`)
    }
  }
  const ruleRuns: Array<Phase> = []
  if (ruleCount > 0) {
    for (let round = 1; round <= ruleRounds; round++) {
      for (const rules of [0, ruleCount]) {
        if (!drained()) {
          skipped.push(`rules round ${round}: the previous phase's backlog did not drain`)
          break
        }
        await switchRules(rules > 0)
        const run = await runPhase(`one alias at ${rate} msg/s, ${rules} rules (round ${round})`, `${local}+rules@${domain}`, true, seconds, rate, rules)
        if (run !== undefined) {
          phases.push(run)
          ruleRuns.push(run)
        }
      }
    }
  }
  const loadAfter = loadAverage()
  await burnbox.closeDb(listener)
  await burnbox.closeDb(db)

  // ---- report
  const out: Array<string> = []
  out.push("")
  out.push(`From 250 to processed: 5 KB messages, each with a unique code, paced over ${connections} connections`)
  out.push(`machine: ${cores} cores (${cpus()[0]?.model ?? "unknown CPU"}), Node ${process.version}; load average before ${loadBefore}, after ${loadAfter}`)
  out.push(`service code: ${serviceSource()}`)
  out.push(`this machine's DNS (the pipeline does SPF and DMARC lookups per message): ${dnsLines.join("; ")}`)
  for (const p of phases) {
    out.push("")
    out.push(`Phase "${p.name}": offered ${fmt(p.offered)}, accepted ${fmt(p.accepted)} at ${fmt(p.achievedRate)} msg/s; largest lag of a send behind its schedule ${fmt(p.maxStartLagMs)} ms; failures: ${p.failures}`)
    out.push(`  burnbox cpu % (node+pg) during the load ${p.serverCpu}; pipeline backlog (stub + processing) peak ${fmt(p.backlogPeak)};`)
    out.push(`  after the load the pipeline ${p.unprocessed === 0 ? "drained" : `left ${fmt(p.unprocessed)} unprocessed`} in ${p.drainSeconds.toFixed(1)} s, processing ${fmt(p.drainRate, 1)} msg/s meanwhile`)
    if (Number.isFinite(p.cpuPerMessage)) out.push(`  while draining: burnbox cpu % (node+pg) ${p.drainCpu}, i.e. ${fmt(p.cpuPerMessage, 1)} ms of CPU per processed message (${cores} cores: at most ~${fmt(cores * 1000 / p.cpuPerMessage)} msg/s if nothing else ran)`)
    out.push(`  PostgreSQL backends during the load: ${p.waits}`)
    out.push(`    by statement: ${p.waitsByStatement}`)
    out.push(table(["ms from the 250 to ...", "messages", "p50", "p95", "p99", "max"], [
      ["NOTIFY of the processed commit (primary)", ...cellsOf(p.notify)],
      ["messages.processed_at (lower bound)", ...cellsOf(p.processedAt)],
      ...(p.api.count > 0 ? [[`GET /messages/{id} says processed (sample, polls end 2 s after the load; upper bound)`, ...cellsOf(p.api)]] : []),
      ["  of which: 250 -> claimed by a worker", ...cellsOf(p.wait)],
      ["  claimed -> store step (raw, parse, SPF/DKIM/DMARC)", ...cellsOf(p.work)],
      ["  store step -> NOTIFY (store transaction, commit)", ...cellsOf(p.store)],
      ["(for reference: end of DATA -> 250)", ...cellsOf(p.accept)]
    ]))
    if (p.api.count > 0) out.push(`  API sample: ${p.apiCodesOk}/${p.api.count} seen processed showed the message's own code in otpCodes`)
    out.push(table(["responsiveness during the load, ms", "probes", "p50", "p95", "p99", "max"], [
      ["GET /api/v1/me, one after the other every 50 ms", ...cellsOf(p.me)],
      ["SMTP connect -> 220 greeting, every 200 ms", ...cellsOf(p.greeting)]
    ]))
    out.push(`  goal: API and SMTP never held more than ${goalPauseMs} ms: /me p99 ${fmt(p.me.p99, 1)} (${p.me.p99 <= goalPauseMs ? "MET" : "NOT MET"}), greeting p99 ${fmt(p.greeting.p99, 1)} (${p.greeting.p99 <= goalPauseMs ? "MET" : "NOT MET"})`)
    if (p.hostile.length > 0) {
      out.push(`  hostile mail sent during the phase (${p.hostile.length}), outcome of each:`)
      for (const line of p.hostile) out.push(`    ${line}`)
      out.push(`  goal with hostile mail mixed in: ordinary mail's p99 <= ${goalMixedP99} ms: ${p.notify.p99 <= goalMixedP99 ? "MET" : "NOT MET"} (${ms(p.notify.p99)})`)
    }
    if (p.rate !== rate) continue
    const rateOk = p.achievedRate >= 0.95 * rate
    out.push(`  goal p50 <= ${goalP50} ms: ${p.notify.p50 <= goalP50 ? "MET" : "NOT MET"} (${ms(p.notify.p50)}); goal p99 <= ${goalP99} ms: ${p.notify.p99 <= goalP99 ? "MET" : "NOT MET"} (${ms(p.notify.p99)}); at ${rate} msg/s: ${rateOk ? "yes" : `NO, burnbox accepted only ${fmt(p.achievedRate)} msg/s`}`)
  }
  if (ruleRuns.length > 0) {
    const of = (rules: number) => ruleRuns.filter((p) => p.rules === rules)
    const summary = (rules: number) => {
      const runs = of(rules)
      return {
        p50: median(runs.map((p) => p.notify.p50)),
        p99: median(runs.map((p) => p.notify.p99)),
        cpu: median(runs.map((p) => p.cpuPerMessage).filter(Number.isFinite)),
        totalCpu: median(runs.map((p) => p.totalCpuPerMessage).filter(Number.isFinite)),
        work: median(runs.map((p) => p.work.p50)),
        store: median(runs.map((p) => p.store.p50))
      }
    }
    const [without, withRules] = [summary(0), summary(ruleCount)]
    out.push("")
    out.push(`The rules step (issue #34): ${rate} msg/s on one alias, ${ruleRounds} rounds alternating 0 and ${ruleCount} rules (${ruleCount - 1} body conditions no message meets, ${ruleMatches ? `1 rule starring${ruleReads ? " and reading" : ""} every message` : "the last one too"})`)
    out.push(table(["phase", "rules", "accepted/s", "NOTIFY p50", "p95", "p99", "store step p50", "cpu during load", "cpu ms/msg (load+drain)", "cpu ms/msg (drain)"], ruleRuns.map((p) => [
      p.name,
      fmt(p.rules),
      fmt(p.achievedRate),
      ms(p.notify.p50),
      ms(p.notify.p95),
      ms(p.notify.p99),
      ms(p.store.p50),
      p.serverCpu,
      Number.isFinite(p.totalCpuPerMessage) ? fmt(p.totalCpuPerMessage, 2) : "-",
      Number.isFinite(p.cpuPerMessage) ? fmt(p.cpuPerMessage, 2) : "-"
    ])))
    out.push(table(["median of the rounds", `0 rules`, `${ruleCount} rules`, "ratio"], [
      ["NOTIFY p50 ms", ms(without.p50), ms(withRules.p50), ratio(without.p50, withRules.p50)],
      ["NOTIFY p99 ms", ms(without.p99), ms(withRules.p99), ratio(without.p99, withRules.p99)],
      ["store step -> NOTIFY p50 ms", ms(without.store), ms(withRules.store), ratio(without.store, withRules.store)],
      ["CPU ms per message, load start to drain end (node+pg)", fmt(without.totalCpu, 2), fmt(withRules.totalCpu, 2), ratio(without.totalCpu, withRules.totalCpu)],
      ["CPU ms per processed message (drain)", fmt(without.cpu, 2), fmt(withRules.cpu, 2), ratio(without.cpu, withRules.cpu)]
    ]))
  }
  for (const s of skipped) out.push(`skipped: ${s}`)
  out.push("")
  out.push("Method: the generator stamps each 250 (with its \"stored as <id>\") with performance.timeOrigin + performance.now(); a LISTEN")
  out.push("connection to burnbox's PostgreSQL stamps each NOTIFY on burnbox_realtime (sent by the pipeline in the transaction that sets")
  out.push("processing_status = 'processed', delivered at its commit) with the same clock. processed_at and processing_started_at are")
  out.push("burnbox's clock (same machine) at the start of the store step and at the claim. Messages still unprocessed when the drain")
  out.push(`timed out count as "> ${fmt(drainTimeoutMs)}" ms.`)
  process.stdout.write(out.join("\n") + "\n")
  return 0
}

await session.run(overallTimeoutMs, main)
