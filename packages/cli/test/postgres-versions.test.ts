/**
 * The migrations on the oldest PostgreSQL the README names (Debian 12's 15; the embedded one is
 * 18): `burnbox migrate` with DATABASE_URL pointing at it applies them all, the schema is the one
 * the embedded PostgreSQL gets, and a second run applies nothing. The package is installed with
 * apt when missing (CI runs as root on Debian 12); without apt the test says so and is skipped.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freePort, postgresTooOld, postgresUser, withClient } from "@burnbox/store"
import { clusterUrl } from "@burnbox/testkit"
import { Effect, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { burnbox } from "./Programs.ts"

/** The oldest PostgreSQL the README says burnbox runs on, and the Debian package that brings it. */
const Oldest = 15
const Package = `postgresql-${Oldest}`
const binDir = `/usr/lib/postgresql/${Oldest}/bin`

const hasApt = (() => {
  try {
    execFileSync("sh", ["-c", "command -v apt-get"], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
})()

/** Installs the package when it is missing; false (and why) when it cannot be. */
const ensureInstalled = (): string | undefined => {
  if (existsSync(join(binDir, "postgres"))) return undefined
  if (!hasApt) return `${Package} is not installed and apt-get is not available to install it`
  execFileSync("sh", ["-c", `(apt-get install -y --no-install-recommends ${Package} || (apt-get update && apt-get install -y --no-install-recommends ${Package})) >/dev/null 2>&1`], {
    env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
    timeout: 600_000
  })
  return existsSync(join(binDir, "postgres")) ? undefined : `apt-get install ${Package} did not install ${binDir}/postgres`
}

const missing = ensureInstalled()
if (missing !== undefined) process.stderr.write(`postgres-versions.test.ts skipped: ${missing}\n`)

let dir: string
let server: ChildProcess | undefined
let url: string

const query = <A>(connection: string, text: string): Promise<Array<A>> =>
  Effect.runPromise(withClient(Redacted.make(connection), async (client) => (await client.query(text)).rows as Array<A>))

/** The column storage of message_search and its partitions, as PostgreSQL records it. */
const storageOf = (connection: string) =>
  query<{ table: string; column: string; storage: string }>(connection, `
    SELECT c.relname AS table, a.attname AS column, a.attstorage AS storage FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    WHERE c.relname LIKE 'message_search%' AND c.relkind IN ('p', 'r') AND a.attname IN ('search', 'toast_pad') ORDER BY 1, 2`)

describe.skipIf(missing !== undefined)(`migrations on PostgreSQL ${Oldest}`, () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "burnbox-pg-oldest-"))
    chmodSync(dir, 0o755)
    const owner = postgresUser()
    if (owner.uid !== undefined) chownSync(dir, owner.uid, owner.gid ?? owner.uid)
    const pgdata = join(dir, "data")
    execFileSync(join(binDir, "initdb"), ["-D", pgdata, "-U", "burnbox", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"], { ...owner, stdio: "ignore" })
    const port = await freePort()
    server = spawn(join(binDir, "postgres"), ["-D", pgdata, "-p", String(port), "-c", "listen_addresses=127.0.0.1", "-c", `unix_socket_directories=${dir}`], {
      ...owner,
      stdio: "ignore"
    })
    const admin = `postgres://burnbox@127.0.0.1:${port}/postgres`
    for (let tries = 0; ; tries++) {
      try {
        await query(admin, "SELECT 1")
        break
      } catch (error) {
        if (tries > 100) throw error
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
    await query(admin, "CREATE DATABASE burnbox")
    url = `postgres://burnbox@127.0.0.1:${port}/burnbox`
  })
  afterAll(async () => {
    if (server !== undefined && server.exitCode === null) {
      const exited = new Promise((resolve) => server!.once("exit", resolve))
      server.kill("SIGINT")
      await exited
    }
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  it("burnbox migrate applies every migration, to the schema the embedded PostgreSQL has; again, none", async () => {
    const [version] = await query<{ server_version_num: string }>(url, "SHOW server_version_num")
    expect(Math.floor(Number(version?.server_version_num) / 10_000)).toBe(Oldest)
    const first = await burnbox(["migrate"], { DATABASE_URL: url, BURNBOX_DATA_DIR: join(dir, "burnbox") })
    expect(first.code, first.stdout + first.stderr).toBe(0)
    const migrations = readdirSync(new URL("../../store/migrations/", import.meta.url)).filter((file) => file.endsWith(".sql"))
    expect(JSON.parse(first.stdout).applied).toEqual(migrations.map((file) => file.slice(0, -4)))
    const again = await burnbox(["migrate"], { DATABASE_URL: url, BURNBOX_DATA_DIR: join(dir, "burnbox") })
    expect(JSON.parse(again.stdout)).toEqual({ applied: [] })
    // The words out of line, the pad in line, on every partition: as on the embedded PostgreSQL.
    const here = await storageOf(url)
    expect(here).toHaveLength(34)
    expect(new Set(here.map((row) => `${row.column}:${row.storage}`))).toEqual(new Set(["search:e", "toast_pad:m"]))
    const template = new URL(clusterUrl())
    template.pathname = "/burnbox_template"
    expect(here).toEqual(await storageOf(template.toString()))
  })
})

describe("an older PostgreSQL", () => {
  it("is refused in one line naming the version found and the one needed", () => {
    expect(postgresTooOld(130_016, "13.16")).toBe("PostgreSQL 13.16 is older than burnbox needs (14 or newer); point DATABASE_URL at a newer one")
    expect(postgresTooOld(140_000, "14.0")).toBeUndefined()
    expect(postgresTooOld(150_018, "15.18 (Debian 15.18-0+deb12u1)")).toBeUndefined()
  })
})
