/**
 * Small helpers shared by the benchmarks (bench-*.ts, crash-smtp.ts): settings, timing,
 * statistics, table output and Linux /proc accounting (CPU shares and memory of a process
 * tree). Ports and child processes are the testkit's (ServiceProcess.ts).
 */
import { lstatSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { loadavg } from "node:os"

// ---------------------------------------------------------------------------------------------
// Settings and time

export const envInt = (name: string, fallback: number, min: number): number => {
  const raw = process.env[name]
  if (raw === undefined || raw === "") return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be an integer >= ${min}, got "${raw}"`)
  return value
}

export const sleep = (ms: number) => new Promise<void>((ok) => setTimeout(ok, ms))

/** Milliseconds since the epoch with sub-millisecond resolution (the machine clock). */
export const epochMs = (): number => performance.timeOrigin + performance.now()

export const withTimeout = <A>(promise: PromiseLike<A>, ms: number, what: string): Promise<A> =>
  new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`${what} did not finish within ${ms / 1000} s`)), ms)
    Promise.resolve(promise).then((value) => {
      clearTimeout(timer)
      ok(value)
    }, (error: unknown) => {
      clearTimeout(timer)
      fail(error)
    })
  })

/** Polls `check` every `everyMs` until it answers a value other than undefined, or fails after `ms`. */
export const waitFor = async <A>(check: () => Promise<A | undefined> | A | undefined, ms: number, what: string, everyMs = 100): Promise<A> => {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await check()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${ms / 1000} s`)
    await sleep(everyMs)
  }
}

// ---------------------------------------------------------------------------------------------
// Statistics and output

export const median = (values: ReadonlyArray<number>): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** Nearest-rank percentile (p in 0..100) of already sorted values. */
export const percentileSorted = (sorted: ReadonlyArray<number>, p: number): number => {
  if (sorted.length === 0) return Number.NaN
  const rank = Math.ceil((p / 100) * sorted.length)
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!
}

export interface Distribution {
  readonly count: number
  readonly min: number
  readonly p50: number
  readonly p90: number
  readonly p95: number
  readonly p99: number
  readonly max: number
  readonly mean: number
}

export const distribution = (values: ReadonlyArray<number>): Distribution => {
  const sorted = [...values].sort((a, b) => a - b)
  return {
    count: sorted.length,
    min: sorted[0] ?? Number.NaN,
    p50: percentileSorted(sorted, 50),
    p90: percentileSorted(sorted, 90),
    p95: percentileSorted(sorted, 95),
    p99: percentileSorted(sorted, 99),
    max: sorted[sorted.length - 1] ?? Number.NaN,
    mean: sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length)
  }
}

export const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const line = (cells: ReadonlyArray<string>) => "| " + cells.map((c, i) => i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)).join(" | ") + " |"
  const rule = "|" + widths.map((w, i) => "-".repeat(w + 1) + (i === 0 ? "-" : ":")).join("|") + "|"
  return [line(header), rule, ...rows.map(line)].join("\n")
}

export const fmt = (n: number, digits = 0) =>
  Number.isFinite(n) ? n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits }) : "-"

export const mib = (bytes: number, digits = 1) => `${fmt(bytes / 1_048_576, digits)} MiB`

export const loadAverage = () => loadavg().map((l) => l.toFixed(2)).join(" ")

// ---------------------------------------------------------------------------------------------
// Disk

/**
 * What a directory tree takes on disk: `allocated`, its files' blocks (as `du`), and `apparent`,
 * their sizes; paths under `skip` (absolute) are left out. Files that vanish meanwhile (a
 * database's temporary files) are skipped.
 */
export const diskUsage = (dir: string, skip: ReadonlyArray<string> = []): { allocated: number; apparent: number } => {
  let allocated = 0
  let apparent = 0
  const walk = (path: string) => {
    if (skip.includes(path)) return
    try {
      const stat = lstatSync(path)
      allocated += stat.blocks * 512
      if (stat.isFile()) apparent += stat.size
      if (stat.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name))
    } catch {
      // gone meanwhile
    }
  }
  walk(dir)
  return { allocated, apparent }
}

// ---------------------------------------------------------------------------------------------
// Memory (Linux /proc/<pid>/status)

export interface Memory {
  /** resident set size now, bytes */
  readonly rss: number
  /** peak resident set size (high-water mark), bytes */
  readonly hwm: number
}

export const memoryOf = (pid: number | undefined): Memory | undefined => {
  if (pid === undefined) return undefined
  try {
    const text = readFileSync(`/proc/${pid}/status`, "utf8")
    const kb = (key: string) => Number(/(\d+)\s*kB/.exec(text.split("\n").find((l) => l.startsWith(key)) ?? "")?.[1] ?? Number.NaN) * 1024
    return { rss: kb("VmRSS:"), hwm: kb("VmHWM:") }
  } catch {
    return undefined
  }
}

export const rssOf = (pid: number | undefined): string => {
  const memory = memoryOf(pid)
  return memory === undefined || !Number.isFinite(memory.rss) ? "?" : `${Math.round(memory.rss / 1_048_576)} MB`
}

// ---------------------------------------------------------------------------------------------
// CPU accounting (Linux /proc): how the cores were shared during a measured run, so a run on a
// busy shared machine is visible as such. Figures are in % of one core (2 cores = 200 %).

const ticksPerSecond = 100 // USER_HZ, 100 on Linux

interface ProcStat {
  readonly ppid: number
  readonly own: number // utime + stime
  readonly reaped: number // cutime + cstime: children that exited and were waited for
}

const procStat = (pid: number): ProcStat | undefined => {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8")
    const f = text.slice(text.lastIndexOf(")") + 2).split(" ").map(Number)
    return { ppid: f[1]!, own: f[11]! + f[12]!, reaped: f[13]! + f[14]! }
  } catch {
    return undefined
  }
}

const allProcStats = (): Map<number, ProcStat> => {
  const all = new Map<number, ProcStat>()
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    const stat = procStat(Number(name))
    if (stat !== undefined) all.set(Number(name), stat)
  }
  return all
}

/** CPU ticks of a process, and of it with all its descendants (burnbox: its PostgreSQL and backends). */
const treeTicks = (rootPids: ReadonlyArray<number>): { root: number; tree: number } => {
  if (rootPids.length === 0) return { root: 0, tree: 0 }
  const all = allProcStats()
  let total = 0
  let root = 0
  const seen = new Set<number>()
  const queue = [...rootPids]
  while (queue.length > 0) {
    const pid = queue.pop()!
    const stat = all.get(pid)
    if (stat === undefined || seen.has(pid)) continue
    seen.add(pid)
    total += stat.own + stat.reaped
    for (const [child, s] of all) if (s.ppid === pid) queue.push(child)
  }
  for (const pid of rootPids) root += all.get(pid)?.own ?? 0
  return { root, tree: total }
}

const machineBusyTicks = (): number => {
  const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number)
  const total = fields.slice(0, 8).reduce((a, b) => a + b, 0) // user..steal
  return total - fields[3]! - fields[4]! // minus idle and iowait
}

export interface CpuShare {
  /** this process (the load generator when it runs in-process) */
  readonly generator: number
  /** the server's process with all its descendants */
  readonly server: number
  /** the server's own process, without descendants */
  readonly serverProcess: number
  /** external generator processes (e.g. smtp-source), with descendants */
  readonly external: number
  readonly other: number
}

export interface CpuSnapshot {
  readonly at: number
  readonly machine: number
  readonly self: number
  /** CPU of this process's children that exited and were reaped (e.g. a finished smtp-source) */
  readonly reaped: number
  readonly server: { root: number; tree: number }
  readonly external: number
}

/**
 * `serverPid`: the process under test (its descendants are counted with it); `externalPids`:
 * generator processes outside this one. Call before and after a run, then `cpuShare`.
 */
export const cpuSnapshot = (serverPid: number | undefined, externalPids: ReadonlyArray<number> = []): CpuSnapshot => ({
  at: performance.now(),
  machine: machineBusyTicks(),
  self: procStat(process.pid)?.own ?? 0,
  reaped: procStat(process.pid)?.reaped ?? 0,
  server: treeTicks(serverPid === undefined ? [] : [serverPid]),
  external: treeTicks(externalPids).tree
})

export const cpuShare = (before: CpuSnapshot, after: CpuSnapshot): CpuShare => {
  const secs = (after.at - before.at) / 1000
  const pct = (ticks: number) => (100 * ticks) / ticksPerSecond / secs
  const generator = pct(after.self - before.self)
  const server = pct(after.server.tree - before.server.tree)
  const serverProcess = pct(after.server.root - before.server.root)
  // An external child that exited between the snapshots is missing from `after.external` but its
  // whole lifetime is in `after.reaped`; its share before the run is in `before.external`.
  const external = Math.max(0, pct(after.external + after.reaped - before.external - before.reaped))
  return {
    generator,
    server,
    serverProcess,
    external,
    other: Math.max(0, pct(after.machine - before.machine) - generator - server - external)
  }
}

/** "server (node+pg)" cell: the tree total, split into the server process and its children. */
export const serverCpuCell = (cpu: CpuShare): string =>
  cpu.server - cpu.serverProcess >= 0.5
    ? `${fmt(cpu.server)} (${fmt(cpu.serverProcess)}+${fmt(cpu.server - cpu.serverProcess)})`
    : fmt(cpu.server)
