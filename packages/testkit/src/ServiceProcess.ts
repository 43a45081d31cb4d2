/**
 * The real `burnbox` program as a child process (`burnbox start`, `serve`, `ingest` or
 * `worker`), for tests and benchmarks that need the service as a user runs it: on its own data
 * dir (its own embedded PostgreSQL) or DATABASE_URL, on free ports, bound to 127.0.0.1. Started
 * until its listeners answer, stopped by pid (SIGINT, so it stops its PostgreSQL cleanly), or
 * crashed (SIGKILL to it and every process below it).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { createServer } from "node:net"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { clusterLocation } from "@burnbox/store"
import { SmtpClient } from "./SmtpClient.ts"

/** This repository (the tree whose `packages/cli/bin/burnbox.mjs` runs by default). */
export const repositoryRoot = fileURLToPath(new URL("../../../", import.meta.url))

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export const exited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null

/** Resolves true when the child has exited, or false after `ms`. */
export const waitForExit = (child: ChildProcess, ms: number): Promise<boolean> =>
  exited(child) ? Promise.resolve(true) : new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms)
    child.once("exit", () => {
      clearTimeout(timer)
      resolve(true)
    })
  })

/** True while a process with this pid exists, a zombie included. */
const exists = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** True while a process with this pid exists (and is not a zombie). */
export const pidAlive = (pid: number): boolean => {
  if (!exists(pid)) return false
  try {
    const state = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0]
    return state !== "Z" && state !== "X"
  } catch {
    return true // no /proc: trust kill(0)
  }
}

/** The pid and all its descendants' pids (Linux /proc), the root first. */
export const processTree = (rootPid: number): Array<number> => {
  const parents = new Map<number, number>()
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      const text = readFileSync(`/proc/${name}/stat`, "utf8")
      parents.set(Number(name), Number(text.slice(text.lastIndexOf(")") + 2).split(" ")[1]))
    } catch {
      // gone meanwhile
    }
  }
  const out: Array<number> = []
  const queue = [rootPid]
  while (queue.length > 0) {
    const pid = queue.shift()!
    if (!parents.has(pid) || out.includes(pid)) continue
    out.push(pid)
    for (const [child, parent] of parents) if (parent === pid) queue.push(child)
  }
  return out
}

/**
 * `count` distinct free ports for listeners, below Linux's ephemeral range (32768+), where an
 * embedded PostgreSQL's own port (one the system hands out) can never land on them meanwhile.
 */
export const listenerPorts = async (count: number): Promise<Array<number>> => {
  const ports: Array<number> = []
  while (ports.length < count) {
    const port = 20_000 + Math.floor(Math.random() * 12_000)
    if (ports.includes(port)) continue
    const free = await new Promise<boolean>((resolve) => {
      const server = createServer()
      server.once("error", () => resolve(false))
      server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
    })
    if (free) ports.push(port)
  }
  return ports
}

export interface CliRun {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

export interface ServiceProcessOptions {
  /** The burnbox tree to run (default this repository); also the working directory. */
  readonly root?: string
  /** BURNBOX_DATA_DIR; without it burnbox uses `<root>/.burnbox`. */
  readonly dataDir?: string
  /** Default: free listener ports. */
  readonly httpPort?: number
  readonly smtpPort?: number
  /** The environment below the service's own settings (default: this process's, without DATABASE_URL). */
  readonly baseEnv?: NodeJS.ProcessEnv
  /** Settings on top (e.g. BURNBOX_MAIL_WORK_THREADS). */
  readonly env?: Record<string, string>
  /** Extra node flags for the service, e.g. `--cpu-prof`. */
  readonly nodeArgs?: ReadonlyArray<string>
  readonly startupTimeoutMs?: number
  /** Every chunk the service (and each CLI run) writes to stdout or stderr, prefixed with its name. */
  readonly onOutput?: (text: string) => void
  /** Notes of what happens: starting, answering, stopping, an exit nobody asked for. */
  readonly log?: (line: string) => void
}

export class ServiceProcess {
  readonly root: string
  readonly dataDir: string
  readonly httpPort: number
  readonly smtpPort: number
  readonly env: NodeJS.ProcessEnv
  readonly startupTimeoutMs: number
  child: ChildProcess | undefined
  command = "start"
  /** Set when the service exited without `stop` or `crash`. */
  unexpectedExit: string | undefined
  private expectingExit = false
  private readonly options: ServiceProcessOptions

  private constructor(options: ServiceProcessOptions, httpPort: number, smtpPort: number) {
    this.options = options
    this.root = options.root ?? repositoryRoot
    this.dataDir = options.dataDir ?? join(this.root, ".burnbox")
    this.httpPort = httpPort
    this.smtpPort = smtpPort
    this.startupTimeoutMs = options.startupTimeoutMs ?? 120_000
    const base: NodeJS.ProcessEnv = { ...(options.baseEnv ?? process.env) }
    if (options.baseEnv === undefined) delete base["DATABASE_URL"] // its own embedded PostgreSQL
    this.env = {
      ...base,
      ...options.env,
      ...(options.dataDir === undefined ? {} : { BURNBOX_DATA_DIR: options.dataDir }),
      BURNBOX_HTTP_PORT: String(httpPort),
      BURNBOX_SMTP_PORT: String(smtpPort),
      BURNBOX_HOST: "127.0.0.1"
    }
  }

  /** Allocates the ports; nothing runs yet. */
  static async create(options: ServiceProcessOptions = {}): Promise<ServiceProcess> {
    const [httpPort, smtpPort] = await listenerPorts(2) as [number, number]
    return new ServiceProcess(options, options.httpPort ?? httpPort, options.smtpPort ?? smtpPort)
  }

  /** Creates and starts `burnbox <command>`. */
  static async start(options: ServiceProcessOptions = {}, command = "start"): Promise<ServiceProcess> {
    const service = await ServiceProcess.create(options)
    await service.start(command)
    return service
  }

  private get bin() {
    return join(this.root, "packages/cli/bin/burnbox.mjs")
  }

  private log(line: string) {
    this.options.log?.(line)
  }

  private output(text: string) {
    this.options.onOutput?.(text)
  }

  get baseUrl() {
    return `http://127.0.0.1:${this.httpPort}`
  }

  get pid(): number | undefined {
    return this.child !== undefined && !exited(this.child) ? this.child.pid : undefined
  }

  /**
   * Starts `burnbox <command>` and waits until its listeners answer: the API (`start`, `serve`),
   * the SMTP greeting (`start`, `ingest`), the "worker started" line (`worker`).
   */
  async start(command = this.command): Promise<void> {
    if (this.pid !== undefined) throw new Error("burnbox is already running")
    this.command = command
    const started = Date.now()
    this.log(`starting burnbox ${command} (HTTP 127.0.0.1:${this.httpPort}, SMTP 127.0.0.1:${this.smtpPort}, data ${this.dataDir})`)
    const child = spawn(process.execPath, [...(this.options.nodeArgs ?? []), this.bin, command], { cwd: this.root, env: this.env, stdio: ["ignore", "pipe", "pipe"] })
    this.child = child
    const seen = { workerStarted: false }
    child.stdout!.on("data", (chunk: Buffer) => this.output(`[${command} stdout] ${chunk.toString("utf8")}`))
    child.stderr!.on("data", (chunk: Buffer) => {
      const text = chunk.toString("utf8")
      if (text.includes("worker started")) seen.workerStarted = true
      this.output(`[${command} stderr] ${text}`)
    })
    this.expectingExit = false
    child.once("exit", (code, signal) => {
      this.output(`[${command}] exited code=${code} signal=${signal}\n`)
      if (!this.expectingExit) {
        this.unexpectedExit = `burnbox ${command} (pid ${child.pid}) exited on its own at ${new Date().toISOString()} (code ${code}, signal ${signal}); ` +
          "code 130 means it received SIGINT or SIGTERM from outside"
        this.log(this.unexpectedExit)
      }
    })
    try {
      await this.untilAnswering(child, command, seen)
    } catch (error) {
      await this.stop() // a service that did not come up is not left running
      throw error
    }
    this.log(`burnbox (pid ${child.pid}) answers after ${((Date.now() - started) / 1000).toFixed(1)} s`)
  }

  private async untilAnswering(child: ChildProcess, command: string, seen: { readonly workerStarted: boolean }) {
    const deadline = Date.now() + this.startupTimeoutMs
    const alive = () => {
      if (exited(child)) throw new Error(`burnbox ${command} exited during startup (code ${child.exitCode}, signal ${child.signalCode})`)
      if (Date.now() > deadline) throw new Error(`burnbox ${command} did not start within ${this.startupTimeoutMs / 1000} s`)
    }
    const serves = command === "start" || command === "serve"
    const ingests = command === "start" || command === "ingest"
    for (let answered = !serves; !answered;) {
      alive()
      answered = await fetch(`${this.baseUrl}/api/v1/me`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.arrayBuffer().then(() => true), () => false)
      if (!answered) await sleep(200)
    }
    for (let started = command !== "worker"; !started; started = seen.workerStarted) {
      alive()
      await sleep(100)
    }
    for (let greeted = !ingests; !greeted;) {
      alive()
      greeted = await SmtpClient.greets(this.smtpPort)
      if (!greeted) await sleep(200)
    }
  }

  /**
   * Graceful stop: SIGINT lets burnbox close its scopes, which stops its PostgreSQL; SIGKILL after
   * 30 s; then, only if burnbox died without stopping it, the postmaster it started. Answers
   * burnbox's exit code.
   */
  async stop(): Promise<number | null> {
    const child = this.child
    this.expectingExit = true
    if (child !== undefined && !exited(child)) {
      this.log(`stopping burnbox (pid ${child.pid}) with SIGINT`)
      child.kill("SIGINT")
      if (!(await waitForExit(child, 30_000))) {
        this.log(`burnbox (pid ${child.pid}) did not exit within 30 s; sending SIGKILL`)
        child.kill("SIGKILL")
        await waitForExit(child, 5_000)
      }
    }
    const orphan = this.postmasterPid()
    if (orphan !== undefined) {
      this.log(`embedded PostgreSQL (pid ${orphan}) still running after burnbox exited; sending SIGINT`)
      try {
        process.kill(orphan, "SIGINT")
        for (let i = 0; i < 100 && this.postmasterPid() !== undefined; i++) await sleep(100)
        const stubborn = this.postmasterPid()
        if (stubborn !== undefined) process.kill(stubborn, "SIGKILL")
      } catch {
        // already gone
      }
    }
    return child?.exitCode ?? null
  }

  /**
   * A crash: SIGKILL, at once, to the node process and every process below it (the embedded
   * PostgreSQL postmaster and its backends), so nothing finishes or shuts down cleanly. (A
   * SIGKILL of node alone would leave PostgreSQL running, and a postmaster killed alone leaves
   * backends running until they notice.) Answers the pids killed.
   */
  async crash(): Promise<Array<number>> {
    const child = this.child
    if (child === undefined || child.pid === undefined || exited(child)) throw new Error("burnbox is not running")
    this.expectingExit = true
    const pids = processTree(child.pid)
    const postmaster = this.postmasterPid()
    if (postmaster !== undefined && !pids.includes(postmaster)) pids.push(...processTree(postmaster))
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL")
      } catch {
        // gone already
      }
    }
    await waitForExit(child, 10_000)
    for (let i = 0; i < 100 && pids.some(pidAlive); i++) await sleep(100)
    const survivors = pids.filter(pidAlive)
    if (survivors.length > 0) throw new Error(`processes survived SIGKILL: ${survivors.join(", ")}`)
    // A killed process stays a zombie until its new parent reaps it, and meanwhile kill(pid, 0)
    // still finds it: a start at once would take the dead postmaster for a running one.
    for (let i = 0; i < 100 && pids.some(exists); i++) await sleep(100)
    return pids
  }

  /** Throws when the service has exited on its own (e.g. killed by something else on the machine). */
  checkAlive() {
    if (this.unexpectedExit !== undefined) throw new Error(this.unexpectedExit)
  }

  /** The embedded cluster's postmaster.pid: in the data dir, or as root under /var/lib/burnbox/clusters. */
  private postmasterPidFile(): string {
    return join(clusterLocation(this.dataDir, { create: false }).pgdata, "postmaster.pid")
  }

  /** The embedded PostgreSQL postmaster's pid, if it is running. */
  postmasterPid(): number | undefined {
    try {
      const pid = Number(readFileSync(this.postmasterPidFile(), "utf8").split("\n")[0])
      return Number.isInteger(pid) && pid > 0 && pidAlive(pid) ? pid : undefined
    } catch {
      return undefined
    }
  }

  /** How to reach the embedded cluster over TCP (database and user burnbox), while it runs. */
  embeddedDatabase(): { readonly host: string; readonly port: number; readonly user: string; readonly password: string; readonly database: string } {
    const port = Number(readFileSync(this.postmasterPidFile(), "utf8").split("\n")[3])
    const password = readFileSync(join(this.dataDir, "postgres.password"), "utf8").trim()
    return { host: "127.0.0.1", port, user: "burnbox", password, database: "burnbox" }
  }

  /** Runs `burnbox <args>` with the service's settings (the operator commands attach to its database) to its end. */
  cli(args: ReadonlyArray<string>, timeoutMs = 60_000): Promise<CliRun> {
    const name = `cli ${args.slice(0, 3).join(" ")}`
    return new Promise((resolve) => {
      execFile(process.execPath, [this.bin, ...args], { cwd: this.root, env: this.env, timeout: timeoutMs, killSignal: "SIGKILL" }, (error, stdout, stderr) => {
        if (stderr !== "") this.output(`[${name}] ${stderr}`)
        resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr })
      })
    })
  }
}
