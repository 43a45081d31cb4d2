/**
 * The `burnbox` program as a child process, as a user runs it from a clone: run to its end, or
 * `burnbox start` kept running (in its own process group, as a terminal runs it) and stopped with
 * a signal to that group, as Ctrl-C does.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { createServer } from "node:net"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

export const repo = fileURLToPath(new URL("../../../", import.meta.url))

export interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** This process's environment without burnbox's settings, plus `extra`. */
export const baseEnv = (extra: Record<string, string>) => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.startsWith("BURNBOX_") && key !== "DATABASE_URL") env[key] = value
  }
  return { ...env, ...extra }
}

/** Runs `burnbox <args>` of the clone `from` (this one by default) in `cwd` to its end. */
export const burnbox = (args: ReadonlyArray<string>, env: Record<string, string>, from = repo, cwd = from) =>
  new Promise<Run>((resolve) => {
    execFile(process.execPath, [join(from, "packages/cli/bin/burnbox.mjs"), ...args], { cwd, env: baseEnv(env), timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr })
    })
  })

/**
 * A free port for the service's listeners, below Linux's ephemeral range (32768+), where the
 * embedded PostgreSQL's own port (one the system hands out) can never land on it meanwhile.
 */
export const listenerPort = async (): Promise<number> => {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000)
    const free = await new Promise<boolean>((resolve) => {
      const server = createServer()
      server.once("error", () => resolve(false))
      server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
    })
    if (free) return port
  }
}

export interface Service {
  readonly child: ChildProcess
  readonly api: string
  readonly smtpPort: number
  /** stdout and stderr as they came, interleaved. */
  readonly output: () => string
  readonly stdout: () => string
  readonly stderr: () => string
  /** Sends `signal` to the program's process group (SIGINT: Ctrl-C in its terminal) and waits for its exit code. */
  readonly stop: (signal?: NodeJS.Signals) => Promise<number | null>
}

/** Starts `burnbox start` and waits until GET /me answers 401. */
export const start = async (cwd: string, env: Record<string, string>): Promise<Service> => {
  const httpPort = await listenerPort()
  const smtpPort = await listenerPort()
  const child = spawn(process.execPath, [join(cwd, "packages/cli/bin/burnbox.mjs"), "start"], {
    cwd,
    env: baseEnv({ BURNBOX_HTTP_PORT: String(httpPort), BURNBOX_SMTP_PORT: String(smtpPort), ...env }),
    stdio: ["ignore", "pipe", "pipe"],
    detached: true
  })
  let output = ""
  let stdout = ""
  let stderr = ""
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString()
    stdout += chunk.toString()
  })
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString()
    stderr += chunk.toString()
  })
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const api = `http://127.0.0.1:${httpPort}/api/v1`
  const deadline = Date.now() + 90_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`burnbox start exited with ${child.exitCode}:\n${output}`)
    const status = await fetch(`${api}/me`).then((r) => r.status, () => 0)
    // Serving, and the banner is out.
    if (status === 401 && stdout.includes("Stop with Ctrl-C.")) break
    if (Date.now() > deadline) {
      child.kill("SIGKILL")
      throw new Error(`burnbox start did not answer within 90 s:\n${output}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  return {
    child,
    api,
    smtpPort,
    output: () => output,
    stdout: () => stdout,
    stderr: () => stderr,
    stop: (signal = "SIGINT") => {
      if (child.exitCode === null && child.pid !== undefined) process.kill(-child.pid, signal)
      return exited
    }
  }
}
