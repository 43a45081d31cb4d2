/**
 * Helpers of bench-list.ts and bench-webhooks.ts: waiting until no other benchmark runs on this
 * shared machine (so one run does not distort another's figures), and timing HTTP requests
 * sequentially or with a fixed number of concurrent clients.
 */
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { availableParallelism } from "node:os"
import { processTree } from "@burnbox/testkit"
import { distribution, type Distribution, fmt, loadAverage, sleep } from "./common.ts"

/** This process's ancestors (the shell and pnpm that started it), from /proc. */
const ancestors = (): Set<number> => {
  const out = new Set<number>()
  let pid = process.pid
  for (let i = 0; i < 64 && pid > 1; i++) {
    try {
      const text = readFileSync(`/proc/${pid}/stat`, "utf8")
      pid = Number(text.slice(text.lastIndexOf(")") + 2).split(" ")[1])
      out.add(pid)
    } catch {
      break
    }
  }
  return out
}

/**
 * Other benchmark processes now (`pgrep -af "bench-|crash-smtp"`), without this process, its
 * ancestors and its descendants (the service under test and its PostgreSQL), nor `extraOwn`
 * trees (e.g. a postmaster this script's service started that is not below it).
 */
export const otherBenchmarks = (extraOwn: ReadonlyArray<number> = []): Array<string> => {
  let text = ""
  try {
    text = execFileSync("pgrep", ["-af", "bench-|crash-smtp"], { encoding: "utf8", timeout: 5_000 })
  } catch (error) {
    // pgrep exits 1 when nothing matches
    text = (error as { stdout?: string }).stdout ?? ""
  }
  const own = new Set<number>([process.pid, ...ancestors(), ...processTree(process.pid), ...extraOwn.flatMap((p) => processTree(p))])
  return text.split("\n").filter((l) => l.trim() !== "").filter((line) => !own.has(Number(line.split(" ")[0])))
}

/**
 * Before a measured run: prints `uptime`'s load and waits (polling every `everyMs`, at most
 * `maxWaitMs`) while another benchmark runs. Answers a one-line note for the report.
 */
export const waitForQuietMachine = async (
  log: (line: string) => void,
  what: string,
  options: { readonly maxWaitMs?: number; readonly everyMs?: number; readonly own?: () => ReadonlyArray<number> } = {}
): Promise<string> => {
  // BENCH_QUIET_WAIT_SECONDS: when runs are already serialised (e.g. under `flock`), a short wait
  // keeps a stray process of someone else's from holding the lock for 15 minutes.
  const fromEnv = Number(process.env["BENCH_QUIET_WAIT_SECONDS"])
  const maxWaitMs = options.maxWaitMs ?? (Number.isFinite(fromEnv) && fromEnv >= 0 ? fromEnv * 1000 : 15 * 60_000)
  const everyMs = options.everyMs ?? 5_000
  const started = Date.now()
  let others = otherBenchmarks(options.own?.() ?? [])
  if (others.length > 0) {
    log(`before ${what}: another benchmark is running; waiting (at most ${maxWaitMs / 1000} s):`)
    for (const l of others.slice(0, 5)) log(`  ${l.slice(0, 160)}`)
  }
  while (others.length > 0 && Date.now() - started < maxWaitMs) {
    await sleep(everyMs)
    others = otherBenchmarks(options.own?.() ?? [])
  }
  const waited = (Date.now() - started) / 1000
  const note = others.length > 0
    ? `other benchmarks still running after waiting ${fmt(waited)} s (${others.length}); figures may be distorted`
    : `no other benchmark running${waited >= 1 ? ` (waited ${fmt(waited)} s)` : ""}`
  const line = `before ${what}: load average ${loadAverage()} on ${availableParallelism()} cores; ${note}`
  log(line)
  return line
}

// ---------------------------------------------------------------------------------------------
// Timing requests

export interface Timed {
  readonly latency: Distribution
  /** requests per second over the whole run */
  readonly perSecond: number
  readonly count: number
  readonly failures: number
  readonly firstFailure: string | undefined
}

/**
 * Runs `request(i)` for i in 0..count-1 with `concurrency` clients (1 = strictly sequential).
 * `request` answers its own latency in ms (so checking a response can stay outside the timed
 * part), or a string describing a failure (throwing counts as a failure too).
 */
export const timeRequests = async (
  count: number,
  concurrency: number,
  request: (i: number) => Promise<number | string>,
  deadline: number
): Promise<Timed> => {
  const samples: Array<number> = []
  let next = 0
  let failures = 0
  let firstFailure: string | undefined
  const started = performance.now()
  const client = async () => {
    for (;;) {
      const i = next++
      if (i >= count || Date.now() > deadline) return
      let outcome: number | string
      try {
        outcome = await request(i)
      } catch (error) {
        outcome = error instanceof Error ? error.message : String(error)
      }
      if (typeof outcome === "string") {
        failures++
        firstFailure ??= outcome
      } else samples.push(outcome)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, client))
  const seconds = (performance.now() - started) / 1000
  return { latency: distribution(samples), perSecond: samples.length / seconds, count: samples.length, failures, firstFailure }
}

export const ms = (n: number, digits = 1) => fmt(n, digits)

/** After a measured run: a note when another benchmark started meanwhile (the figures may be distorted). */
export const interferenceNote = (what: string, own: ReadonlyArray<number> = []): string | undefined => {
  const others = otherBenchmarks(own)
  return others.length === 0
    ? undefined
    : `WARNING: another benchmark was running at the end of ${what} (${others.length} processes, e.g. ${others[0]!.slice(0, 100)}); its figures may be distorted`
}
