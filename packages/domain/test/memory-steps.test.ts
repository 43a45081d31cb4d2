/**
 * BURNBOX_MEMORY_STEPS (the memory at each step of a big message's work, for bench:bigmail's
 * breakdowns): off, nothing is written; on, one JSON line per step of a message of at least
 * BURNBOX_MEMORY_STEPS_BYTES. The setting is read when the module loads, so each case runs in a
 * process of its own.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "vitest"

const dir = mkdtempSync(join(tmpdir(), "burnbox-memory-steps-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const module = fileURLToPath(new URL("../src/platform/MemorySteps.ts", import.meta.url))

/** Runs two steps (a 2 MiB message, a 1 KiB one) in a new process with `env`. */
const steps = (env: Record<string, string>) =>
  execFileSync(process.execPath, ["--input-type=module", "-e", `
    const { memoryStep } = await import(${JSON.stringify(module)})
    memoryStep("thread.parsed", 2 * 1024 * 1024)
    memoryStep("thread.parsed", 1024)`], { env: { ...process.env, BURNBOX_MEMORY_STEPS: "", ...env } })

describe("memory steps", () => {
  it("writes nothing unless BURNBOX_MEMORY_STEPS names a file", () => {
    steps({ BURNBOX_MEMORY_STEPS_BYTES: "0" })
    expect(readdirSync(dir)).toEqual([])
  })

  it("writes one JSON line per step of a big enough message: when, where, which step and the memory", () => {
    const file = join(dir, "on.jsonl")
    steps({ BURNBOX_MEMORY_STEPS: file })
    const lines = readFileSync(file, "utf8").trim().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({ thread: "main", step: "thread.parsed", size: 2 * 1024 * 1024 })
    for (const field of ["at", "rss", "heapUsed", "heapTotal", "external", "arrayBuffers"]) expect(typeof lines[0]![field], field).toBe("number")
    expect(lines[0]!["rss"]).toBeGreaterThan(0)
    steps({ BURNBOX_MEMORY_STEPS: file, BURNBOX_MEMORY_STEPS_BYTES: "0" })
    expect(readFileSync(file, "utf8").trim().split("\n")).toHaveLength(3)
  })
})
