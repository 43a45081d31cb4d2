/**
 * A CI fleet's flow on one token (issue #30, item 8), side by side with maildev 2.2.1 in the same
 * run. Goals: >= 1x maildev's flows/s, SMTP 250 -> code in hand p50 <= 20 ms and p99 <= 100 ms,
 * 0 errors.
 *
 * Usage: pnpm bench:ci-flow
 *
 * What it does:
 * 1. starts `burnbox start` on a fresh data dir (API, SMTP ingest and pipeline in one process,
 *    embedded PostgreSQL); ONE pro account and ONE token for the whole fleet (request, claim and
 *    alias limits raised with an override, so the figures count served work, not refusals);
 * 2. starts maildev 2.2.1 (MAILDEV_BIN, /tmp/maildev, PATH; else installed with npm into a
 *    temporary folder when the registry is reachable; else its rows say unavailable);
 * 3. for each concurrency of CIFLOW_CONCURRENCY (16,64), CIFLOW_SECONDS (10) per target, one after
 *    the other so they never share the CPU, each job repeats the flow of a CI test:
 *    - burnbox: claim an alias (@burnbox/client's `aliases.create()`), send one verification mail
 *      (the testkit's fakeMail: code + link) over a fresh SMTP connection, `messages.wait` for it,
 *      read its code, burn the alias (`aliases.burn`);
 *    - maildev: any address, the same mail over a fresh connection, then `GET /email?to.address=`
 *      at once and every 100 ms until the mail is there, and its code read from the text;
 * 4. per flow: 250 -> code in hand (from the DATA reply to the code read; the wait starts at the
 *    250, as a test calls it after its app sent the mail) and the whole flow; per HTTP request
 *    of the client (it is given a timing fetch): the time of each kind of call, which is where a
 *    burnbox flow spends its time.
 *
 * Environment: CIFLOW_CONCURRENCY (16,64), CIFLOW_SECONDS (10), CIFLOW_WARMUP_SECONDS (2),
 * CIFLOW_MAILDEV (1; 0 skips it), CIFLOW_STATEMENTS (0; 1 loads pg_stat_statements and prints the
 * statements the service sent per flow: calls and execution time, for each burnbox phase; `all`
 * counts those of functions and triggers too, foreign keys' checks included), CIFLOW_PG_SETTINGS
 * (an experiment's PostgreSQL settings, `name=value,...`, e.g. synchronous_commit=off), MAILDEV_BIN, BENCH_LOG_DIR, BENCH_BURNBOX_ROOT.
 */
import { cpus } from "node:os"
import { createServer } from "node:net"
import { createClient } from "@burnbox/client"
import { fakeMail, SmtpClient } from "@burnbox/testkit"
import { Burnbox, type PgClient, sampleWaits, serviceSource, Session, type StatementStat, statementStats, type Waits, waitsByStatementText, waitsText } from "./lib/burnbox.ts"
import { cpuShare, cpuSnapshot, type CpuShare, distribution, type Distribution, envInt, epochMs, fmt, loadAverage, sleep, table } from "./lib/common.ts"
import { maildevBin, startMaildev } from "./lib/smtp.ts"

const concurrencies = (process.env["CIFLOW_CONCURRENCY"] ?? "16,64").split(",").map((c) => Number(c.trim())).filter((c) => Number.isInteger(c) && c > 0)
const seconds = envInt("CIFLOW_SECONDS", 10, 1)
const warmupSeconds = envInt("CIFLOW_WARMUP_SECONDS", 2, 0)
const withMaildev = process.env["CIFLOW_MAILDEV"] !== "0"
const statementsTracked = process.env["CIFLOW_STATEMENTS"] === "all" ? "all" : process.env["CIFLOW_STATEMENTS"] === "1" ? "top" : undefined
const pollMs = 100
const goalP50 = 20
const goalP99 = 100
const email = "ci-fleet@example.com"
const session = new Session("bench:ci-flow")
const log = session.log

/** What one target's phase measured. */
interface Phase {
  readonly flows: number
  readonly elapsedMs: number
  readonly codeInHand: Distribution
  readonly flow: Distribution
  readonly errors: number
  readonly firstErrors: ReadonlyArray<string>
  readonly cpu: CpuShare
  /** per kind of step or request: its durations (ms) */
  readonly steps: ReadonlyMap<string, Array<number>>
}

interface FlowTiming {
  readonly codeInHand: number
  readonly flow: number
}

const ms = (n: number) => fmt(n, 1)
const rate = (p: Phase) => p.flows / (p.elapsedMs / 1000)
/** A CPU share (% of one core over the phase) as milliseconds per flow. */
const cpuPerFlow = (p: Phase, percent: number) => (percent / 100) * p.elapsedMs / Math.max(1, p.flows)
const verdict = (ok: boolean | undefined) => ok === undefined ? "not judged" : ok ? "MET" : "NOT MET"

const randomCode = () => String(100_000 + Math.floor(Math.random() * 900_000))

/**
 * One mail to one recipient on a fresh connection; resolves at its 250 with that instant (the
 * QUIT goes on afterwards, as a mailer's connection closes while the test goes on).
 */
const sendOne = async (port: number, to: string, raw: Uint8Array): Promise<{ at: number; text: string }> => {
  const client = await SmtpClient.connect(port, { ehlo: "app.example.org" })
  try {
    for (const line of ["MAIL FROM:<no-reply@shop.example.com>", `RCPT TO:<${to}>`]) {
      const reply = await client.command(line)
      if (reply.code !== 250) throw new Error(`${line}: ${reply.code} ${reply.text}`)
    }
    const reply = await client.data(raw)
    if (reply.code !== 250) throw new Error(`DATA: ${reply.code} ${reply.text}`)
    return { at: epochMs(), text: reply.text }
  } finally {
    void client.quit()
  }
}

/** A free port on 127.0.0.1. */
const freePort = () => new Promise<number>((resolve, reject) => {
  const server = createServer()
  server.once("error", reject)
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    server.close(() => typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port")))
  })
})

/** A path's kind for the breakdown: numbers and query values taken out. */
const requestKind = (method: string, url: string) => {
  const { pathname, searchParams } = new URL(url)
  const path = pathname.replace(/^\/api\/v1/, "").replace(/\/\d+(?=\/|$)/g, "/:id")
  return `${method} ${path}${searchParams.has("wait") ? "?wait" : ""}`
}

/** Runs `jobs` jobs repeating `flow` for `secs` seconds; a flow started before the end finishes. */
const runPhase = async (
  jobs: number,
  secs: number,
  serverPid: number | undefined,
  steps: Map<string, Array<number>>,
  flow: (job: number, round: number) => Promise<FlowTiming>
): Promise<Phase> => {
  const timings: Array<FlowTiming> = []
  const errors: Array<string> = []
  const started = epochMs()
  const end = started + secs * 1000
  const before = cpuSnapshot(serverPid)
  await Promise.all(Array.from({ length: jobs }, async (_, job) => {
    for (let round = 0; epochMs() < end; round++) {
      session.checkInterrupted()
      try {
        timings.push(await flow(job, round))
      } catch (error) {
        errors.push(error instanceof Error ? error.message : String(error))
        await sleep(50)
      }
    }
  }))
  const elapsedMs = epochMs() - started
  const cpu = cpuShare(before, cpuSnapshot(serverPid))
  return {
    flows: timings.length,
    elapsedMs,
    codeInHand: distribution(timings.map((t) => t.codeInHand)),
    flow: distribution(timings.map((t) => t.flow)),
    errors: errors.length,
    firstErrors: [...new Set(errors)].slice(0, 3),
    cpu,
    steps
  }
}

/** A phase's PostgreSQL statements (pg_stat_statements) per flow: the most called, then the longest. */
const statementsPerFlow = (jobs: number, flows: number, statements: ReadonlyArray<StatementStat>): Array<string> => {
  const perFlow = (n: number, digits = 2) => fmt(n / Math.max(1, flows), digits)
  const calls = statements.reduce((sum, s) => sum + s.calls, 0)
  const execMs = statements.reduce((sum, s) => sum + s.ms, 0)
  const rows = (list: ReadonlyArray<StatementStat>) => list.slice(0, Number(process.env["CIFLOW_STATEMENTS_ROWS"] ?? 14)).map((s) => [
    s.query.replace(/\s+/g, " ").trim().slice(0, Number(process.env["CIFLOW_STATEMENTS_WIDTH"] ?? 90)),
    perFlow(s.calls),
    perFlow(s.ms, 3),
    fmt(s.rows / Math.max(1, s.calls), 1)
  ])
  const header = ["statement", "calls/flow", "exec ms/flow", "rows/call"]
  return [
    "",
    `${jobs} jobs: PostgreSQL statements per flow (pg_stat_statements over ${flows} flows, tracking ${statementsTracked ?? "none"}): ` +
    `${perFlow(calls, 1)} statements, ${perFlow(execMs, 2)} ms of execution. The most called:`,
    table(header, rows([...statements].sort((a, b) => b.calls - a.calls))),
    "The longest (execution, waits for locks included):",
    table(header, rows(statements))
  ]
}

const record = (steps: Map<string, Array<number>>, name: string, duration: number) => {
  const list = steps.get(name) ?? []
  list.push(duration)
  steps.set(name, list)
}

/** Times each step of a flow into `steps`. */
const timed = async <A>(steps: Map<string, Array<number>>, name: string, run: () => Promise<A>): Promise<A> => {
  const started = epochMs()
  try {
    return await run()
  } finally {
    record(steps, name, epochMs() - started)
  }
}

const main = async (): Promise<number> => {
  const burnbox = await Burnbox.create(session, { logName: "bench-ci-flow" })
  session.afterCleanup(() => burnbox.summarizeLog())
  const statsDb: PgClient | undefined = statementsTracked !== undefined ? await burnbox.startWithStatementStats("start", statementsTracked) : (await burnbox.start("start"), undefined)
  // An experiment's PostgreSQL settings (e.g. CIFLOW_PG_SETTINGS="synchronous_commit=off"), set before the run.
  const settings = (process.env["CIFLOW_PG_SETTINGS"] ?? "").split(",").map((s) => s.trim()).filter((s) => s !== "")
  if (settings.length > 0) {
    const db = await burnbox.db()
    for (const setting of settings) {
      const [name, value] = setting.split("=")
      await db.query(`ALTER SYSTEM SET ${name} = '${value}'`)
    }
    await db.query("SELECT pg_reload_conf()")
    await burnbox.closeDb(db)
    log(`PostgreSQL settings: ${settings.join(", ")}`)
  }
  const token = await burnbox.setupAccount(email, "read,manage-aliases")
  const cap = 1_000_000
  await burnbox.cli(["admin", "account", "override", "--email", email, "--set", `activeAliasCap=${cap},aliasLifetimeCap=${cap},claimsPerDay=${cap}`])
  log(`burnbox (pid ${burnbox.pid}) on ${burnbox.baseUrl}, SMTP 127.0.0.1:${burnbox.smtpPort}; one account, one token`)

  let maildevWeb: string | undefined
  let maildevPort = 0
  let maildevPid: number | undefined
  const bin = withMaildev ? await maildevBin(session, true) : undefined
  if (bin !== undefined) {
    try {
      maildevPort = await freePort()
      const webPort = await freePort()
      const child = await startMaildev(session, bin, maildevPort, webPort, session.tempDir("bench-ci-flow-maildev-"))
      maildevPid = child.pid
      maildevWeb = `http://127.0.0.1:${webPort}`
      log(`maildev (pid ${maildevPid}) on SMTP 127.0.0.1:${maildevPort}, ${maildevWeb}`)
    } catch (error) {
      log(`maildev did not start: ${error instanceof Error ? error.message : String(error)}`)
    }
  }

  // The client as a CI job makes it, with a fetch that times each request.
  let steps = new Map<string, Array<number>>()
  const timingFetch: typeof globalThis.fetch = async (input, init) => {
    const request = new Request(input, init)
    return timed(steps, `  ${requestKind(request.method, request.url)}`, () => globalThis.fetch(request))
  }
  const client = createClient({ baseUrl: burnbox.baseUrl, token, fetch: timingFetch })

  // The pipeline's NOTIFY at the commit that marks a message processed (bench:wait's reference).
  const listener = await burnbox.db()
  const notified = new Map<number, number>()
  listener.on("notification", (message) => {
    const at = epochMs()
    const payload = JSON.parse(message.payload ?? "{}") as { messageId?: number }
    if (typeof payload.messageId === "number" && !notified.has(payload.messageId)) notified.set(payload.messageId, at)
  })
  await listener.query("LISTEN burnbox_realtime")

  const burnboxFlow = async (): Promise<FlowTiming> => {
    const started = epochMs()
    const alias = await timed(steps, "claim (aliases.create)", () => client.aliases.create({ style: "numeric" }))
    const code = randomCode()
    const raw = fakeMail({ to: alias.address, code, link: `https://shop.example.com/verify?t=${code}` })
    const { at: accepted, text } = await timed(steps, "SMTP: connect -> 250", () => sendOne(burnbox.smtpPort, alias.address, raw))
    const detail = await timed(steps, "250 -> code (messages.wait)", () => client.messages.wait({ alias: alias.id, timeout: 30 }))
    const inHand = epochMs()
    const processedAt = notified.get(Number(/stored as (\d+)/.exec(text)?.[1]))
    if (processedAt !== undefined) {
      record(steps, "  (250 -> the pipeline's NOTIFY: processed)", processedAt - accepted)
      record(steps, "  (NOTIFY -> code in hand)", inHand - processedAt)
    }
    if (detail.otpCodes[0] !== code) throw new Error(`alias ${alias.address}: code ${String(detail.otpCodes[0])}, sent ${code}`)
    await timed(steps, "burn (aliases.burn)", () => client.aliases.burn(alias.id))
    return { codeInHand: inHand - accepted, flow: epochMs() - started }
  }

  let maildevSequence = 0
  const maildevFlow = async (): Promise<FlowTiming> => {
    const started = epochMs()
    const address = `job-${maildevSequence++}@ci.example.com`
    const code = randomCode()
    const raw = fakeMail({ to: address, code, link: `https://shop.example.com/verify?t=${code}` })
    const { at: accepted } = await timed(steps, "SMTP: connect -> 250", () => sendOne(maildevPort, address, raw))
    const found = await timed(steps, "250 -> code (poll every 100 ms)", async () => {
      for (let polls = 0; epochMs() - accepted < 30_000; polls++) {
        if (polls > 0) await sleep(pollMs)
        const response = await timed(steps, "  GET /email?to.address=", () => fetch(`${maildevWeb}/email?to.address=${encodeURIComponent(address)}`))
        if (response.status !== 200) throw new Error(`GET /email answered ${response.status}`)
        const mails = await response.json() as Array<{ text?: string }>
        const text = mails[0]?.text
        if (text !== undefined) return /\b(\d{6})\b/.exec(text)?.[1]
      }
      throw new Error(`no mail for ${address} within 30 s`)
    })
    const inHand = epochMs()
    if (found !== code) throw new Error(`${address}: code ${String(found)}, sent ${code}`)
    return { codeInHand: inHand - accepted, flow: epochMs() - started }
  }

  if (warmupSeconds > 0) {
    log(`warm-up: 4 jobs for ${warmupSeconds} s on each target`)
    await runPhase(4, warmupSeconds, burnbox.pid, steps, burnboxFlow)
    if (maildevWeb !== undefined) await runPhase(4, warmupSeconds, maildevPid, steps, maildevFlow)
  }

  const results: Array<{ jobs: number; burnbox: Phase; maildev: Phase | undefined; load: string; waits: Waits; statements: Array<StatementStat> }> = []
  const sampler = await burnbox.db()
  for (const jobs of concurrencies) {
    steps = new Map()
    log(`burnbox: ${jobs} jobs for ${seconds} s (load average ${loadAverage()})`)
    if (statsDb !== undefined) await statsDb.query("SELECT pg_stat_statements_reset()")
    const sampling = sampleWaits(sampler)
    const b = await runPhase(jobs, seconds, burnbox.pid, steps, burnboxFlow)
    const waits = await sampling.stop()
    const statements = statsDb === undefined ? [] : await statementStats(statsDb)
    burnbox.checkAlive()
    log(`burnbox: ${b.flows} flows, ${b.errors} errors${b.firstErrors.length > 0 ? `: ${b.firstErrors.join(" | ")}` : ""}`)
    let m: Phase | undefined
    if (maildevWeb !== undefined) {
      steps = new Map()
      log(`maildev: ${jobs} jobs for ${seconds} s`)
      m = await runPhase(jobs, seconds, maildevPid, steps, maildevFlow)
      log(`maildev: ${m.flows} flows, ${m.errors} errors${m.firstErrors.length > 0 ? `: ${m.firstErrors.join(" | ")}` : ""}`)
    }
    results.push({ jobs, burnbox: b, maildev: m, load: loadAverage(), waits, statements })
  }

  const unavailable = "unavailable"
  const rows: Array<Array<string>> = []
  for (const { jobs, burnbox: b, maildev: m } of results) {
    const cells = (name: string, p: Phase | undefined) =>
      p === undefined
        ? [`${jobs} jobs: ${name}`, unavailable, unavailable, unavailable, unavailable, unavailable, unavailable, unavailable, unavailable]
        : [`${jobs} jobs: ${name}`, fmt(rate(p), 1), ms(p.codeInHand.p50), ms(p.codeInHand.p99), ms(p.flow.p50), ms(p.flow.p99), fmt(p.errors), fmt(p.cpu.server), fmt(p.cpu.generator)]
    rows.push(cells("burnbox", b), cells("maildev 2.2.1", m))
    const ratio = (x: number, y: number) => m === undefined || !Number.isFinite(x / y) ? "-" : `${(x / y).toFixed(2)}x`
    rows.push([
      `${jobs} jobs: burnbox / maildev`,
      m === undefined ? "-" : ratio(rate(b), rate(m)),
      m === undefined ? "-" : ratio(b.codeInHand.p50, m.codeInHand.p50),
      m === undefined ? "-" : ratio(b.codeInHand.p99, m.codeInHand.p99),
      m === undefined ? "-" : ratio(b.flow.p50, m.flow.p50),
      m === undefined ? "-" : ratio(b.flow.p99, m.flow.p99),
      "-",
      "-",
      "-"
    ])
  }
  const breakdown: Array<Array<string>> = []
  for (const { jobs, burnbox: b, maildev: m } of results) {
    for (const [name, p] of [["burnbox", b], ["maildev", m]] as const) {
      if (p === undefined) continue
      for (const [step, values] of p.steps) {
        const d = distribution(values)
        breakdown.push([`${jobs} jobs, ${name}: ${step}`, fmt(d.count), ms(d.p50), ms(d.p99), ms(d.mean)])
      }
    }
  }
  const goals = results.map(({ jobs, burnbox: b, maildev: m }) => {
    const vs = m === undefined ? undefined : rate(b) / rate(m)
    return `${jobs} jobs: >= 1x maildev flows/s ${verdict(vs === undefined ? undefined : vs >= 1)} (${vs === undefined ? "maildev unavailable" : vs.toFixed(2) + "x"}); ` +
      `250 -> code p50 <= ${goalP50} ms ${verdict(b.codeInHand.p50 <= goalP50)} (${ms(b.codeInHand.p50)}); ` +
      `p99 <= ${goalP99} ms ${verdict(b.codeInHand.p99 <= goalP99)} (${ms(b.codeInHand.p99)}); 0 errors ${verdict(b.errors === 0)} (${b.errors})`
  })
  const out = [
    "",
    `bench:ci-flow: one account, one token; ${seconds} s per target and concurrency; ${cpus().length} cores; load average at the end of each: ${results.map((r) => `${r.jobs} jobs ${r.load}`).join("; ")}`,
    `service: ${serviceSource()}`,
    table(["flows (claim, mail, wait, code, burn)", "flows/s", "250->code p50", "p99", "flow p50", "p99", "errors", "server CPU %", "bench CPU %"], rows),
    ...goals.map((g) => `  ${g}`),
    ...results.map(({ jobs, burnbox: b, maildev: m }) => `  ${jobs} jobs: CPU per flow, burnbox node ${ms(cpuPerFlow(b, b.cpu.serverProcess))} ms + ` +
      `PostgreSQL ${ms(cpuPerFlow(b, b.cpu.server - b.cpu.serverProcess))} ms` + (m === undefined ? "" : `; maildev ${ms(cpuPerFlow(m, m.cpu.server))} ms`)),
    ...results.flatMap(({ jobs, burnbox: b, maildev: m }) => [...b.firstErrors.map((e) => `  ${jobs} jobs burnbox error: ${e}`), ...(m?.firstErrors ?? []).map((e) => `  ${jobs} jobs maildev error: ${e}`)]),
    "",
    "Where the time goes (ms; indented rows are the HTTP requests inside the step above them, and in brackets its split at the",
    "pipeline's NOTIFY, which a LISTEN connection of this process stamps with the same clock):",
    table(["step", "n", "p50", "p99", "mean"], breakdown),
    "burnbox's PostgreSQL backends with work in hand, sampled every 50 ms (what they wait for; by statement):",
    ...results.flatMap(({ jobs, waits }) => [`  ${jobs} jobs: ${waitsText(waits)}`, `    ${waitsByStatementText(waits, 8)}`]),
    ...results.flatMap(({ jobs, burnbox: b, statements }) => statements.length === 0 ? [] : statementsPerFlow(jobs, b.flows, statements)),
    "",
    "Method: each job repeats the flow until the phase's time is up (a flow started in time finishes); flows/s counts the",
    "flows completed over the phase's wall time. 250 -> code runs from the DATA reply of a fresh SMTP connection to the code",
    "in hand (burnbox: messages.wait answered; maildev: the poll that found the mail). Server CPU % is the service's process",
    "tree (burnbox: node and its PostgreSQL) over the phase, bench CPU % this process's (the jobs' clients); 100 % is one",
    "core. burnbox and maildev run one after the other."
  ]
  process.stdout.write(out.join("\n") + "\n")
  return 0
}

await session.run(15 * 60_000, main)
