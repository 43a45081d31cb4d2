/**
 * First run anywhere: `burnbox start` from a clone and with a data dir inside directories only
 * their owner may enter (as root: /root, a `mktemp -d` folder), and every first-run failure
 * answered by one line on stderr and a non-zero exit.
 */
import { execFile, execFileSync } from "node:child_process"
import { appendFileSync, chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:net"
import { userInfo } from "node:os"
import { join } from "node:path"
import { clusterLocation, freePort, removeCluster, RootRuntimeDir } from "@burnbox/store"
import { clusterUrl } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { baseEnv, burnbox, listenerPort, repo, type Run, start } from "./Programs.ts"

const asRoot = userInfo().uid === 0

/** A folder only its owner may enter, inside the repository (so a clone can be hard-linked into it). */
const privateDir = (parent = repo) => {
  const dir = mkdtempSync(join(parent, ".first-run-"))
  chmodSync(dir, 0o700)
  return dir
}

/** A clone of this checkout in `dir`: the workspace as installed, hard-linked (copied where links fail). */
const cloneInto = (dir: string) => {
  const clone = join(dir, "clone")
  mkdirSync(clone)
  const parts = ["package.json", "packages", "node_modules"].map((part) => join(repo, part))
  try {
    execFileSync("cp", ["-al", ...parts, clone])
  } catch {
    execFileSync("cp", ["-a", ...parts, clone])
  }
  return clone
}

/** One line on stderr, and a non-zero exit. */
const expectOneLine = (run: Run, pattern: RegExp) => {
  expect(run.code, run.stderr).not.toBe(0)
  expect(run.code).not.toBeNull()
  const lines = run.stderr.trimEnd().split("\n")
  expect(lines, run.stderr).toHaveLength(1)
  expect(lines[0]).toMatch(/^burnbox: /)
  expect(lines[0]).toMatch(pattern)
}

const signupAndLogin = async (api: string, email: string, signup: boolean) => {
  const body = JSON.stringify({ email, password: "correct horse battery" })
  const headers = { "content-type": "application/json" }
  if (signup) expect((await fetch(`${api}/auth/signup`, { method: "POST", headers, body })).status).toBe(201)
  expect((await fetch(`${api}/auth/login`, { method: "POST", headers, body })).status).toBe(200)
}

const mode = (path: string) => statSync(path).mode & 0o777

describe("burnbox start in private directories", () => {
  const made: Array<string> = []
  afterAll(() => {
    for (const dir of made) rmSync(dir, { recursive: true, force: true })
  })

  it("starts, stops and starts again from a clone inside a 0700 directory, data in the default place; a second start is refused naming the first", async () => {
    const home = privateDir()
    made.push(home)
    const clone = cloneInto(home)
    const dataDir = join(clone, ".burnbox")
    try {
      const first = await start(clone, {})
      await signupAndLogin(first.api, "first@example.com", true)
      // The data dir is locked by the running process: a second start names it.
      const second = await burnbox(["start"], { BURNBOX_HTTP_PORT: String(await listenerPort()), BURNBOX_SMTP_PORT: String(await listenerPort()) }, clone)
      expectOneLine(second, new RegExp(`in use by process ${first.child.pid} \\(burnbox start; lock file ${dataDir}/burnbox\\.lock\\)`))
      await first.stop()
      expect(existsSync(join(dataDir, "burnbox.lock"))).toBe(false)

      const again = await start(clone, {})
      await signupAndLogin(again.api, "first@example.com", false)
      await again.stop()

      // Nothing of the user's was loosened, and the cluster lives where the postgres user may go.
      expect(mode(home)).toBe(0o700)
      expect(mode(dataDir)).toBe(0o700)
      const { pgdata } = clusterLocation(dataDir, { create: false })
      if (asRoot) {
        expect(pgdata.startsWith(`${RootRuntimeDir}/clusters/`)).toBe(true)
        expect(statSync(pgdata).uid).not.toBe(0)
      } else {
        expect(pgdata).toBe(join(dataDir, "postgres"))
      }

      // A PostgreSQL that will not start: its log's last lines, after one line of ours.
      appendFileSync(join(pgdata, "postgresql.conf"), "\nshared_buffers = 'plenty'\n")
      const broken = await burnbox(["start"], { BURNBOX_HTTP_PORT: String(await listenerPort()), BURNBOX_SMTP_PORT: String(await listenerPort()) }, clone)
      expect(broken.code).toBe(1)
      const [headline, ...log] = broken.stderr.trimEnd().split("\n")
      expect(headline).toMatch(/^burnbox: PostgreSQL did not start \(exit code \d+\); the last lines of its log:$/)
      expect(log.join("\n")).toMatch(/shared_buffers/)
      expect(existsSync(join(dataDir, "burnbox.lock"))).toBe(false)
    } finally {
      removeCluster(dataDir)
    }
  })

  it("keeps BURNBOX_DATA_DIR under a private directory across restarts, and two data dirs never share a cluster", async () => {
    const outer = privateDir()
    made.push(outer)
    const one = join(outer, "nested", "one")
    const two = join(outer, "two")
    try {
      const a = await start(repo, { BURNBOX_DATA_DIR: one })
      await signupAndLogin(a.api, "one@example.com", true)
      const b = await start(repo, { BURNBOX_DATA_DIR: two })
      // The other data dir's account is not here.
      const login = await fetch(`${b.api}/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ email: "one@example.com", password: "correct horse battery" }) })
      expect(login.status).toBe(401)
      await Promise.all([a.stop(), b.stop()])
      expect(clusterLocation(one, { create: false }).pgdata).not.toBe(clusterLocation(two, { create: false }).pgdata)

      const again = await start(repo, { BURNBOX_DATA_DIR: one })
      await signupAndLogin(again.api, "one@example.com", false)
      await again.stop()
      expect(mode(outer)).toBe(0o700)
    } finally {
      removeCluster(one)
      removeCluster(two)
    }
  })

  it.runIf(asRoot)("refuses a copy of a data dir whose original still exists, and follows a moved one", async () => {
    const outer = privateDir()
    made.push(outer)
    const original = join(outer, "original")
    try {
      const a = await start(repo, { BURNBOX_DATA_DIR: original })
      await signupAndLogin(a.api, "moved@example.com", true)
      await a.stop()
      execFileSync("cp", ["-a", original, join(outer, "copy")])
      const copy = await burnbox(["start"], { BURNBOX_DATA_DIR: join(outer, "copy"), BURNBOX_HTTP_PORT: String(await listenerPort()), BURNBOX_SMTP_PORT: String(await listenerPort()) })
      expectOneLine(copy, /is a copy of .*original: both name the database cluster/)
      rmSync(join(outer, "copy"), { recursive: true })
      execFileSync("mv", [original, join(outer, "moved")])
      const moved = await start(repo, { BURNBOX_DATA_DIR: join(outer, "moved") })
      await signupAndLogin(moved.api, "moved@example.com", false)
      await moved.stop()
    } finally {
      removeCluster(join(outer, "moved"))
      removeCluster(original)
    }
  })
})

describe("first-run failures, each one line and a non-zero exit", () => {
  let dir: string
  let busy: Server
  let busyPort: number
  beforeAll(async () => {
    dir = privateDir()
    busy = createServer()
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve))
    const address = busy.address()
    busyPort = typeof address === "object" && address !== null ? address.port : 0
  })
  afterAll(() => {
    busy.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it("a port in use names the variable that sets it", async () => {
    const http = await burnbox(["start"], { BURNBOX_DATA_DIR: join(dir, "ports"), BURNBOX_HTTP_PORT: String(busyPort) })
    expectOneLine(http, new RegExp(`port ${busyPort} on 127\\.0\\.0\\.1 is in use; set BURNBOX_HTTP_PORT to a free port`))
    const smtp = await burnbox(["start"], { BURNBOX_DATA_DIR: join(dir, "ports"), BURNBOX_HTTP_PORT: String(await listenerPort()), BURNBOX_SMTP_PORT: String(busyPort) })
    expectOneLine(smtp, /is in use; set BURNBOX_SMTP_PORT to a free port/)
    const ingest = await burnbox(["ingest"], { BURNBOX_DATA_DIR: join(dir, "ports"), BURNBOX_SMTP_PORT: String(busyPort) })
    expectOneLine(ingest, /set BURNBOX_SMTP_PORT/)
    // Nothing was started for them: no database was made.
    expect(existsSync(join(dir, "ports", "postgres.password"))).toBe(false)
  })

  it("a data dir that cannot be created or written names BURNBOX_DATA_DIR", async () => {
    const file = join(dir, "a-file")
    writeFileSync(file, "not a directory")
    const env = { BURNBOX_HTTP_PORT: String(await listenerPort()), BURNBOX_SMTP_PORT: String(await listenerPort()) }
    expectOneLine(await burnbox(["start"], { ...env, BURNBOX_DATA_DIR: join(file, "data") }), /cannot create or write the data directory .*a-file\/data \(ENOTDIR.*set BURNBOX_DATA_DIR/)
    // With the secret given, the data dir is still needed for the embedded database.
    expectOneLine(await burnbox(["start"], { ...env, BURNBOX_DATA_DIR: join(file, "data"), BURNBOX_SECRET: "s" }), /cannot create or write the data directory .*set BURNBOX_DATA_DIR/)
    if (!asRoot) {
      const readOnly = join(dir, "read-only")
      mkdirSync(readOnly, { mode: 0o500 })
      expectOneLine(await burnbox(["start"], { ...env, BURNBOX_DATA_DIR: join(readOnly, "data") }), /\(EACCES.*set BURNBOX_DATA_DIR/)
    }
  })

  it("a DATABASE_URL that cannot be reached, or refuses the password, or names no database", async () => {
    const env = { BURNBOX_DATA_DIR: join(dir, "external"), BURNBOX_HTTP_PORT: String(await listenerPort()), BURNBOX_SMTP_PORT: String(await listenerPort()) }
    const closed = await freePort()
    expectOneLine(
      await burnbox(["start"], { ...env, DATABASE_URL: `postgres://someone:secret-password@127.0.0.1:${closed}/burnbox` }),
      new RegExp(`cannot reach PostgreSQL at 127\\.0\\.0\\.1:${closed}/burnbox as someone \\(ECONNREFUSED\\); check DATABASE_URL`)
    )
    const cluster = new URL(clusterUrl())
    cluster.password = "wrong-password"
    const refused = await burnbox(["serve"], { ...env, DATABASE_URL: cluster.toString() })
    expectOneLine(refused, /PostgreSQL at 127\.0\.0\.1:\d+\/postgres as burnbox refused the credentials of DATABASE_URL/)
    // The password never appears.
    expect(refused.stderr).not.toContain("wrong-password")
    const missing = new URL(clusterUrl())
    missing.pathname = "/no_such_database"
    expectOneLine(await burnbox(["worker"], { ...env, DATABASE_URL: missing.toString() }), /the database of DATABASE_URL does not exist/)
  })

  it("a Node.js older than the workspace supports is told so by the program and by ./pnpmw", async () => {
    const oldNode = ["/usr/bin/node", "/usr/local/bin/node"].find((path) => {
      try {
        return Number(execFileSync(path, ["-p", "process.versions.node.split('.')[0]"], { encoding: "utf8" }).trim()) < 24
      } catch {
        return false
      }
    })
    if (oldNode !== undefined) {
      const run = await new Promise<Run>((resolve) =>
        execFile(oldNode, [join(repo, "packages/cli/bin/burnbox.mjs"), "start"], { env: baseEnv({}) }, (error, stdout, stderr) =>
          resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr }))
      )
      expectOneLine(run, /Node\.js v\d+\.\d+\.\d+ is older than this workspace supports \(24 or newer\)/)
    }
    // ./pnpmw itself runs on the machine's Node.js; one too old for pnpm is refused before anything is installed.
    const fakeBin = join(dir, "old-node-bin")
    mkdirSync(fakeBin)
    writeFileSync(join(fakeBin, "node"), "#!/bin/sh\nif [ \"$1\" = -v ]; then echo v16.20.2; exit 0; fi\nexit 1\n", { mode: 0o755 })
    writeFileSync(join(fakeBin, "npm"), "#!/bin/sh\nexit 1\n", { mode: 0o755 })
    const wrapped = await new Promise<Run>((resolve) =>
      execFile(join(repo, "pnpmw"), ["burnbox", "start"], { env: baseEnv({ PATH: `${fakeBin}:/usr/bin:/bin` }) }, (error, stdout, stderr) =>
        resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr }))
    )
    expect(wrapped.code).toBe(1)
    expect(wrapped.stderr.trimEnd().split("\n")).toEqual([
      "pnpmw: Node.js v16.20.2 is older than this workspace supports; install Node.js 18.12 or newer: burnbox brings Node.js 24 itself"
    ])
  })

  it("a lock left by a process that is gone is taken over", async () => {
    const dataDir = join(dir, "stale")
    mkdirSync(dataDir, { recursive: true })
    // A PID that is not running: the largest possible one.
    const pidMax = Number(readFileSync("/proc/sys/kernel/pid_max", "utf8").trim())
    writeFileSync(join(dataDir, "burnbox.lock"), `${pidMax}\nburnbox start\n`)
    try {
      const service = await start(repo, { BURNBOX_DATA_DIR: dataDir })
      expect(readFileSync(join(dataDir, "burnbox.lock"), "utf8")).toBe(`${service.child.pid}\nburnbox start\n`)
      await service.stop()
    } finally {
      removeCluster(dataDir)
    }
  })
})
