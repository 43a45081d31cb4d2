/**
 * Every benchmark at its smallest setting, so that none of them rots: each runs as `./pnpmw
 * bench:*` runs it (its own service on a temporary data dir, its own ports), exits 0 and prints
 * its result table. The figures are not judged: on a shared machine they say nothing at this
 * size. Reference tools that are not installed (Postfix's smtp-source/smtp-sink, maildev) show
 * as unavailable with how to install them; they never fail a run.
 */
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { repositoryRoot } from "@burnbox/testkit"
import { afterAll, describe, expect, it } from "vitest"

interface Benchmark {
  /** The root package.json script that runs it. */
  readonly script: string
  readonly env: Record<string, string>
  readonly args?: ReadonlyArray<string>
  /** The first cells of its result table's header. */
  readonly table: RegExp
}

const benchmarks: ReadonlyArray<Benchmark> = [
  { script: "bench:me", env: { BENCH_SECONDS: "1", BENCH_WARMUP_SECONDS: "0", BENCH_CONNECTIONS: "2" }, table: /^\| summary +\| +2xx\/s \|/m },
  {
    script: "bench:smtp",
    env: {
      SMTP_SESSIONS: "2",
      SMTP_SECONDS: "1",
      SMTP_WARMUP_SECONDS: "0",
      SMTP_ACCOUNTS: "1",
      SMTP_ALIASES: "2",
      // Haraka to file + fsync stands for the three Haraka modes (one plugin), smtp-sink for the discarding references.
      SMTP_TARGETS: "sink,haraka-fsync,maildev,ingest,start",
      SMTP_READ_RATE: "5",
      SMTP_DISK_MESSAGES: "100",
      SMTP_DRAIN_SECONDS: "30",
      SMTP_SIZE: "1000",
      // No npm installs in a test: Haraka and maildev run where they are installed, else show as unavailable.
      SMTP_INSTALL: "0"
    },
    // A reference tool that is not installed shows as unavailable; the run does not fail.
    table: /^\| summary, msg\/s +\| +one alias: smtp-source -d \|[\s\S]*^\| maildev 2\.2\.1[^|]* +\| +(unavailable|[\d,]+) \|[\s\S]*^\| burnbox start \(durable\) +\| +(unavailable|[\d,]+) \|[\s\S]*^\| whole data dir, with pg_wal +\|/m
  },
  {
    script: "bench:hostile",
    env: { PIPELINE_RATE: "10", PIPELINE_SECONDS: "1", PIPELINE_LOW_RATE: "0", PIPELINE_WARMUP_SECONDS: "0", PIPELINE_CONNECTIONS: "2", PIPELINE_HOSTILE_PER_SECOND: "1", PIPELINE_DRAIN_SECONDS: "60" },
    table: /^\| ms from the 250 to \.\.\. +\| +messages \|/m
  },
  { script: "bench:wait", env: { WAIT_WAITERS: "2", WAIT_RATE: "5", WAIT_SECONDS: "1", WAIT_LOW_RATE: "0", WAIT_CONNECTIONS: "1" }, table: /^\| ms, per message +\| +n \|/m },
  {
    script: "bench:realtime",
    env: { REALTIME_SUBSCRIBERS: "1", REALTIME_ALIASES: "1", REALTIME_RATE: "5", REALTIME_SECONDS: "1", REALTIME_LOW_RATE: "0", REALTIME_CONNECTIONS: "1" },
    table: /^\| ms, per message +\| +n \|.*\n.*\n\| 5 msg\/s: 250 -> SSE event/m
  },
  {
    script: "bench:hub",
    env: { HUB_SECONDS: "1", HUB_RATE: "20", HUB_BURSTS: "1", HUB_BURST: "20", HUB_SUBSCRIBERS: "2" },
    table: /^\| ms, per update and subscriber +\| +n \|/m
  },
  { script: "bench:bigmail", env: { BIGMAIL_BYTES: "200000", BIGMAIL_KINDS: "text", BIGMAIL_CONCURRENCY: "1" }, table: /^\| reference: smtp-server alone, storing nothing +\| +bytes \|/m },
  { script: "crash:smtp", env: { CRASH_ROUNDS: "1", CRASH_AFTER_MS: "500", CRASH_CONNECTIONS: "2" }, table: /^\| +\| +round 1 \|/m },
  {
    script: "bench:list",
    env: { BENCH_MESSAGES: "1000", BENCH_ACCOUNTS: "10", BENCH_REQUESTS: "10", BENCH_CONCURRENCY: "1", BENCH_WHATIF: "0" },
    table: /^\| case +\| +p50 \|/m
  },
  {
    script: "bench:sharing",
    env: {
      BENCH_MESSAGES: "2000",
      BENCH_ACCOUNTS: "10",
      BENCH_REQUESTS: "5",
      BENCH_DEEP_PAGES: "2",
      BENCH_PLANS: "0",
      WAIT_ALIASES: "4",
      WAIT_LOW_RATE: "0",
      WAIT_RATE: "8",
      WAIT_SECONDS: "1",
      WAIT_CONNECTIONS: "1"
    },
    table: /^\| case +\| +reader \| +total \|[\s\S]*^\| ms, per message +\| +n \|/m
  },
  { script: "bench:webhooks", env: { BENCH_LATENCY_MESSAGES: "1", BENCH_RATE: "0", BENCH_EVENTS: "100" }, table: /^\| measure +\| +value \|/m },
  { script: "bench:queue", env: { BENCH_RATE: "5", BENCH_SECONDS: "1" }, table: /^\| queue +\| +p50 ms \|/m },
  { script: "bench:hop", env: { HOP_MESSAGES: "10" }, table: /^\| where the work runs +\| +p50 ms \|/m },
  {
    script: "bench:ci-flow",
    env: { CIFLOW_CONCURRENCY: "2", CIFLOW_SECONDS: "2", CIFLOW_WARMUP_SECONDS: "0" },
    // maildev that cannot be installed shows as unavailable; the run does not fail.
    table: /^\| flows \(claim, mail, wait, code, burn\) +\| +flows\/s \|.*\n.*\n\| 2 jobs: burnbox +\| +[\d.,]+ \|.*\n\| 2 jobs: maildev 2\.2\.1 +\| +(unavailable|[\d.,]+) \|/m
  },
  { script: "bench:html-limits", env: {}, args: ["nested at full depth"], table: /^shape \| MB \|/m },
  {
    script: "bench:export",
    env: { EXPORT_MESSAGES: "200", EXPORT_BIG_BYTES: "4194304", EXPORT_BIG_SIZE: "65536" },
    table: /^\| export +\| +messages \|/m
  },
  {
    script: "bench:ingest-cost",
    env: { COST_MESSAGES: "100", COST_SESSIONS: "2", COST_GENERATOR: "node", COST_BODIES: "4", COST_SEARCH: "code" },
    table: /^GET \/messages\?q=code&limit=50 10 times a second during the load: \d+ answers[^]*^\| statement +\| +calls \| +exec ms\/msg \|[^]*^\| relation +\| +B\/msg \| +x raw \|\n[^]*^\| message_search \(TOAST\) +\| +[\d,]+ \|[^]*^Columns of the load's rows, average stored bytes .*messages\.text_body [\d,]+/m
  },
  {
    script: "bench:read-under-load",
    env: { READ_ROUNDS: "1", READ_MESSAGES: "50", READ_SESSIONS: "2", READ_IDLE_SECONDS: "1", READ_SEED: "10" },
    table: /^\| median of 1 round\(s\) +\| +ingest msg\/s \|/m
  }
]

/** The command a root package.json script runs: `[ENV=value ...] node <file>`. */
const commandOf = (script: string) => {
  const scripts = (JSON.parse(readFileSync(join(repositoryRoot, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts
  const words = scripts[script]!.split(/\s+/)
  const env = Object.fromEntries(words.filter((w) => /^[A-Z_]+=/.test(w)).map((w) => w.split("=") as [string, string]))
  const file = words[words.indexOf("node") + 1]!
  return { env, file: join(repositoryRoot, file) }
}

// At most two at a time: each starts a service and its PostgreSQL, and a CI machine has two cores.
let running = 0
const queue: Array<() => void> = []
const slot = async () => {
  if (running >= 2) await new Promise<void>((resolve) => queue.push(resolve))
  running++
  return () => {
    running--
    queue.shift()?.()
  }
}

const logDir = mkdtempSync(join(tmpdir(), "burnbox-bench-test-"))
afterAll(() => rmSync(logDir, { recursive: true, force: true }))

describe.concurrent("every benchmark at its smallest setting", () => {
  for (const bench of benchmarks) {
    it(`${bench.script} exits 0 and prints its table`, async () => {
      const { env, file } = commandOf(bench.script)
      const release = await slot()
      const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        execFile(process.execPath, [file, ...(bench.args ?? [])], {
          cwd: repositoryRoot,
          // No waiting for other benchmarks (these runs overlap), logs in a folder of this test's.
          env: { ...process.env, ...env, ...bench.env, BENCH_QUIET_WAIT_SECONDS: "0", BENCH_LOG_DIR: logDir },
          timeout: 240_000,
          maxBuffer: 64 * 1024 * 1024
        }, (error, stdout, stderr) => resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr }))
      }).finally(release)
      expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0)
      expect(run.stdout).toMatch(bench.table)
    }, 360_000)
  }
})
