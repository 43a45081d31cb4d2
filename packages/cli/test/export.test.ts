/**
 * `burnbox export` (issue #33), run as a script would run it against a running burnbox: it
 * requests the export, follows its progress (JSON lines with --json), downloads the ZIP and checks
 * every .eml against its manifest's SHA-256. The harness runs no exports worker of its own: the
 * test builds what is due while the program waits, as a worker would.
 */
import { execFile } from "node:child_process"
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { claimAlias, deliver, type Harness, readZip, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verifyArchive } from "@burnbox/cli/Export"

const bin = fileURLToPath(new URL("../bin/burnbox.mjs", import.meta.url))

let h: Harness
let token: string
let dir: string
let address: string
let aliasIds: Array<number>

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const burnbox = (args: ReadonlyArray<string>) =>
  new Promise<Run>((resolve) => {
    execFile(process.execPath, [bin, ...args], { env: { ...process.env, BURNBOX_URL: h.baseUrl, BURNBOX_TOKEN: token }, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr }))
  })

/** Runs the program while building exports as they come due, as the worker's job would. */
const withWorker = async (args: ReadonlyArray<string>) => {
  const state = { running: true }
  const program = burnbox(args).finally(() => {
    state.running = false
  })
  while (state.running) {
    await h.worker.buildExports()
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return program
}

beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 3302 })
  const session = await h.signup({ plan: "pro" })
  token = await h.createToken(session, ["read", "manage-aliases", "test"], "export")
  const first = await claimAlias(h, { token })
  const second = await claimAlias(h, { token })
  address = first.address
  aliasIds = [...(await deliver(h, { token }, first.id, 3)), ...(await deliver(h, { token }, second.id, 2))]
  dir = await mkdtemp(join(tmpdir(), "burnbox-export-"))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
  await h?.close()
})

describe("burnbox export", () => {
  it("with --json prints JSON lines (queued, progress, download, done), writes the ZIP and checks its hashes", async () => {
    const out = join(dir, "all.zip")
    const run = await withWorker(["export", "--out", out, "--json"])
    expect(run.code, run.stderr).toBe(0)
    const lines = run.stdout.trimEnd().split("\n").map((line) => JSON.parse(line))
    expect(lines[0]).toMatchObject({ event: "queued", status: "pending", alias: null })
    expect(lines.some((line) => line.event === "progress" && line.status === "ready" && line.done === 5 && line.total === 5)).toBe(true)
    expect(lines.at(-1)).toMatchObject({ event: "done", file: out, messages: 5, verified: true })
    const entries = await readZip(await readFile(out))
    expect([...entries.keys()].filter((name) => name.endsWith(".eml"))).toHaveLength(aliasIds.length)
  })

  it("exports one alias by address, and prints one line without --json", async () => {
    const out = join(dir, "one.zip")
    const run = await withWorker(["export", "--alias", address, "--out", out])
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toMatch(/^export \d+: 3 messages, \d+ bytes, hashes checked -> .*one\.zip\n$/)
  })

  it("finds an archive whose bytes do not match the manifest", async () => {
    const out = join(dir, "all.zip")
    const bytes = await readFile(out)
    const entries = await readZip(bytes)
    const [name, eml] = [...entries].find(([n]) => n.endsWith(".eml"))!
    // Flip one byte of the first message's stored bytes (STORE: they appear as they are).
    const at = bytes.indexOf(eml) + 10
    bytes[at] = bytes[at]! ^ 0xff
    const broken = join(dir, "broken.zip")
    await writeFile(broken, bytes)
    const check = await verifyArchive(broken).catch((error: Error) => ({ problems: [error.message] }))
    expect(check.problems.length, name).toBeGreaterThan(0)
  })

  it("refuses without --out (usage, exit 2) and an unknown alias (exit 1)", async () => {
    const usage = await burnbox(["export"])
    expect(usage.code).toBe(2)
    expect(usage.stderr).toMatch(/--out FILE is required/)
    const unknown = await burnbox(["export", "--alias", "nobody@example.com", "--out", join(dir, "x.zip")])
    expect(unknown.code).toBe(1)
  })
})
