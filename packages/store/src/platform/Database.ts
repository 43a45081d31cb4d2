import { randomBytes } from "node:crypto"
import { readFileSync, writeFileSync } from "node:fs"
import { setPriority } from "node:os"
import { join } from "node:path"
import { PgClient } from "@effect/sql-pg"
import { DefaultPlans } from "@burnbox/domain"
import { Context, Effect, Layer, Option, Redacted, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import pg from "pg"
import { BurnboxConfig } from "./Config.ts"
import { runningEmbeddedPostgres, startEmbeddedPostgres, withDatabase } from "./EmbeddedPostgres.ts"
import { migrate } from "./Migrations.ts"
import { lockDataDir, prepareDataDir, probeDatabase } from "./Startup.ts"

const commandName = () => ["burnbox", ...process.argv.slice(2, 4)].join(" ")

/**
 * Where the database is: DATABASE_URL (checked with one connection), or the embedded cluster of
 * the data dir. The process that starts the embedded cluster holds the data dir's lock; later
 * processes on the same data dir attach to the running cluster.
 */
const databaseUrl = (options: { readonly exclusive: boolean }) =>
  Effect.gen(function*() {
    const config = yield* BurnboxConfig
    if (Option.isSome(config.databaseUrl)) {
      yield* probeDatabase(config.databaseUrl.value)
      return config.databaseUrl.value
    }
    const dir = config.dataDir
    yield* prepareDataDir(dir)
    if (options.exclusive) yield* lockDataDir(dir, commandName())
    const running = runningEmbeddedPostgres(dir)
    if (running !== undefined) {
      yield* Effect.logInfo(`using the embedded PostgreSQL already running on 127.0.0.1:${running.port}`)
      return withDatabase(running.url, "burnbox")
    }
    if (!options.exclusive) yield* lockDataDir(dir, commandName())
    // The cluster's log is kept beside the data (README, "Operating"), with lock waits over a second.
    const cluster = yield* startEmbeddedPostgres(dir, { logFile: join(dir, "postgres.log"), tuning: ["-c", "log_lock_waits=on"] })
    yield* ensureDatabase(cluster.url, "burnbox")
    yield* Effect.logInfo(`embedded PostgreSQL listening on 127.0.0.1:${cluster.port}`)
    return withDatabase(cluster.url, "burnbox")
  })

export class DatabaseUrl extends Context.Service<DatabaseUrl, Redacted.Redacted<string>>()("burnbox/DatabaseUrl") {
  /** Attaches to the data dir's running cluster, or starts it. */
  static readonly layer = Layer.effect(DatabaseUrl, databaseUrl({ exclusive: false }))
  /** `burnbox start`: the whole service on this data dir, which no other process may hold. */
  static readonly layerExclusive = Layer.effect(DatabaseUrl, databaseUrl({ exclusive: true }))
}

const ensureDatabase = (url: Redacted.Redacted<string>, name: string) =>
  withClient(url, async (client) => {
    const exists = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name])
    if (exists.rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`)
  })

export const withClient = <A>(url: Redacted.Redacted<string>, f: (client: pg.Client) => Promise<A>) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: Redacted.value(url) })
    await client.connect()
    try {
      return await f(client)
    } finally {
      await client.end()
    }
  })

/** Seeds the plan rows with the defaults and the configured receiving domains; both idempotent. */
export const seed = (url: Redacted.Redacted<string>, domains: ReadonlyArray<{ name: string; tier: string }>) =>
  withClient(url, async (client) => {
    for (const [code, entitlements] of Object.entries(DefaultPlans)) {
      await client.query("INSERT INTO plans (code, entitlements) VALUES ($1, $2) ON CONFLICT (code) DO NOTHING", [code, entitlements])
    }
    for (const domain of domains) {
      await client.query("INSERT INTO domains (name, tier) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING", [domain.name, domain.tier])
    }
  })

/** Migrations applied and seed data present: what every role needs before it serves. */
export class MigratedDatabase extends Context.Service<MigratedDatabase, { readonly applied: ReadonlyArray<string> }>()(
  "burnbox/MigratedDatabase"
) {
  static readonly layer = Layer.effect(MigratedDatabase, Effect.gen(function*() {
    const url = yield* DatabaseUrl
    const config = yield* BurnboxConfig
    const applied = yield* migrate(url)
    yield* seed(url, config.domains)
    if (applied.length > 0) yield* Effect.logInfo(`applied migrations: ${applied.join(", ")}`)
    return { applied }
  }))
}

/**
 * The name every connection of this process shows PostgreSQL (`application_name`): unique per
 * process, so that what a process claimed can be told apart from what a dead one left (a process
 * keeps at least its LISTEN connection open while it lives).
 */
export const processApplicationName = () => `burnbox/${process.pid}/${randomBytes(4).toString("hex")}`

/**
 * A PostgreSQL backend starts a session of its own (setsid), and with the kernel's autogroup
 * scheduling (`kernel.sched_autogroup_enabled`, on by default in most distributions) each session
 * is a group that shares the CPU with the others as one: a nice value counts only within its
 * group, so a niced backend alone in its session still took as much CPU as the API's thread
 * (whose group is the whole node process). Its group's nice (`/proc/PID/autogroup`) is what
 * ranks it against them; without autogroup the file is missing, or ignored.
 */
const lowerAutogroup = (pid: number, nice: number) => {
  try {
    writeFileSync(`/proc/${pid}/autogroup`, String(nice))
  } catch {
    // no autogroup scheduling here, or not allowed: the nice value is what ranks it
  }
}

/**
 * Lowers the OS priority (nice) of the PostgreSQL backends serving the pool named
 * `applicationName`, and of each one it opens later (looked for every second): for a pool whose
 * work may wait (`burnbox start`'s ingest and worker), so the backends of another pool (the
 * API's) take the CPU first. Only for the embedded cluster, whose backends are this machine's
 * `postgres` processes (a DATABASE_URL server's are not); where the nice value cannot be set, the
 * backends keep theirs.
 */
const lowerBackendPriority = (applicationName: string, nice: number) =>
  Effect.gen(function*() {
    const config = yield* BurnboxConfig
    if (Option.isSome(config.databaseUrl) || process.platform !== "linux") return
    const sql = yield* SqlClient.SqlClient
    const lowered = new Set<number>()
    const lower = sql<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE application_name = ${applicationName}`.pipe(
      Effect.map((rows) => {
        const live = new Set(rows.map((row) => row.pid))
        for (const pid of lowered) if (!live.has(pid)) lowered.delete(pid)
        for (const pid of live) {
          if (lowered.has(pid)) continue
          lowered.add(pid)
          try {
            if (readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "postgres") {
              setPriority(pid, nice)
              lowerAutogroup(pid, nice)
            }
          } catch {
            // gone meanwhile, or not allowed: it keeps its priority
          }
        }
      }),
      Effect.catchCause(() => Effect.void)
    )
    yield* lower.pipe(Effect.repeat(Schedule.spaced("1 second")), Effect.forkScoped)
  })

/**
 * The SQL client of a process: one pool, on a migrated database. With `backendNice`, its
 * PostgreSQL backends run at that lower priority (`lowerBackendPriority`).
 */
export const SqlLive = (options: { readonly maxConnections?: number; readonly backendNice?: number } = {}) =>
  Layer.unwrap(Effect.gen(function*() {
    const url = yield* DatabaseUrl
    yield* MigratedDatabase
    const applicationName = processApplicationName()
    const pool = PgClient.layer({
      url,
      applicationName,
      maxConnections: options.maxConnections ?? 20,
      // 15 MiB mail plus protocol overhead must fit in one message.
      maxMessageSize: 64 * 1024 * 1024
    })
    const nice = options.backendNice
    return nice === undefined ? pool : Layer.effectDiscard(lowerBackendPriority(applicationName, nice)).pipe(Layer.provideMerge(pool))
  }))
