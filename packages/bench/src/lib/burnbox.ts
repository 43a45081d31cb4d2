/**
 * The benchmarks' run and the service they measure: `Session` stops everything a benchmark
 * started, by pid, exactly once, also on failure, timeout or Ctrl-C; `Burnbox` is the testkit's
 * `ServiceProcess` (the real `burnbox` program on a temporary data dir, its own embedded
 * PostgreSQL, free ports, 127.0.0.1) tied to a session and its log file, with what benchmarks do
 * to it: the admin CLI, the HTTP API, a direct PostgreSQL client, what its backends wait for.
 */
import { type ChildProcess, execFileSync, spawn, type SpawnOptions } from "node:child_process"
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { removeCluster } from "@burnbox/store"
import { exited, repositoryRoot, ServiceProcess, waitForExit } from "@burnbox/testkit"
import { openSse, type SseSubscription } from "@burnbox/testkit/SseClient"
import pg from "pg"
import { sleep } from "./common.ts"

/**
 * The burnbox tree whose service is measured: this repository, or BENCH_BURNBOX_ROOT (e.g. a
 * snapshot of a commit, when others are editing the working tree:
 * `git archive HEAD | tar -x -C /tmp/snap`, then link /tmp/snap/node_modules to this repo's and
 * copy each packages/<name>/node_modules, whose links are relative).
 */
export const root = process.env["BENCH_BURNBOX_ROOT"] ?? repositoryRoot
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
// The service

export type PgClient = pg.Client

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
  readonly service: ServiceProcess
  readonly logPath: string
  private readonly clients: Array<PgClient> = []

  private constructor(session: Session, service: ServiceProcess, logPath: string) {
    this.session = session
    this.service = service
    this.logPath = logPath
  }

  /** Allocates a data dir and ports; registers the service's cleanup with the session. */
  static async create(session: Session, options: BurnboxOptions): Promise<Burnbox> {
    const dataDir = session.tempDir(`burnbox-${options.logName}-`, options.keepDataDir === true)
    const logPath = join(session.logDir, `burnbox-${options.logName}-${session.stamp}.log`)
    const logStream = createWriteStream(logPath, { flags: "a" })
    const service = await ServiceProcess.create({
      root,
      dataDir,
      ...(options.extraEnv === undefined ? {} : { env: options.extraEnv }),
      ...(options.startupTimeoutMs === undefined ? {} : { startupTimeoutMs: options.startupTimeoutMs }),
      // BENCH_NODE_ARGS: extra node flags for the service, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" (written at a clean stop).
      nodeArgs: (process.env["BENCH_NODE_ARGS"] ?? "").split(/\s+/).filter((a) => a !== ""),
      onOutput: (text) => logStream.writableEnded || logStream.write(text),
      log: (line) => session.log(line.includes("exited on its own") ? `${line}; see ${logPath}` : line)
    })
    if (options.command !== undefined) service.command = options.command
    const burnbox = new Burnbox(session, service, logPath)
    // Registered after the temp dir, so it runs before the dir is removed (finalizers run first).
    session.onCleanup(async () => {
      await Promise.all(burnbox.clients.splice(0).map((c) => c.end().catch(() => undefined)))
      await service.stop()
      await new Promise<void>((ok) => logStream.writableEnded ? ok() : logStream.end(() => ok()))
      // As root the cluster lives outside the data dir (/var/lib/burnbox/clusters): it goes with it.
      if (options.keepDataDir !== true) removeCluster(dataDir)
    })
    return burnbox
  }

  get httpPort() {
    return this.service.httpPort
  }

  get smtpPort() {
    return this.service.smtpPort
  }

  get baseUrl() {
    return this.service.baseUrl
  }

  get pid(): number | undefined {
    return this.service.pid
  }

  /** Starts the service (`command`, by default the one given at creation) and waits until its listeners answer. */
  async start(command?: string): Promise<void> {
    try {
      await this.service.start(command)
    } catch (error) {
      throw new Error(`${error instanceof Error ? error.message : String(error)}; see ${this.logPath}`, { cause: error })
    }
  }

  async stop(): Promise<void> {
    await this.service.stop()
  }

  /**
   * Starts the service with PostgreSQL's `pg_stat_statements` loaded (it needs loading at
   * PostgreSQL's start: set, then the service started again) and answers a client with the
   * extension created, to read `statementStats` from. `track`: "all" counts the statements that
   * functions and triggers (foreign keys' checks too) run as well; "top" only what clients sent.
   * `settings`: more PostgreSQL settings for the run (name -> value), set at the same restart.
   */
  async startWithStatementStats(command?: string, track: "all" | "top" = "all", settings: Readonly<Record<string, string>> = {}): Promise<PgClient> {
    await this.start(command)
    const setup = await this.db()
    await setup.query("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
    await setup.query(`ALTER SYSTEM SET pg_stat_statements.track = '${track}'`)
    for (const [name, value] of Object.entries(settings)) await setup.query(`ALTER SYSTEM SET ${name} = '${value}'`)
    await this.closeDb(setup)
    await this.stop()
    await this.start(command)
    const db = await this.db()
    await db.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    return db
  }

  /** A crash of the service with its PostgreSQL (ServiceProcess.crash); answers the pids killed. */
  async crash(): Promise<Array<number>> {
    const pids = await this.service.crash()
    // The clients' connections are dead now.
    for (const c of this.clients.splice(0)) c.end().catch(() => undefined)
    return pids
  }

  /** Throws when the service has exited on its own (e.g. killed by something else on the machine). */
  checkAlive() {
    this.service.checkAlive()
  }

  postmasterPid(): number | undefined {
    return this.service.postmasterPid()
  }

  /** A connected client of the embedded PostgreSQL (database and user burnbox); ended at cleanup. */
  async db(): Promise<PgClient> {
    const client = new pg.Client(this.service.embeddedDatabase())
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
    const run = await this.service.cli(args, timeoutMs)
    let parsed: Record<string, unknown>
    try {
      parsed = JSON.parse(run.stdout) as Record<string, unknown>
    } catch {
      throw new Error(`${what} printed no JSON (exit ${run.code}):\n${run.stdout}`)
    }
    if (run.code !== 0 || "error" in parsed) throw new Error(`${what} failed (exit ${run.code}): ${JSON.stringify(parsed)}`)
    return parsed
  }

  /**
   * `count` browser subscriptions of `email`'s account on the Mercure hub, as EventSource makes
   * them: signed in (the benchmark account's password), the hub's URL and topic read from the
   * cookie bootstrap, GET {hub}?topic=... with the session cookie.
   */
  async hubSubscribers(email: string, count: number): Promise<{ subscribers: Array<SseSubscription>; topic: string; accountId: number }> {
    const login = await fetch(`${this.baseUrl}/api/v1/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email, password: "bench password" })
    })
    const cookie = /service_session=([^;]+)/.exec(login.headers.get("set-cookie") ?? "")?.[1]
    if (login.status >= 300 || cookie === undefined) throw new Error(`sign-in answered ${login.status}`)
    const bootstrap = await (await fetch(`${this.baseUrl}/api/v1/bootstrap`, { headers: { cookie: `service_session=${cookie}` } })).json() as {
      mercure: { hubUrl: string; topic: string }
    }
    const { hubUrl, topic } = bootstrap.mercure
    const subscribers: Array<SseSubscription> = []
    for (let i = 0; i < count; i++) {
      const sse = await openSse(`${this.baseUrl}${new URL(hubUrl).pathname}?topic=${encodeURIComponent(topic)}`, { cookie: `service_session=${cookie}` })
      if (sse.status !== 200) throw new Error(`the hub answered ${sse.status}`)
      subscribers.push(sse)
    }
    return { subscribers, topic, accountId: Number(/\/accounts\/(\d+)$/.exec(topic)?.[1]) }
  }

  /** Lines of the service log mentioning errors, for the report. */
  summarizeLog(): Array<string> {
    return summarizeLog(this.logPath)
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
    const [override, token] = await Promise.all([
      this.cli([
        "admin", "account", "override", "--email", email,
        "--set", `requestsPerMinute=100000000,requestsPerDay=1000000000,storageQuotaBytes=${storageQuotaBytes}`
      ]),
      this.cli(["admin", "token", "create", "--email", email, "--scopes", scopes, "--name", "bench"])
    ])
    this.session.log(`account ${email} (pro): requestsPerMinute=${String(override["requestsPerMinute"])} storageQuotaBytes=${String((override["plan"] as { storageQuotaBytes?: number } | undefined)?.storageQuotaBytes)}`)
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
  /**
   * `count` claimed aliases of the account `email` (its alias caps raised to allow them), claimed
   * eight at a time: reservations are independent, as a CI fleet's are.
   */
  async claimAliases(email: string, token: string, count: number): Promise<Array<{ id: number; address: string }>> {
    const cap = count + 10
    await this.cli(["admin", "account", "override", "--email", email, "--set", `activeAliasCap=${cap},aliasLifetimeCap=${cap},claimsPerDay=${cap}`])
    const aliases: Array<{ id: number; address: string }> = []
    while (aliases.length < count) {
      const batch = Math.min(8, count - aliases.length)
      aliases.push(...await Promise.all(Array.from({ length: batch }, () => this.claimAlias(token))))
    }
    return aliases
  }

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
}

/** Lines of a service log mentioning errors, for the report. */
export const summarizeLog = (logPath: string): Array<string> => {
  let text = ""
  try {
    text = readFileSync(logPath, "utf8")
  } catch {
    return ["(service log unreadable)"]
  }
  const lines = text.split("\n").filter((l) => l.trim().length > 0)
  const notable = lines.filter((l) => /error|warn|fail|defect|exception|fatal|panic|unhandled/i.test(l))
  const out = [`service output: ${lines.length} lines, ${notable.length} mentioning error/warn/fail; full log: ${logPath}`]
  for (const l of notable.slice(0, 10)) out.push(`  ${l.length > 200 ? l.slice(0, 200) + "..." : l}`)
  if (notable.length > 10) out.push(`  ... ${notable.length - 10} more`)
  return out
}

// ---------------------------------------------------------------------------------------------
// The database's size

/** Each table's bytes (heap with TOAST, indexes) and the large objects'. */
export const relationSizes = async (db: PgClient): Promise<Map<string, { heap: number; index: number }>> => {
  const rows = await db.query<{ name: string; heap: string; index: string }>(`
    SELECT c.relname AS name, (pg_table_size(c.oid))::text AS heap, (pg_indexes_size(c.oid))::text AS index
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p') AND (n.nspname = 'public' OR c.relname = 'pg_largeobject')`)
  return new Map(rows.rows.map((r) => [r.name, { heap: Number(r.heap), index: Number(r.index) }]))
}

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

/** One statement's totals in pg_stat_statements since its last reset. */
export interface StatementStat {
  readonly query: string
  readonly calls: number
  readonly ms: number
  readonly wal: number
  readonly rows: number
}

/** This database's statements since the last `pg_stat_statements_reset()`, by execution time. */
export const statementStats = async (db: PgClient): Promise<Array<StatementStat>> =>
  (await db.query<{ query: string; calls: string; ms: string; wal: string; rows: string }>(`
    SELECT query, calls::text, total_exec_time::text AS ms, wal_bytes::text AS wal, rows::text
    FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
    ORDER BY total_exec_time DESC`)).rows.map((r) => ({ query: r.query, calls: Number(r.calls), ms: Number(r.ms), wal: Number(r.wal), rows: Number(r.rows) }))
