/**
 * The client runs on Node 20 (the oldest Node it supports): bundled for Node as plain ESM
 * JavaScript (rolldown, the bundler vite ships; Node 20 cannot load the package's TypeScript
 * sources itself), a script on the machine's Node 20 claims an alias, waits for injected mail,
 * reads its code and burns the alias against a real service (the harness).
 */
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { type Harness, startHarness } from "@burnbox/testkit"
import { build } from "rolldown"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const entry = fileURLToPath(new URL("../src/index.ts", import.meta.url))
/** The machine's Node (the workspace brings Node 24 for itself; the machines run Node 20). */
const systemNode = "/usr/bin/node"

const run = promisify(execFile)
const script = `
import { createClient } from "./client.mjs"
const burnbox = createClient({ baseUrl: process.env.BURNBOX_URL, token: process.env.BURNBOX_TOKEN })
const alias = await burnbox.aliases.create({ label: "node 20" })
await burnbox.testMessages.inject({ aliasId: alias.id, from: "shop@example.com", subject: "Code", text: "Your code is 615243." })
const mail = await burnbox.messages.wait({ alias: alias.address, timeout: 20 })
await burnbox.aliases.burn(alias.address)
const burned = await burnbox.aliases.find(alias.address)
process.stdout.write(JSON.stringify({ node: process.version, code: mail.otpCodes[0], status: burned.status }))
`

let h: Harness
let env: NodeJS.ProcessEnv
const dir = mkdtempSync(join(tmpdir(), "burnbox-client-node20-"))
beforeAll(async () => {
  h = await startHarness()
  const session = await h.signup({ plan: "pro" })
  const token = await h.createToken(session, ["read", "manage-aliases", "test"])
  env = { PATH: process.env["PATH"] ?? "/usr/bin:/bin", BURNBOX_URL: h.baseUrl, BURNBOX_TOKEN: token }
})
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true })
  await h?.close()
})

describe("on Node 20", () => {
  it("claims, waits for mail and its code, and burns, from a bundle run by the machine's Node 20", async () => {
    const { stdout: version } = await run(systemNode, ["--version"])
    // The machines this runs on have Node 20 as their Node; a newer one proves less, but still runs.
    expect(Number(/^v(\d+)\./.exec(version.trim())?.[1])).toBeGreaterThanOrEqual(20)
    const bundle = await build({ input: entry, platform: "node", write: false, output: { format: "esm" } })
    const chunks = bundle.output.flatMap((output) => output.type === "chunk" ? [output] : [])
    expect(chunks).toHaveLength(1)
    writeFileSync(join(dir, "client.mjs"), chunks[0]!.code)
    writeFileSync(join(dir, "run.mjs"), script)
    const { stdout } = await run(systemNode, [join(dir, "run.mjs")], { env, cwd: dir, timeout: 60_000 })
    expect(JSON.parse(stdout)).toEqual({ node: version.trim(), code: "615243", status: "burned" })
  }, 90_000)
})
