/**
 * The client runs in browsers: bundled for the browser platform (rolldown, the bundler vite
 * ships), it resolves without any Node built-in and imports nothing from outside the bundle.
 */
import { fileURLToPath } from "node:url"
import { build } from "rolldown"
import { describe, expect, it } from "vitest"

const entry = fileURLToPath(new URL("../src/index.ts", import.meta.url))

describe("browser bundle", () => {
  it("bundles @burnbox/client for the browser with no node: imports", async () => {
    const warnings: Array<string> = []
    const result = await build({
      input: entry,
      platform: "browser",
      write: false,
      onLog: (_level, log) => {
        warnings.push(log.message)
      },
      output: { format: "esm" }
    })
    const chunks = result.output.flatMap((output) => output.type === "chunk" ? [output] : [])
    const code = chunks.map((chunk) => chunk.code).join("\n")
    expect(chunks.flatMap((chunk) => [...chunk.imports, ...chunk.dynamicImports])).toEqual([])
    expect(code).not.toMatch(/(?:from\s*|import\s*\(\s*|require\s*\(\s*)["']node:/)
    expect(warnings.filter((message) => /node:|unresolved/i.test(message))).toEqual([])
    expect(code).toContain("BurnboxProblem")
  }, 60_000)
})
