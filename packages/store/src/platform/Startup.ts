/**
 * What can stop a burnbox process before it serves, each told in one line: a data dir it cannot
 * write, a data dir another process holds, a port in use, a database it cannot reach. The
 * programs print `burnbox: <message>` and exit non-zero; nothing here prints a stack trace.
 */
import { accessSync, closeSync, constants, mkdirSync, openSync, readFileSync, rmSync, writeSync } from "node:fs"
import { createServer } from "node:net"
import { join } from "node:path"
import { Data, Effect, Redacted } from "effect"
import pg from "pg"

export class StartupFailure extends Data.TaggedError("StartupFailure")<{ readonly message: string }> {}

const reason = (error: unknown) => {
  const code = (error as { code?: unknown }).code
  return typeof code === "string" ? code : error instanceof Error ? error.message : String(error)
}

/** Creates the data dir (0700) when it is missing and checks that it can be written. */
export const prepareDataDir = (dataDir: string) =>
  Effect.try({
    try: () => {
      mkdirSync(dataDir, { recursive: true, mode: 0o700 })
      accessSync(dataDir, constants.W_OK | constants.X_OK)
    },
    catch: (error) => new StartupFailure({ message: `cannot create or write the data directory ${dataDir} (${reason(error)}); set BURNBOX_DATA_DIR to a directory you can write` })
  })

const lockPath = (dataDir: string) => join(dataDir, "burnbox.lock")

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as { code?: string }).code === "EPERM"
  }
}

/**
 * Holds `<data dir>/burnbox.lock` (the holder's PID and command) for the scope: a second process
 * that would start the same data dir's embedded database is told which process has it. A lock
 * whose process is gone is taken over.
 */
export const lockDataDir = (dataDir: string, command: string) =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        const file = lockPath(dataDir)
        for (let attempt = 0; attempt < 3; attempt++) {
          try {
            const fd = openSync(file, "wx", 0o600)
            writeSync(fd, `${process.pid}\n${command}\n`)
            closeSync(fd)
            return file
          } catch (error) {
            if ((error as { code?: string }).code !== "EEXIST") throw error
          }
          const [pidLine = "", holder = "burnbox"] = readFileSync(file, "utf8").split("\n")
          const pid = Number(pidLine)
          if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid)) {
            throw new StartupFailure({
              message: `the data directory ${dataDir} is in use by process ${pid} (${holder}; lock file ${file}); stop that process or set BURNBOX_DATA_DIR to another directory`
            })
          }
          rmSync(file, { force: true })
        }
        throw new StartupFailure({ message: `could not take the lock file ${file}` })
      },
      catch: (error) => error instanceof StartupFailure ? error : new StartupFailure({ message: `cannot write the lock file in ${dataDir} (${reason(error)})` })
    }),
    (file) => Effect.sync(() => rmSync(file, { force: true }))
  )

/** Fails when host:port cannot be listened on, naming the variable that sets it. */
export const checkPortFree = (host: string, port: number, variable: string) =>
  Effect.callback<void, StartupFailure>((resume) => {
    const server = createServer()
    server.once("error", (error: NodeJS.ErrnoException) => {
      const why = error.code === "EADDRINUSE" ? "is in use" : error.code === "EACCES" ? "needs privileges this process lacks" : `cannot be listened on (${reason(error)})`
      resume(Effect.fail(new StartupFailure({ message: `port ${port} on ${host} ${why}; set ${variable} to a free port` })))
    })
    server.listen(port, host, () => server.close(() => resume(Effect.void)))
  })

/** The connection URL without its password, for messages. */
export const describeUrl = (url: Redacted.Redacted<string>) => {
  try {
    const parsed = new URL(Redacted.value(url))
    return `${parsed.hostname}:${parsed.port || "5432"}${parsed.pathname}${parsed.username === "" ? "" : ` as ${decodeURIComponent(parsed.username)}`}`
  } catch {
    return "(a URL that cannot be read)"
  }
}

/**
 * Connects once to DATABASE_URL, so a wrong host, port, password or database is one line naming
 * the variable, not a pool's retries and a stack trace.
 */
export const probeDatabase = (url: Redacted.Redacted<string>, variable = "DATABASE_URL") =>
  Effect.tryPromise({
    try: async () => {
      const client = new pg.Client({ connectionString: Redacted.value(url), connectionTimeoutMillis: 10_000 })
      client.on("error", () => {})
      try {
        await client.connect()
      } finally {
        await client.end().catch(() => {})
      }
    },
    catch: (error) => {
      const where = describeUrl(url)
      const code = (error as { code?: string }).code
      const message = code === "28P01" || code === "28000"
        ? `PostgreSQL at ${where} refused the credentials of ${variable}`
        : code === "3D000"
        ? `PostgreSQL at ${where}: the database of ${variable} does not exist`
        : code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "ETIMEDOUT" || code === "EHOSTUNREACH"
        ? `cannot reach PostgreSQL at ${where} (${code}); check ${variable}`
        : `cannot connect to PostgreSQL at ${where} (${reason(error)}); check ${variable}`
      return new StartupFailure({ message })
    }
  })
