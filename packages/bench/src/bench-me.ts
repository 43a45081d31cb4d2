/**
 * `pnpm bench:me`: GET /api/v1/me with a bearer token over keep-alive connections, against the
 * real burnbox service and, in the same run, against a bare Node `http` server that returns the
 * same JSON body (design/benchmarks.md: measure side by side, quote the ratio).
 *
 * What it does:
 * 1. starts `burnbox serve` as a child process on a fresh temporary data dir (its own embedded
 *    PostgreSQL), on free ports, bound to 127.0.0.1;
 * 2. creates the benchmark account (plan pro), raises its request limits with
 *    `burnbox admin account override` (so the figure counts served requests, not 429s) and
 *    creates a `read` token, all with the real CLI;
 * 3. captures the exact body of one authenticated GET /api/v1/me (must be 200);
 * 4. starts a bare `node:http` server returning that body as another child process;
 * 5. runs autocannon (in this process) against each: 50 connections, keep-alive, a discarded
 *    warm-up, then a measured run;
 * 6. prints a table (requests/s, 2xx/s, p50, p99, non-2xx, errors), the ratio and the goals;
 * 7. stops both servers by pid (SIGINT to burnbox, waiting for it so its PostgreSQL shuts down
 *    cleanly) and removes the temp dir, also on failure, timeout or Ctrl-C (lib/burnbox.ts).
 *
 * Environment: BENCH_SECONDS (measured seconds per run, default 10), BENCH_WARMUP_SECONDS
 * (default 2), BENCH_CONNECTIONS (default 50), BENCH_ROUNDS (default 1; with more rounds the
 * order alternates burnbox/bare, bare/burnbox, ... and the summary shows medians),
 * BENCH_LOG_DIR (where the service's output is kept, default the OS temp dir).
 */
import type { ChildProcess } from "node:child_process"
import { createRequire } from "node:module"
import { availableParallelism, cpus, loadavg } from "node:os"
import { listenerPorts } from "@burnbox/testkit"
import { Burnbox, Session } from "./lib/burnbox.ts"
import { cpuShare, type CpuShare, cpuSnapshot, envInt, fmt, median, rssOf, serverCpuCell, table, withTimeout } from "./lib/common.ts"

// ---------------------------------------------------------------------------------------------
// autocannon has no bundled types and @types/autocannon is not a dependency; describe the small
// part of its API used here and load it through require (it is CommonJS).

interface AutocannonOptions {
  readonly url: string
  readonly connections: number
  readonly duration: number
  readonly pipelining?: number
  readonly timeout?: number
  readonly headers?: Record<string, string>
  readonly title?: string
}
interface Histogram {
  readonly average: number
  readonly mean: number
  readonly stddev: number
  readonly min: number
  readonly max: number
  readonly total: number
  readonly p50: number
  readonly p90: number
  readonly p99: number
}
interface AutocannonResult {
  readonly duration: number
  readonly requests: Histogram
  readonly latency: Histogram
  readonly throughput: Histogram
  readonly errors: number
  readonly timeouts: number
  readonly non2xx: number
  readonly resets: number
  readonly mismatches: number
  readonly "2xx": number
  readonly statusCodeStats: Record<string, { count: number }>
}
interface AutocannonInstance extends PromiseLike<AutocannonResult> {
  stop(): void
}
type Autocannon = (options: AutocannonOptions) => AutocannonInstance
const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon

// ---------------------------------------------------------------------------------------------
// Settings

const seconds = envInt("BENCH_SECONDS", 10, 1)
const warmupSeconds = envInt("BENCH_WARMUP_SECONDS", 2, 0)
const connections = envInt("BENCH_CONNECTIONS", 50, 1)
const rounds = envInt("BENCH_ROUNDS", 1, 1)

const goalRps = 10_000
const goalRatio = 0.2
const email = "bench@example.com"

/** A hard bound on the whole script: startup, CLI, all runs, shutdown, with slack. */
const overallTimeoutMs = 120_000 + 3 * 60_000 + 30_000 + rounds * 2 * (seconds + warmupSeconds + 15) * 1000 + 30_000

const cores = availableParallelism()
const session = new Session("bench:me")
const log = session.log

// ---------------------------------------------------------------------------------------------
// The reference: a bare node:http server returning the same body.
//
// It runs as a child process, not in this process: autocannon's client runs on this process's
// event loop, and a server sharing that loop would be slowed by (and would slow) the load
// generator in a way burnbox, in its own process, is not. Both targets are thus separate
// processes competing with the same single-threaded generator.

const bareServerSource = `
const http = require("node:http")
const body = Buffer.from(process.env.BENCH_BODY, "utf8")
const server = http.createServer((req, res) => {
  res.writeHead(200, { "content-type": "application/json", "content-length": body.length })
  res.end(body)
})
server.keepAliveTimeout = 65000
server.listen(Number(process.env.BENCH_PORT), "127.0.0.1", () => process.stdout.write("listening\\n"))
process.on("SIGTERM", () => server.close(() => process.exit(0)).closeAllConnections())
`

const startBare = async (port: number, body: string): Promise<ChildProcess> => {
  const child = session.spawn("bare server", process.execPath, ["-e", bareServerSource], {
    env: { ...process.env, BENCH_BODY: body, BENCH_PORT: String(port) },
    stdio: ["ignore", "pipe", "inherit"]
  })
  await withTimeout(new Promise<void>((ok, fail) => {
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => chunk.includes("listening") && ok())
    child.once("exit", (code) => fail(new Error(`bare server exited during startup (code ${code})`)))
  }), 10_000, "bare server startup")
  return child
}

// ---------------------------------------------------------------------------------------------
// Load

type Target = "burnbox" | "bare"

interface Run {
  readonly target: Target
  readonly round: number
  readonly result: AutocannonResult
  readonly cpu: CpuShare
}

const load = async (target: Target, url: string, headers: Record<string, string>, duration: number): Promise<AutocannonResult> => {
  const instance = autocannon({ url, connections, duration, pipelining: 1, timeout: 10, headers, title: target })
  try {
    return await withTimeout(instance, (duration + 20) * 1000, `autocannon against ${target}`)
  } catch (error) {
    instance.stop()
    throw error
  }
}

const statusSummary = (result: AutocannonResult): string =>
  Object.entries(result.statusCodeStats).map(([code, { count }]) => `${code}:${count}`).join(" ") || "-"

const servedPerSecond = (result: AutocannonResult): number => result["2xx"] / Math.max(result.duration, 1e-9)

// ---------------------------------------------------------------------------------------------
// Main

const main = async (): Promise<number> => {
  const service = await Burnbox.create(session, { logName: "bench-me", command: "serve" })
  session.afterCleanup(() => service.summarizeLog())
  const [barePort] = (await listenerPorts(1)) as [number]
  const meUrl = `${service.baseUrl}/api/v1/me`
  const bareUrl = `http://127.0.0.1:${barePort}/api/v1/me`
  await service.start()
  const secret = await service.setupAccount(email, "read")
  const headers = { authorization: `Bearer ${secret}` }

  const check = await fetch(meUrl, { headers, signal: AbortSignal.timeout(10_000) })
  const body = await check.text()
  if (check.status !== 200) throw new Error(`GET /api/v1/me with the token answered ${check.status}: ${body}`)
  log(`GET /api/v1/me with the token: 200, ${Buffer.byteLength(body)} bytes, content-type ${check.headers.get("content-type")}`)

  const bare = await startBare(barePort, body)
  const bareCheck = await fetch(bareUrl, { signal: AbortSignal.timeout(10_000) })
  const bareBody = await bareCheck.text()
  if (bareCheck.status !== 200 || bareBody !== body) throw new Error("bare server does not return the same body")
  log(`bare node:http server (pid ${bare.pid}) on 127.0.0.1:${barePort} returns the identical body`)

  const targets: Record<Target, { url: string; headers: Record<string, string> }> = {
    burnbox: { url: meUrl, headers },
    bare: { url: bareUrl, headers: {} }
  }
  const loadBefore = loadavg()[0]!.toFixed(2)
  const runs: Array<Run> = []
  for (let round = 1; round <= rounds; round++) {
    const order: Array<Target> = round % 2 === 1 ? ["burnbox", "bare"] : ["bare", "burnbox"]
    for (const target of order) {
      session.checkInterrupted()
      const { url, headers: h } = targets[target]
      if (warmupSeconds > 0) {
        log(`round ${round}/${rounds}: ${target} warm-up ${warmupSeconds} s (not counted)`)
        await load(target, url, h, warmupSeconds)
      }
      log(`round ${round}/${rounds}: ${target} measured ${seconds} s, ${connections} connections`)
      const serverPid = target === "burnbox" ? service.pid : bare.pid
      const before = cpuSnapshot(serverPid)
      const result = await load(target, url, h, seconds)
      const cpu = cpuShare(before, cpuSnapshot(serverPid))
      runs.push({ target, round, result, cpu })
      if (target === "burnbox") service.checkAlive()
    }
  }
  const burnboxRss = rssOf(service.pid)

  // ---- report
  const header = ["target", "requests/s", "2xx/s", "p50 ms", "p99 ms", "non-2xx", "errors", "timeouts", "status codes", "cpu % gen", "server (node+pg)", "other"]
  const row = (label: string, r: AutocannonResult, cpu: CpuShare) => [
    label,
    fmt(r.requests.average),
    fmt(servedPerSecond(r)),
    fmt(r.latency.p50, 1),
    fmt(r.latency.p99, 1),
    fmt(r.non2xx),
    fmt(r.errors),
    fmt(r.timeouts),
    statusSummary(r),
    fmt(cpu.generator),
    serverCpuCell(cpu),
    fmt(cpu.other)
  ]
  const of = (target: Target) => runs.filter((r) => r.target === target).map((r) => r.result)
  const summary = {
    burnbox: {
      rps: median(of("burnbox").map((r) => r.requests.average)),
      served: median(of("burnbox").map(servedPerSecond)),
      p50: median(of("burnbox").map((r) => r.latency.p50)),
      p99: median(of("burnbox").map((r) => r.latency.p99)),
      non2xx: of("burnbox").reduce((n, r) => n + r.non2xx, 0),
      errors: of("burnbox").reduce((n, r) => n + r.errors + r.timeouts, 0)
    },
    bare: {
      rps: median(of("bare").map((r) => r.requests.average)),
      served: median(of("bare").map(servedPerSecond)),
      p50: median(of("bare").map((r) => r.latency.p50)),
      p99: median(of("bare").map((r) => r.latency.p99)),
      non2xx: of("bare").reduce((n, r) => n + r.non2xx, 0),
      errors: of("bare").reduce((n, r) => n + r.errors + r.timeouts, 0)
    }
  }
  const ratio = summary.burnbox.served / summary.bare.served
  const cpu = cpus()[0]?.model ?? "unknown CPU"

  const out: Array<string> = []
  out.push("")
  out.push(`GET /api/v1/me, bearer token, keep-alive: ${connections} connections, pipelining 1, ${warmupSeconds} s warm-up (discarded) + ${seconds} s measured per run, ${rounds} round(s)`)
  out.push(`order: ${rounds === 1 ? "burnbox first, then bare" : "alternating per round (burnbox,bare / bare,burnbox / ...); summary rows are medians"}; same ${Buffer.byteLength(body)}-byte JSON body`)
  out.push(`machine: ${cores} cores (os.availableParallelism()), ${cpu}, Node ${process.version}`)
  if (cores <= 2) {
    out.push(`note: only ${cores} cores. autocannon (one thread, in this process) competes for CPU with the server under test`)
    out.push(`      (and, for burnbox, with its PostgreSQL backends); absolute figures are lower than on a machine with spare cores.`)
  }
  out.push("")
  out.push(table(header, runs.map((r) => row(rounds === 1 ? r.target : `${r.target} #${r.round}`, r.result, r.cpu))))
  out.push("")
  out.push("requests/s = autocannon's mean of per-second samples (all responses); 2xx/s = 2xx responses / measured seconds.")
  out.push(`cpu % = share of one core during the measured run (${cores} cores = ${cores * 100} %): gen = autocannon (this process);`)
  out.push("      server = the target process with its descendants (burnbox: node + its embedded PostgreSQL); other = the rest of the machine.")
  out.push(`load average (1 min) before the runs: ${loadBefore}`)
  const perResponse = (target: Target) => median(of(target).map((r) => r.throughput.total / Math.max(r["2xx"], 1)))
  out.push(`bytes per response incl. headers: burnbox ${fmt(perResponse("burnbox"))}, bare ${fmt(perResponse("bare"))} (same body; burnbox adds rate-limit and other headers)`)
  out.push("")
  out.push(table(["summary", "2xx/s", "p50 ms", "p99 ms", "non-2xx", "errors+timeouts"], [
    ["burnbox", fmt(summary.burnbox.served), fmt(summary.burnbox.p50, 1), fmt(summary.burnbox.p99, 1), fmt(summary.burnbox.non2xx), fmt(summary.burnbox.errors)],
    ["bare node:http", fmt(summary.bare.served), fmt(summary.bare.p50, 1), fmt(summary.bare.p99, 1), fmt(summary.bare.non2xx), fmt(summary.bare.errors)]
  ]))
  out.push("")
  out.push(`ratio burnbox / bare (2xx/s): ${ratio.toFixed(3)}x`)
  const goal1 = summary.burnbox.served >= goalRps
  const goal2 = ratio >= goalRatio
  const clean = summary.burnbox.non2xx === 0 && summary.burnbox.errors === 0
  out.push(`goal >= ${fmt(goalRps)} served requests/s: ${goal1 ? "MET" : "NOT MET"} (${fmt(summary.burnbox.served)})`)
  out.push(`goal >= ${goalRatio}x bare:                 ${goal2 ? "MET" : "NOT MET"} (${ratio.toFixed(3)}x)`)
  out.push(`burnbox answered only 2xx, no errors:    ${clean ? "yes" : "NO (see non-2xx / errors above)"}`)
  out.push(`burnbox RSS after the load: ${burnboxRss}`)
  process.stdout.write(out.join("\n") + "\n")
  return 0
}

await session.run(overallTimeoutMs, main)
