/**
 * `burnbox start` as a user meets it: the banner tells how to create an account only while there
 * is none; Ctrl-C (SIGINT to its terminal's process group) or SIGTERM during requests, SMTP
 * sessions and waits stops it quietly, says what it stopped and exits 0; and an operator command
 * on a data dir holding no burnbox data refuses in one line and makes nothing.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { removeCluster } from "@burnbox/store"
import { SmtpClient } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { burnbox, repo, type Service, start } from "./Programs.ts"

let dir: string
beforeAll(() => {
  dir = mkdtempSync(join(repo, ".planned-stop-"))
})
afterAll(() => {
  removeCluster(join(dir, "data"))
  rmSync(dir, { recursive: true, force: true })
})

const json = { "content-type": "application/json" }

/** What a planned stop must not print: warnings, errors, stack traces. */
const expectQuiet = (service: Service) => {
  const stderr = service.stderr()
  expect(stderr, stderr).not.toMatch(/level=(ERROR|WARN|FATAL)/)
  expect(stderr, stderr).not.toMatch(/^\s+at /m)
  expect(stderr, stderr).not.toMatch(/terminating connection|LISTEN connection ended|ECONNREFUSED|ENOENT/)
}

/**
 * Work in flight when the signal comes: a waiting GET /messages, an SMTP session in the middle
 * of a message, an idle SMTP session, and a stream of GET /me requests.
 */
const busy = async (service: Service, token: string, alias: { readonly id: number; readonly address: string }) => {
  const auth = { authorization: `Bearer ${token}` }
  const waiting = fetch(`${service.api}/messages?alias=${alias.id}&wait=60`, { headers: auth })
    .then((answer) => answer.status, () => 0)
  const sending = await SmtpClient.open(service.smtpPort)
  await sending.read()
  for (const line of ["EHLO client.example.org", "MAIL FROM:<shop@example.com>", `RCPT TO:<${alias.address}>`, "DATA"]) await sending.command(line)
  sending.send("Subject: half a message\r\n\r\nYour code is")
  const idle = await SmtpClient.open(service.smtpPort)
  await idle.read()
  const state = { requests: true }
  const reads = (async () => {
    let answered = 0
    while (state.requests) {
      if ((await fetch(`${service.api}/me`, { headers: auth }).then((r) => r.status, () => 0)) === 200) answered++
    }
    return answered
  })()
  // The wait is held by now, the stream of reads is going.
  await new Promise((resolve) => setTimeout(resolve, 500))
  return {
    waiting,
    done: async () => {
      state.requests = false
      const answered = await reads
      await Promise.all([sending.quit().catch(() => undefined), idle.quit().catch(() => undefined)])
      return answered
    }
  }
}

describe("burnbox start: the banner, and a planned stop", () => {
  it("Ctrl-C and SIGTERM during requests, SMTP sessions and waits: no warning, error or stack trace, a line saying what stopped, exit 0", async () => {
    const env = { BURNBOX_DATA_DIR: join(dir, "data") }
    const first = await start(repo, env)
    // No account yet: the banner says how to make one.
    expect(first.stdout()).toContain("Create an account:")
    // Run from a clone, the program is reached through the workspace's wrapper (installed, by its name).
    expect(first.stdout()).toContain("or: ./pnpmw burnbox admin account create --email")
    const signup = await fetch(`${first.api}/auth/signup`, { method: "POST", headers: json, body: JSON.stringify({ email: "stop@example.com", password: "correct horse battery" }) })
    expect(signup.status).toBe(201)
    const plan = await burnbox(["admin", "account", "plan", "--email", "stop@example.com", "--plan", "pro"], env)
    expect(plan.code, plan.stdout + plan.stderr).toBe(0)
    const issued = await burnbox(["admin", "token", "create", "--email", "stop@example.com", "--scopes", "read,manage-aliases"], env)
    const token: string = JSON.parse(issued.stdout).secret
    const auth = { authorization: `Bearer ${token}`, ...json }
    const reserved = await fetch(`${first.api}/aliases/candidates`, { method: "POST", headers: auth, body: JSON.stringify({ domainId: 1, style: "words" }) })
    const reservation = (await reserved.json()) as { reservationToken: string; candidates: Array<{ id: number }> }
    const claimed = await fetch(`${first.api}/aliases`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ aliasId: reservation.candidates[0]!.id, reservationToken: reservation.reservationToken })
    })
    expect(claimed.status).toBe(201)
    const alias = (await claimed.json()) as { id: number; address: string }

    for (const signal of ["SIGINT", "SIGTERM"] as const) {
      const service = signal === "SIGINT" ? first : await start(repo, env)
      // An account exists now: no word on making one.
      if (signal === "SIGTERM") expect(service.stdout()).not.toContain("Create an account")
      // Each round on a token of its own: the reads below run the previous round's token to its request limit.
      const roundToken = signal === "SIGINT"
        ? token
        : JSON.parse((await burnbox(["admin", "token", "create", "--email", "stop@example.com", "--scopes", "read,manage-aliases"], env)).stdout).secret
      const work = await busy(service, roundToken, alias)
      const stopping = Date.now()
      const code = await service.stop(signal)
      const answered = await work.done()
      expect(code, `${signal}:\n${service.output()}`).toBe(0)
      // A guard against a stop that hangs, not a speed figure: alone it takes a few seconds, and
      // under the whole suite's load (two test files at once beside it) about 20 s.
      expect(Date.now() - stopping).toBeLessThan(40_000)
      expectQuiet(service)
      expect(service.stdout()).toMatch(/^burnbox stopped: the HTTP API, the SMTP ingest and the worker$/m)
      expect(service.stderr()).toContain("embedded PostgreSQL stopped")
      // The wait was answered (its empty page), not cut off; reads went on until the listener closed.
      expect(await work.waiting).toBe(200)
      expect(answered).toBeGreaterThan(0)
    }
    // The embedded PostgreSQL's log is kept in the data dir: both starts and both stops.
    const log = readFileSync(join(dir, "data", "postgres.log"), "utf8")
    expect(log.match(/database system is ready to accept connections/g)).toHaveLength(2)
    expect(log.match(/database system is shut down/g)).toHaveLength(2)
  })
})

describe("burnbox admin on a data dir that holds no burnbox data", () => {
  it("refuses in one line naming the data dir and BURNBOX_DATA_DIR, and makes nothing: no ./.burnbox, no data dir, no cluster", async () => {
    const empty = join(dir, "elsewhere")
    mkdirSync(empty)
    const inCwd = await burnbox(["admin", "account", "plan", "--email", "stop@example.com", "--plan", "pro"], {}, repo, empty)
    const named = await burnbox(["admin", "token", "create", "--email", "a@example.com", "--scopes", "read"], { BURNBOX_DATA_DIR: join(empty, "nothing-here") }, repo)
    for (const [run, dataDir] of [[inCwd, join(empty, ".burnbox")], [named, join(empty, "nothing-here")]] as const) {
      expect(run.code).toBe(1)
      expect(run.stdout.trimEnd().split("\n"), run.stdout).toHaveLength(1)
      const { error } = JSON.parse(run.stdout)
      expect(error.code).toBe("no_burnbox_data")
      expect(error.message).toContain(dataDir)
      expect(error.message).toContain("BURNBOX_DATA_DIR")
      expect(existsSync(dataDir)).toBe(false)
    }
    // As root a cluster is made only beside a data dir's cluster-id: with no data dir, none was.
    expect(readdirSync(empty)).toEqual([])
    // Where the service's data is, the same command works.
    const there = await burnbox(["admin", "account", "plan", "--email", "stop@example.com", "--plan", "premium"], { BURNBOX_DATA_DIR: join(dir, "data") })
    expect(there.code, there.stdout).toBe(0)
  })
})
