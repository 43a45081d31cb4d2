/**
 * The real burnbox service as a child process for the benchmark scripts, and the bookkeeping
 * that stops everything a script started, by pid, exactly once, also on failure, timeout or
 * Ctrl-C.
 *
 * - `Session`: the script's run: temp dirs, tracked child processes, a watchdog, signal handlers.
 * - `Burnbox`: `node packages/cli/src/main.ts <start|serve|...>` on a temporary data dir (its own
 *   embedded PostgreSQL), on free ports, bound to 127.0.0.1; the admin CLI; the HTTP API; a
 *   direct PostgreSQL client (pg, as the store package depends on it) for counting.
 */
import { type ChildProcess, execFileSync, spawn, type SpawnOptions } from "node:child_process"
import { createWriteStream, mkdtempSync, readFileSync, rmSync, type WriteStream } from "node:fs"
import { createRequire } from "node:module"
import { connect } from "node:net"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { clusterLocation, removeCluster } from "@burnbox/store"
import { exited, freePorts, pidAlive, processTree, sleep, waitForExit } from "./common.ts"

/**
 * The burnbox tree whose service is measured: this repository, or BENCH_BURNBOX_ROOT (e.g. a
 * snapshot of a commit, when others are editing the working tree:
 * `git archive HEAD | tar -x -C /tmp/snap`, then link /tmp/snap/node_modules to this repo's and
 * copy each packages/<name>/node_modules, whose links are relative).
 */
export const root = process.env["BENCH_BURNBOX_ROOT"] ?? resolve(import.meta.dirname, "..", "..")
export const cliMain = join(root, "packages/cli/src/main.ts")
/**
 * Which code the service runs: the tree, and its commit (from a `.commit` file a snapshot may
 * carry, else git), noting uncommitted changes under packages/ in a working tree.
 */
export const serviceSource = (): string => {
  try {
    return `${root} (snapshot of ${readFileSync(join(root, ".commit"), "utf8").trim()})`
  } catch {
    // not a snapshot
  }
  try {
    const git = (...args: Array<string>) => execFileSync("git", ["-C", root, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()
    const changed = git("status", "--porcelain", "--", "packages").split("\n").filter((l) => l !== "").length
    return `${root} (commit ${git("rev-parse", "--short", "HEAD")}${changed > 0 ? `, ${changed} uncommitted change(s) under packages/` : ""})`
  } catch {
    return root
  }
}

/** The real Node 24 binary, not the node_modules/.bin/node shell wrapper: its pid is the service's. */
export const node = process.execPath

// ---------------------------------------------------------------------------------------------
// Session

export class Session {
  readonly name: string
  readonly stamp = new Date().toISOString().replace(/[:.]/g, "-")
  readonly logDir = process.env["BENCH_LOG_DIR"] ?? tmpdir()
  private readonly children: Array<{ child: ChildProcess; name: string; signal: NodeJS.Signals; timeoutMs: number }> = []
  private readonly dirs: Array<string> = []
  private readonly finalizers: Array<() => Promise<void> | void> = []
  private readonly epilogues: Array<() => ReadonlyArray<string>> = []
  private cleanupPromise: Promise<void> | undefined
  exiting = false

  constructor(name: string) {
    this.name = name
  }

  readonly log = (line: string) => process.stderr.write(`[${this.name}] ${line}\n`)

  /** A temporary directory removed at cleanup (kept, and named in the log, when `keep`). */
  tempDir(prefix: string, keep = false): string {
    const dir = mkdtempSync(join(tmpdir(), prefix))
    if (keep) this.log(`keeping ${dir} after the run`)
    else this.dirs.push(dir)
    return dir
  }

  /** Runs at cleanup, before children are stopped (last registered first). */
  onCleanup(finalizer: () => Promise<void> | void) {
    this.finalizers.push(finalizer)
  }

  /** Spawns a child that cleanup stops with `signal` (then SIGKILL after `timeoutMs`). */
  spawn(name: string, command: string, args: ReadonlyArray<string>, options: SpawnOptions, signal: NodeJS.Signals = "SIGTERM", timeoutMs = 10_000): ChildProcess {
    const child = spawn(command, args, options)
    this.children.push({ child, name, signal, timeoutMs })
    child.on("error", (error) => this.log(`${name}: ${error.message}`))
    return child
  }

  async stopChild(child: ChildProcess | undefined, name: string, signal: NodeJS.Signals, timeoutMs = 10_000): Promise<void> {
    if (child === undefined || child.pid === undefined || exited(child)) return
    this.log(`stopping ${name} (pid ${child.pid}) with ${signal}`)
    child.kill(signal)
    if (await waitForExit(child, timeoutMs)) return
    this.log(`${name} (pid ${child.pid}) did not exit within ${timeoutMs / 1000} s; sending SIGKILL`)
    child.kill("SIGKILL")
    await waitForExit(child, 5_000)
  }

  /** Lines printed to stdout after cleanup (e.g. a summary of a service's log), also after a failure. */
  afterCleanup(epilogue: () => ReadonlyArray<string>) {
    this.epilogues.push(epilogue)
  }

  cleanup(): Promise<void> {
    return this.cleanupPromise ??= (async () => {
      for (const finalizer of this.finalizers.toReversed()) {
        try {
          await finalizer()
        } catch (error) {
          this.log(`cleanup: ${error instanceof Error ? error.message : String(error)}`)
        }
      }
      for (const { child, name, signal, timeoutMs } of this.children.toReversed()) {
        await this.stopChild(child, name, signal, timeoutMs)
      }
      for (const dir of this.dirs) {
        rmSync(dir, { recursive: true, force: true })
        this.log(`removed ${dir}`)
      }
      for (const epilogue of this.epilogues) {
        try {
          for (const line of epilogue()) process.stdout.write(line + "\n")
        } catch {
          // a report line is not worth failing cleanup
        }
      }
    })()
  }

  /**
   * Runs `main` with a watchdog of `overallTimeoutMs` and Ctrl-C handling, cleans up, then exits
   * the process with main's code (1 on failure).
   */
  async run(overallTimeoutMs: number, main: () => Promise<number>): Promise<void> {
    const abort = (code: number, why: string) => {
      if (this.exiting) return
      this.exiting = true
      this.log(why)
      const hardStop = setTimeout(() => process.exit(code), 60_000)
      hardStop.unref()
      void this.cleanup().finally(() => process.exit(code))
    }
    process.once("SIGINT", () => abort(130, "interrupted; cleaning up"))
    process.once("SIGTERM", () => abort(143, "terminated; cleaning up"))
    const watchdog = setTimeout(() => abort(1, `timed out after ${Math.round(overallTimeoutMs / 1000)} s; cleaning up`), overallTimeoutMs)
    watchdog.unref()
    let code = 1
    try {
      code = await main()
    } catch (error) {
      this.log(`failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}`)
      code = 1
    }
    if (this.exiting) return // abort() owns the exit
    clearTimeout(watchdog)
    await this.cleanup()
    process.exit(code)
  }

  /** Throws when the run was interrupted, so long loops stop early. */
  checkInterrupted() {
    if (this.exiting) throw new Error("interrupted")
  }
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL client (the `pg` package the store depends on; described here, not imported as types)

export interface PgResult<Row> {
  readonly rows: Array<Row>
  readonly rowCount: number | null
}
export interface PgNotification {
  readonly channel: string
  readonly payload?: string | undefined
}
export interface PgClient {
  connect(): Promise<void>
  query<Row = Record<string, unknown>>(text: string, values?: ReadonlyArray<unknown>): Promise<PgResult<Row>>
  end(): Promise<void>
  on(event: "notification", listener: (message: PgNotification) => void): this
  on(event: "error", listener: (error: Error) => void): this
}
interface PgModule {
  Client: new (config: Record<string, unknown>) => PgClient
}
const pg = (): PgModule => createRequire(join(root, "packages/store/package.json"))("pg") as PgModule

// ---------------------------------------------------------------------------------------------
// The service

export interface BurnboxOptions {
  /** `start` (API, SMTP ingest and worker in one process) by default. */
  readonly command?: string
  /** A name for the log file, e.g. "bench-smtp". */
  readonly logName: string
  readonly startupTimeoutMs?: number
  readonly extraEnv?: Record<string, string>
  /** Keep the data dir (its embedded PostgreSQL) after the run, for looking at it later. */
  readonly keepDataDir?: boolean
}

export interface ApiResponse {
  readonly status: number
  readonly body: unknown
  readonly text: string
}

export class Burnbox {
  readonly session: Session
  readonly dataDir: string
  readonly httpPort: number
  readonly smtpPort: number
  readonly env: NodeJS.ProcessEnv
  readonly logPath: string
  command: string
  readonly defaultCommand: string
  readonly startupTimeoutMs: number
  child: ChildProcess | undefined
  /** Set when the service exited without this script stopping or crashing it. */
  unexpectedExit: string | undefined
  private expectingExit = false
  private logStream: WriteStream | undefined
  private readonly clients: Array<PgClient> = []

  private constructor(session: Session, options: BurnboxOptions, dataDir: string, httpPort: number, smtpPort: number) {
    this.session = session
    this.dataDir = dataDir
    this.httpPort = httpPort
    this.smtpPort = smtpPort
    this.defaultCommand = options.command ?? "start"
    this.command = this.defaultCommand
    this.startupTimeoutMs = options.startupTimeoutMs ?? 120_000
    this.logPath = join(session.logDir, `burnbox-${options.logName}-${session.stamp}.log`)
    const env: NodeJS.ProcessEnv = { ...process.env }
    delete env["DATABASE_URL"] // burnbox starts (and the CLI attaches to) its own embedded PostgreSQL
    this.env = {
      ...env,
      ...options.extraEnv,
      BURNBOX_DATA_DIR: dataDir,
      BURNBOX_HTTP_PORT: String(httpPort),
      BURNBOX_SMTP_PORT: String(smtpPort),
      BURNBOX_HOST: "127.0.0.1"
    }
  }

  /** Allocates a data dir and ports; registers the service's cleanup with the session. */
  static async create(session: Session, options: BurnboxOptions): Promise<Burnbox> {
    const dataDir = session.tempDir(`burnbox-${options.logName}-`, options.keepDataDir === true)
    const [httpPort, smtpPort] = (await freePorts(2)) as [number, number]
    const service = new Burnbox(session, options, dataDir, httpPort, smtpPort)
    service.logStream = createWriteStream(service.logPath, { flags: "a" })
    // Registered after the temp dir, so it runs before the dir is removed (finalizers run first).
    session.onCleanup(async () => {
      await Promise.all(service.clients.splice(0).map((c) => c.end().catch(() => undefined)))
      await service.stop()
      await new Promise<void>((ok) => service.logStream === undefined || service.logStream.writableEnded ? ok() : service.logStream.end(() => ok()))
      // As root the cluster lives outside the data dir (/var/lib/burnbox/clusters): it goes with it.
      if (options.keepDataDir !== true) removeCluster(dataDir)
    })
    return service
  }

  get baseUrl() {
    return `http://127.0.0.1:${this.httpPort}`
  }

  get pid(): number | undefined {
    return this.child !== undefined && !exited(this.child) ? this.child.pid : undefined
  }

  writeLog(text: string) {
    if (this.logStream !== undefined && !this.logStream.writableEnded) this.logStream.write(text)
  }

  /**
   * Starts the service (`command`, by default the one given at creation) and waits until its
   * listeners answer: the API, and the SMTP listener for `start` and `ingest`.
   */
  async start(command = this.defaultCommand): Promise<void> {
    if (this.pid !== undefined) throw new Error("burnbox is already running")
    this.command = command
    const started = Date.now()
    this.session.log(`starting burnbox ${command} (HTTP 127.0.0.1:${this.httpPort}, SMTP 127.0.0.1:${this.smtpPort}, data ${this.dataDir}); output -> ${this.logPath}`)
    // BENCH_NODE_ARGS: extra node flags for the service, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" (written at a clean stop).
    const nodeArgs = (process.env["BENCH_NODE_ARGS"] ?? "").split(/\s+/).filter((a) => a !== "")
    const child = spawn(node, [...nodeArgs, cliMain, command], { cwd: root, env: this.env, stdio: ["ignore", "pipe", "pipe"] })
    this.child = child
    child.stdout!.on("data", (chunk: Buffer) => this.writeLog(`[${command} stdout] ${chunk.toString("utf8")}`))
    const seen = { workerStarted: false }
    child.stderr!.on("data", (chunk: Buffer) => {
      const text = chunk.toString("utf8")
      if (text.includes("worker started")) seen.workerStarted = true
      this.writeLog(`[${command} stderr] ${text}`)
    })
    this.expectingExit = false
    child.once("exit", (code, signal) => {
      this.writeLog(`[${command}] exited code=${code} signal=${signal}\n`)
      if (!this.expectingExit) {
        this.unexpectedExit = `burnbox ${command} (pid ${child.pid}) exited on its own at ${new Date().toISOString()} (code ${code}, signal ${signal}); ` +
          "code 130 means it received SIGINT or SIGTERM from outside this script; see " + this.logPath
        this.session.log(this.unexpectedExit)
      }
    })
    const deadline = Date.now() + this.startupTimeoutMs
    const alive = () => {
      if (exited(child)) throw new Error(`burnbox exited during startup (code ${child.exitCode}, signal ${child.signalCode}); see ${this.logPath}`)
      if (Date.now() > deadline) throw new Error(`burnbox did not start within ${this.startupTimeoutMs / 1000} s; see ${this.logPath}`)
    }
    for (;;) {
      alive()
      if (command !== "start" && command !== "serve") break // no HTTP listener
      try {
        const response = await fetch(`${this.baseUrl}/api/v1/me`, { signal: AbortSignal.timeout(2_000) })
        await response.arrayBuffer()
        break
      } catch {
        await sleep(200)
      }
    }
    if (command === "worker") {
      while (!seen.workerStarted) {
        alive()
        await sleep(100)
      }
    }
    if (command === "start" || command === "ingest") {
      for (;;) {
        alive()
        if (await smtpGreets(this.smtpPort)) break
        await sleep(200)
      }
    }
    this.session.log(`burnbox (pid ${child.pid}) answers after ${((Date.now() - started) / 1000).toFixed(1)} s`)
  }

  /** Graceful stop: SIGINT lets burnbox close its scopes, which stops its PostgreSQL (fast shutdown). */
  async stop(): Promise<void> {
    this.expectingExit = true
    await this.session.stopChild(this.child, "burnbox", "SIGINT", 30_000)
    // Only if burnbox died without stopping it: stop the postmaster it started, by its pid.
    const orphan = this.postmasterPid()
    if (orphan !== undefined) {
      this.session.log(`embedded PostgreSQL (pid ${orphan}) still running after burnbox exited; sending SIGINT`)
      try {
        process.kill(orphan, "SIGINT")
        for (let i = 0; i < 100 && this.postmasterPid() !== undefined; i++) await sleep(100)
        const stubborn = this.postmasterPid()
        if (stubborn !== undefined) process.kill(stubborn, "SIGKILL")
      } catch {
        // already gone
      }
    }
  }

  /**
   * A crash: SIGKILL, at once, to the node process and to every process below it (the embedded
   * PostgreSQL postmaster and all its backends), so nothing gets to finish or shut down
   * cleanly. (A SIGKILL of node alone would leave PostgreSQL running, and a postmaster killed
   * alone leaves backends running until they notice.) Answers the pids killed.
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
    // The clients' connections are dead now.
    for (const c of this.clients.splice(0)) c.end().catch(() => undefined)
    return pids
  }

  /** Throws when the service has exited on its own (e.g. killed by something else on the machine). */
  checkAlive() {
    if (this.unexpectedExit !== undefined) throw new Error(this.unexpectedExit)
  }

  /** The embedded cluster's pid file: in the data dir, or as root under /var/lib/burnbox/clusters (see EmbeddedPostgres.ts). */
  private postmasterPidFile(): string {
    return join(clusterLocation(this.dataDir, { create: false }).pgdata, "postmaster.pid")
  }

  /** The embedded PostgreSQL postmaster's pid, from its pid file, if it is still running. */
  postmasterPid(): number | undefined {
    try {
      const pid = Number(readFileSync(this.postmasterPidFile(), "utf8").split("\n")[0])
      if (!Number.isInteger(pid) || pid <= 0) return undefined
      return pidAlive(pid) ? pid : undefined
    } catch {
      return undefined
    }
  }

  /** A connected client of the embedded PostgreSQL (database and user burnbox); ended at cleanup. */
  async db(): Promise<PgClient> {
    const lines = readFileSync(this.postmasterPidFile(), "utf8").split("\n")
    const port = Number(lines[3])
    const password = readFileSync(join(this.dataDir, "postgres.password"), "utf8").trim()
    const client = new (pg().Client)({ host: "127.0.0.1", port, user: "burnbox", password, database: "burnbox" })
    client.on("error", (error) => this.session.log(`database client: ${error.message}`))
    await client.connect()
    this.clients.push(client)
    return client
  }

  async closeDb(client: PgClient): Promise<void> {
    const i = this.clients.indexOf(client)
    if (i >= 0) this.clients.splice(i, 1)
    await client.end().catch(() => undefined)
  }

  /** Runs `burnbox <args>` to completion and parses the one JSON document it prints. */
  async cli(args: ReadonlyArray<string>, timeoutMs = 60_000): Promise<Record<string, unknown>> {
    const what = `burnbox ${args.slice(0, 3).join(" ")}`
    const child = this.session.spawn(what, node, [cliMain, ...args], { cwd: root, env: this.env, stdio: ["ignore", "pipe", "pipe"] }, "SIGKILL")
    let stdout = ""
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => stdout += chunk)
    child.stderr!.on("data", (chunk: Buffer) => this.writeLog(`[cli ${args.slice(0, 3).join(" ")}] ${chunk.toString("utf8")}`))
    if (!(await waitForExit(child, timeoutMs))) {
      child.kill("SIGKILL")
      await waitForExit(child, 5_000)
      throw new Error(`${what} did not finish within ${timeoutMs / 1000} s`)
    }
    let parsed: Record<string, unknown>
    try {
      parsed = JSON.parse(stdout) as Record<string, unknown>
    } catch {
      throw new Error(`${what} printed no JSON (exit ${child.exitCode}):\n${stdout}`)
    }
    if (child.exitCode !== 0 || "error" in parsed) throw new Error(`${what} failed (exit ${child.exitCode}): ${JSON.stringify(parsed)}`)
    return parsed
  }

  async api(method: string, path: string, token: string, body?: unknown): Promise<ApiResponse> {
    const response = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(15_000)
    })
    const text = await response.text()
    let parsed: unknown = undefined
    try {
      parsed = JSON.parse(text)
    } catch {
      // not JSON
    }
    return { status: response.status, body: parsed, text }
  }

  /**
   * The benchmark account: plan pro, request limits and storage quota raised with an override (so
   * figures count served work, not refusals), and a token with `scopes`. Answers the token secret.
   */
  async setupAccount(email: string, scopes = "read,manage-aliases,test", storageQuotaBytes = 1024 ** 4): Promise<string> {
    await this.cli(["admin", "account", "create", "--email", email, "--password", "bench password", "--plan", "pro"])
    const override = await this.cli([
      "admin", "account", "override", "--email", email,
      "--set", `requestsPerMinute=100000000,requestsPerDay=1000000000,storageQuotaBytes=${storageQuotaBytes}`
    ])
    this.session.log(`account ${email} (pro): requestsPerMinute=${String(override["requestsPerMinute"])} storageQuotaBytes=${String((override["plan"] as { storageQuotaBytes?: number } | undefined)?.storageQuotaBytes)}`)
    const token = await this.cli(["admin", "token", "create", "--email", email, "--scopes", scopes, "--name", "bench"])
    const secret = token["secret"]
    if (typeof secret !== "string") throw new Error(`token create printed no secret: ${JSON.stringify(token)}`)
    return secret
  }

  /**
   * `count` more accounts (plan pro, default limits), each with one claimed alias, created a few
   * at a time with the CLI and the API. Answers the aliases' addresses.
   */
  async createAccountsWithAliases(prefix: string, count: number, parallel = 4): Promise<Array<{ email: string; id: number; address: string }>> {
    const out: Array<{ email: string; id: number; address: string }> = []
    for (let start = 0; start < count; start += parallel) {
      const batch = Array.from({ length: Math.min(parallel, count - start) }, (_, i) => `${prefix}-${start + i}@example.com`)
      out.push(...await Promise.all(batch.map(async (email) => {
        await this.cli(["admin", "account", "create", "--email", email, "--password", "bench password", "--plan", "pro"])
        const token = await this.cli(["admin", "token", "create", "--email", email, "--scopes", "read,manage-aliases", "--name", "bench"])
        const alias = await this.claimAlias(String(token["secret"]))
        return { email, ...alias }
      })))
    }
    return out
  }

  /** Reserves numeric candidates on domain 1 and claims the first; answers its id and address. */
  async claimAlias(token: string): Promise<{ id: number; address: string }> {
    const reserved = await this.api("POST", "/api/v1/aliases/candidates", token, { domainId: 1, style: "numeric" })
    const reservation = reserved.body as { reservationToken?: string; candidates?: Array<{ id: number; address: string }> } | undefined
    const candidate = reservation?.candidates?.[0]
    if (reserved.status !== 200 && reserved.status !== 201 || candidate === undefined || reservation?.reservationToken === undefined) {
      throw new Error(`POST /api/v1/aliases/candidates answered ${reserved.status}: ${reserved.text}`)
    }
    const claimed = await this.api("POST", "/api/v1/aliases", token, { aliasId: candidate.id, reservationToken: reservation.reservationToken })
    const alias = claimed.body as { id?: number; address?: string } | undefined
    if (claimed.status !== 200 && claimed.status !== 201 || alias?.address === undefined || alias.id === undefined) {
      throw new Error(`POST /api/v1/aliases answered ${claimed.status}: ${claimed.text}`)
    }
    return { id: alias.id, address: alias.address }
  }

  /** Lines of the service log mentioning errors, for the report. */
  summarizeLog(): Array<string> {
    let text = ""
    try {
      text = readFileSync(this.logPath, "utf8")
    } catch {
      return ["(service log unreadable)"]
    }
    const lines = text.split("\n").filter((l) => l.trim().length > 0)
    const notable = lines.filter((l) => /error|warn|fail|defect|exception|fatal|panic|unhandled/i.test(l))
    const out = [`service output: ${lines.length} lines, ${notable.length} mentioning error/warn/fail; full log: ${this.logPath}`]
    for (const l of notable.slice(0, 10)) out.push(`  ${l.length > 200 ? l.slice(0, 200) + "..." : l}`)
    if (notable.length > 10) out.push(`  ... ${notable.length - 10} more`)
    return out
  }
}

/** True when an SMTP server on 127.0.0.1:port sends a 220 greeting (then QUITs politely). */
export const smtpGreets = (port: number, timeoutMs = 3_000): Promise<boolean> =>
  new Promise((ok) => {
    const socket = connect({ port, host: "127.0.0.1" })
    let text = ""
    const done = (value: boolean) => {
      clearTimeout(timer)
      socket.removeAllListeners("data")
      if (value) socket.end("QUIT\r\n")
      else socket.destroy()
      ok(value)
    }
    const timer = setTimeout(() => done(false), timeoutMs)
    socket.on("error", () => done(false))
    socket.setEncoding("utf8").on("data", (chunk: string) => {
      text += chunk
      if (text.includes("\n")) done(text.startsWith("220"))
    })
  })

// ---------------------------------------------------------------------------------------------
// What PostgreSQL's backends wait for

/** A short name for a burnbox statement seen in pg_stat_activity (accept path and pipeline). */
export const statementLabel = (query: string): string => {
  const q = query.replace(/\s+/g, " ").trim()
  const known: ReadonlyArray<readonly [RegExp, string]> = [
    [/FROM accounts a JOIN plans p .*FOR (NO KEY )?UPDATE OF a/i, "accept: SELECT account FOR UPDATE"],
    [/^SELECT id FROM accounts WHERE id IN .*FOR NO KEY UPDATE/i, "accept: lock the batch's accounts"],
    [/FROM accounts a JOIN plans p/i, "accept: SELECT account"],
    [/^WITH message AS \( ?INSERT INTO messages/i, "accept: INSERT message+raw, UPDATE counters"],
    [/^(SAVEPOINT|RELEASE SAVEPOINT|ROLLBACK TO SAVEPOINT)/i, "accept: $1"],
    [/^INSERT INTO messages /i, "accept: INSERT messages"],
    [/^INSERT INTO message_raw/i, "accept: INSERT message_raw"],
    [/^UPDATE aliases SET storage_used_bytes = storage_used_bytes \+/i, "accept: UPDATE aliases"],
    [/^UPDATE accounts SET storage_used_bytes = storage_used_bytes \+/i, "accept: UPDATE accounts"],
    [/^SELECT al\.id, al\.account_id, al\.status/i, "rcpt: resolve alias"],
    [/^UPDATE messages SET processing_status = 'processing'/i, "pipeline: claim"],
    [/^SELECT raw FROM message_raw/i, "pipeline: read raw"],
    [/FROM messages m JOIN aliases al .*FOR UPDATE OF m/i, "pipeline: lock message"],
    [/^DELETE FROM attachments/i, "pipeline: DELETE attachments"],
    [/^INSERT INTO attachments/i, "pipeline: INSERT attachments"],
    [/^UPDATE messages SET sender_name/i, "pipeline: UPDATE messages"],
    [/^INSERT INTO events/i, "pipeline: INSERT events"],
    [/pg_notify/i, "pg_notify"],
    [/^(COMMIT|BEGIN|ROLLBACK)/i, "$1"]
  ]
  for (const [pattern, label] of known) {
    const match = pattern.exec(q)
    if (match !== null) return label.replace("$1", match[1] ?? "")
  }
  return q.slice(0, 40)
}

export interface Waits {
  /** share of each wait among all samples of busy backends, largest first */
  readonly shares: Array<[string, number]>
  /** share of each "wait @ statement", largest first */
  readonly byStatement: Array<[string, number]>
  readonly meanBusy: number
  readonly samples: number
}

const sharesOf = (map: Map<string, number>) => {
  const total = [...map.values()].reduce((a, b) => a + b, 0)
  return [...map].map(([k, n]) => [k, total === 0 ? 0 : n / total] as [string, number]).sort((a, b) => b[1] - a[1])
}

/**
 * Samples pg_stat_activity every `everyMs` until `stop()`: for the client backends with work in
 * hand (active, or idle in a transaction), what they wait for ("CPU" when nothing) and in which
 * statement. Answers the share of each among all such samples and the mean number of busy backends.
 */
export const sampleWaits = (db: PgClient, everyMs = 50) => {
  const counts = new Map<string, number>()
  const byStatement = new Map<string, number>()
  let samples = 0
  let busy = 0
  const state = { running: true }
  const loop = (async () => {
    while (state.running) {
      try {
        const { rows } = await db.query<{ wait: string; query: string }>(`
          SELECT CASE WHEN state = 'idle in transaction' THEN 'idle in transaction'
                      WHEN wait_event IS NULL THEN 'CPU'
                      ELSE wait_event_type || ':' || wait_event END AS wait, left(query, 300) AS query
          FROM pg_stat_activity
          WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
            AND state IN ('active', 'idle in transaction')`)
        samples++
        for (const row of rows) {
          counts.set(row.wait, (counts.get(row.wait) ?? 0) + 1)
          const key = `${row.wait} @ ${statementLabel(row.query)}`
          byStatement.set(key, (byStatement.get(key) ?? 0) + 1)
          busy++
        }
      } catch {
        // the server may be going away; the sampler just stops counting
      }
      await sleep(everyMs)
    }
  })()
  return {
    stop: async (): Promise<Waits> => {
      state.running = false
      await loop
      return { shares: sharesOf(counts), byStatement: sharesOf(byStatement), meanBusy: samples === 0 ? 0 : busy / samples, samples }
    }
  }
}

export const waitsText = (waits: Waits, top = 4): string =>
  `${waits.meanBusy.toFixed(1)} busy: ` + waits.shares.slice(0, top).map(([k, f]) => `${k} ${Math.round(f * 100)}%`).join(", ")

export const waitsByStatementText = (waits: Waits, top = 5): string =>
  waits.byStatement.slice(0, top).map(([k, f]) => `${k} ${Math.round(f * 100)}%`).join("; ")
