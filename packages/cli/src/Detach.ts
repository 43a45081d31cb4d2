/**
 * burnbox in the background, for a CI job: `start --detach` (the service as a child process of
 * its own, its readiness awaited, `KEY=value` lines for the job's environment), `stop` (the
 * detached service of a data dir, awaited until it and its PostgreSQL are gone; an ephemeral data
 * dir removed), and `admin clusters` (root's clusters whose data dir is gone, removed on request).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { chmodSync, closeSync, existsSync, lstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { connect } from "node:net"
import { tmpdir } from "node:os"
import { join, resolve as resolvePath } from "node:path"
import { Scopes } from "@burnbox/domain"
import { BurnboxConfig, checkPortFree, clusterLocation, DefaultDataDir, EphemeralMarker, RootRuntimeDir } from "@burnbox/store"
import { Effect, Result } from "effect"
import { type Args, CliError, flag } from "./Args.ts"

/** The PID of a detached service, in its data dir. */
const PidFile = "burnbox.pid"
/** Where a detached service writes its output, in its data dir. */
const LogFile = "burnbox.log"
/** How long `start --detach` waits for the service to answer, and `stop` for it to exit. */
const StartTimeoutMs = 180_000
const StopTimeoutMs = 60_000

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A process that runs (a zombie, which a container without an init may keep, does not). */
export const running = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch (error) {
    if ((error as { code?: string }).code !== "EPERM") return false
  }
  try {
    return readFileSync(`/proc/${pid}/stat`, "latin1").split(") ")[1]?.[0] !== "Z"
  } catch {
    return true
  }
}

const readPid = (file: string): number | undefined => {
  try {
    const pid = Number(readFileSync(file, "utf8").split("\n")[0])
    return Number.isInteger(pid) && pid > 0 ? pid : undefined
  } catch {
    return undefined
  }
}

const lastLines = (file: string, count = 15) => {
  try {
    return readFileSync(file, "utf8").split("\n").filter((line) => line.trim() !== "").slice(-count).join("\n")
  } catch {
    return "(no log)"
  }
}

/** The command line that runs this program again (the same Node.js, entry and flags). */
const self = (args: ReadonlyArray<string>) => [...process.execArgv, process.argv[1]!, ...args]

/** Runs an admin command of this program and answers its JSON document. */
const adminJson = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv) =>
  new Promise<{ readonly error?: { readonly code: string; readonly message: string }; readonly [key: string]: unknown }>((resolve, reject) => {
    execFile(process.execPath, self(["admin", ...args]), { env, maxBuffer: 1 << 20 }, (error, stdout, stderr) => {
      try {
        resolve(JSON.parse(stdout))
      } catch {
        reject(new CliError("admin_failed", `burnbox admin ${args.slice(0, 2).join(" ")} failed: ${(stderr || String(error)).trim()}`))
      }
    })
  })

/** The service answers HTTP at its API and greets on its SMTP port. */
const ready = async (config: BurnboxConfig["Service"]): Promise<boolean> => {
  try {
    const response = await fetch(`${config.baseUrl}/openapi.json`, { signal: AbortSignal.timeout(2000) })
    await response.body?.cancel()
    if (!response.ok) return false
  } catch {
    return false
  }
  return new Promise((resolve) => {
    const socket = connect(config.smtpPort, config.host === "0.0.0.0" ? "127.0.0.1" : config.host)
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(2000, () => done(false))
    socket.once("error", () => done(false))
    socket.once("data", (chunk) => done(chunk.toString("latin1").startsWith("220")))
  })
}

/**
 * `burnbox start --detach [--ephemeral] [--account EMAIL]`: starts `burnbox start` in the
 * background (output in `<data dir>/burnbox.log`), waits until its API and SMTP answer, and
 * prints BURNBOX_URL, BURNBOX_SMTP_HOST, BURNBOX_SMTP_PORT, BURNBOX_DATA_DIR (and with
 * `--account`, BURNBOX_TOKEN: a token with every scope for that account, a Pro account made when
 * missing) as KEY=value lines.
 */
const startDetached = async (args: Args) => {
  const account = flag(args, "account")
  let removeEphemeral = () => {}
  if (args.flags.has("ephemeral")) {
    // One temporary place for everything, the cluster included (EphemeralMarker): as root,
    // PostgreSQL's user must pass through it to the cluster inside, so it is 0711.
    const place = mkdtempSync(join(tmpdir(), "burnbox-ephemeral-"))
    chmodSync(place, 0o711)
    writeFileSync(join(place, EphemeralMarker), "made by burnbox start --detach --ephemeral; burnbox stop removes this folder\n")
    process.env["BURNBOX_DATA_DIR"] = place
    removeEphemeral = () => rmSync(place, { recursive: true, force: true })
  }
  // The ports are checked here, before the service starts: another service answering on them
  // would pass for this one.
  const checked = await Effect.runPromise(Effect.result(Effect.gen(function*() {
    const settings = yield* BurnboxConfig
    yield* checkPortFree(settings.host, settings.httpPort, "BURNBOX_HTTP_PORT")
    yield* checkPortFree(settings.host, settings.smtpPort, "BURNBOX_SMTP_PORT")
    return settings
  }).pipe(Effect.provide(BurnboxConfig.layer))))
  if (Result.isFailure(checked)) {
    removeEphemeral()
    throw new CliError("start_failed", checked.failure.message)
  }
  const config = checked.success
  const { dataDir } = config
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const pidFile = join(dataDir, PidFile)
  const previous = readPid(pidFile)
  if (previous !== undefined && running(previous)) {
    throw new CliError("running", `burnbox runs already on ${dataDir} (process ${previous}); stop it with BURNBOX_DATA_DIR=${dataDir} burnbox stop`)
  }
  const logFile = join(dataDir, LogFile)
  const log = openSync(logFile, "w", 0o600)
  let child: ChildProcess
  try {
    child = spawn(process.execPath, self(["start"]), { detached: true, stdio: ["ignore", log, log], env: process.env })
  } finally {
    closeSync(log)
  }
  let exited: string | undefined
  child.once("exit", (code, signal) => {
    exited = signal ?? `exit code ${code}`
  })
  writeFileSync(pidFile, `${child.pid}\n`)
  const deadline = Date.now() + StartTimeoutMs
  while (!(await ready(config))) {
    if (exited !== undefined) {
      const failure = new CliError("start_failed", `burnbox did not start (${exited}); the last lines of its output:\n${lastLines(logFile)}`)
      removeEphemeral()
      throw failure
    }
    if (Date.now() > deadline) {
      child.kill("SIGTERM")
      throw new CliError("start_failed", `burnbox did not answer within ${StartTimeoutMs / 1000} s; the last lines of ${logFile}:\n${lastLines(logFile)}`)
    }
    await sleep(200)
  }
  child.unref()
  const lines = [
    `BURNBOX_URL=${config.baseUrl}`,
    `BURNBOX_SMTP_HOST=${config.host === "0.0.0.0" ? "127.0.0.1" : config.host}`,
    `BURNBOX_SMTP_PORT=${config.smtpPort}`,
    `BURNBOX_DATA_DIR=${dataDir}`
  ]
  if (account !== undefined) {
    const created = await adminJson(["account", "create", "--email", account, "--password", randomBytes(18).toString("base64url"), "--plan", "pro"], process.env)
    if (created.error !== undefined && created.error.code !== "email_taken") throw new CliError(created.error.code, created.error.message)
    const token = await adminJson(["token", "create", "--email", account, "--scopes", Scopes.join(","), "--name", "burnbox start --detach"], process.env)
    if (token.error !== undefined || typeof token["secret"] !== "string") throw new CliError(token.error?.code ?? "admin_failed", token.error?.message ?? "no token was made")
    lines.push(`BURNBOX_TOKEN=${token["secret"]}`)
  }
  process.stderr.write(`burnbox runs in the background (process ${child.pid}, output in ${logFile}); stop it with burnbox stop\n`)
  process.stdout.write(lines.join("\n") + "\n")
}

const waitGone = async (pid: number, ms: number) => {
  const deadline = Date.now() + ms
  while (running(pid)) {
    if (Date.now() > deadline) return false
    await sleep(100)
  }
  return true
}

/**
 * `burnbox stop`: stops the detached service of the data dir (BURNBOX_DATA_DIR or ./.burnbox)
 * with SIGTERM and waits until it has exited and its embedded PostgreSQL with it; removes an
 * ephemeral data dir. With nothing running it says so and succeeds, so a CI job's last step
 * may always run it.
 */
const stop = async () => {
  const dataDir = resolvePath(process.env["BURNBOX_DATA_DIR"] || DefaultDataDir)
  if (!existsSync(dataDir)) {
    process.stderr.write(`burnbox: nothing to stop: ${dataDir} does not exist (set BURNBOX_DATA_DIR to the data dir of the running burnbox)\n`)
    return
  }
  const pid = readPid(join(dataDir, PidFile)) ?? readPid(join(dataDir, "burnbox.lock"))
  const stopped: Array<string> = []
  if (pid !== undefined && running(pid)) {
    process.kill(pid, "SIGTERM")
    if (!(await waitGone(pid, StopTimeoutMs))) {
      process.kill(pid, "SIGKILL")
      await waitGone(pid, 5000)
      stopped.push(`process ${pid} (killed after ${StopTimeoutMs / 1000} s)`)
    } else {
      stopped.push(`process ${pid}`)
    }
  }
  // A service that was killed leaves its PostgreSQL running: a fast shutdown stops it.
  const postmaster = readPid(join(clusterLocation(dataDir, { create: false }).pgdata, "postmaster.pid"))
  if (postmaster !== undefined && running(postmaster)) {
    process.kill(postmaster, "SIGINT")
    await waitGone(postmaster, StopTimeoutMs)
    stopped.push(`PostgreSQL (process ${postmaster})`)
  }
  rmSync(join(dataDir, PidFile), { force: true })
  const ephemeral = existsSync(join(dataDir, EphemeralMarker))
  if (ephemeral) rmSync(dataDir, { recursive: true, force: true })
  process.stderr.write(
    `burnbox: ${stopped.length === 0 ? "nothing ran" : `stopped ${stopped.join(" and ")}`} on ${dataDir}${ephemeral ? "; removed it (ephemeral)" : ""}\n`
  )
}

/** The bytes of a folder and everything in it. */
const sizeOf = (path: string): number => {
  const stat = lstatSync(path)
  if (!stat.isDirectory()) return stat.size
  return readdirSync(path).reduce((sum, name) => sum + sizeOf(join(path, name)), stat.size)
}

/**
 * `burnbox admin clusters [--remove]`: the clusters under /var/lib/burnbox/clusters (root's)
 * whose data dir is gone, or names another cluster now; with `--remove`, removed. A cluster
 * whose PostgreSQL runs is never listed.
 */
export const orphanClusters = (options: { readonly remove: boolean; readonly dir?: string }) => {
  const dir = options.dir ?? join(RootRuntimeDir, "clusters")
  const ids = existsSync(dir) ? readdirSync(dir).filter((name) => /^[0-9a-f]{16}$/.test(name)).sort() : []
  const orphans = ids.flatMap((id) => {
    const path = join(dir, id)
    let dataDir: string | null = null
    try {
      dataDir = readFileSync(`${path}.datadir`, "utf8").trim()
    } catch (error) {
      // Missing: made before data dirs were recorded, or half made. Unreadable (not root): not ours to judge.
      if ((error as { code?: string }).code !== "ENOENT") return []
    }
    const owned = (() => {
      try {
        return dataDir !== null && readFileSync(join(dataDir, "cluster-id"), "utf8").trim() === id
      } catch {
        return false
      }
    })()
    const postmaster = readPid(join(path, "postmaster.pid"))
    if (owned || (postmaster !== undefined && running(postmaster))) return []
    return [{ id, path, dataDir, bytes: sizeOf(path) }]
  })
  const remove = options.remove
  for (const orphan of remove ? orphans : []) {
    rmSync(orphan.path, { recursive: true, force: true })
    rmSync(`${orphan.path}.datadir`, { force: true })
  }
  return {
    clusters: orphans.map((orphan) => ({ ...orphan, removed: remove })),
    bytes: orphans.reduce((sum, orphan) => sum + orphan.bytes, 0)
  }
}

/** The three commands, each as main.ts runs it: a failure is one line on stderr and exit code 1. */
export const detached = (command: "start" | "stop" | "clusters", args: Args) =>
  Effect.promise(async () => {
    try {
      if (command === "start") await startDetached(args)
      else if (command === "stop") await stop()
      else process.stdout.write(JSON.stringify(orphanClusters({ remove: args.flags.has("remove") }), null, 2) + "\n")
    } catch (error) {
      process.stderr.write(`burnbox: ${error instanceof Error ? error.message : String(error)}\n`)
      process.exitCode = 1
    }
  })
