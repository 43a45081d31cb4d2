/**
 * The README's recipe ("Testing a sign-up"), run: an end-to-end test of the sign-up app with a
 * burnbox address, written with @burnbox/client and as signup.sh with the `burnbox` CLI, against
 * a real burnbox (the test harness: API, SMTP ingest and pipeline on free ports).
 */
import { execFile, spawn } from "node:child_process"
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { createClient } from "@burnbox/client"
import { type Harness, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type SignupApp, startSignupApp } from "./app.ts"

let h: Harness
let app: SignupApp
let APP_URL: string
/** A folder holding a `burnbox` command, put on PATH for signup.sh. */
let binDir: string

beforeAll(async () => {
  h = await startHarness()
  app = await startSignupApp({ smtp: { host: "127.0.0.1", port: h.smtpPort } })
  APP_URL = app.url
  const token = await h.createToken(await h.signup({ plan: "pro" }), ["read", "manage-aliases"], "ci")
  process.env["BURNBOX_URL"] = h.baseUrl
  process.env["BURNBOX_TOKEN"] = token
  binDir = mkdtempSync(join(tmpdir(), "burnbox-bin-"))
  const cli = fileURLToPath(new URL("../../packages/cli/bin/burnbox.mjs", import.meta.url))
  writeFileSync(join(binDir, "burnbox"), `#!/bin/sh\nexec "${process.execPath}" "${cli}" "$@"\n`)
  chmodSync(join(binDir, "burnbox"), 0o755)
})
afterAll(async () => {
  rmSync(binDir, { force: true, recursive: true })
  await app?.close()
  await h?.close()
})

describe("the README recipe", () => {
  // recipe:client
  it("signs up with a fresh address and verifies it with the mailed code", async () => {
    const burnbox = createClient({ baseUrl: process.env.BURNBOX_URL!, token: process.env.BURNBOX_TOKEN! })
    const alias = await burnbox.aliases.create({ label: "signup test" })
    try {
      await fetch(`${APP_URL}/signup`, { method: "POST", body: new URLSearchParams({ email: alias.address }) })
      const mail = await burnbox.messages.wait({ alias: alias.address, timeout: 30 })
      const code = mail.otpCodes[0]!
      expect(code).toMatch(/^\d{6}$/)
      const verified = await fetch(`${APP_URL}/verify`, { method: "POST", body: new URLSearchParams({ email: alias.address, code }) })
      expect(await verified.text()).toContain("Email verified")
    } finally {
      await burnbox.aliases.burn(alias.address)
    }
  })
  // end recipe:client

  const script = fileURLToPath(new URL("./signup.sh", import.meta.url))
  const runScript = (env: Record<string, string>) =>
    new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const path = `${binDir}:${process.env["PATH"] ?? ""}`
      execFile(script, [], { env: { ...process.env, PATH: path, ...env }, timeout: 60_000 }, (error, _stdout, stderr) => {
        resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stderr })
      })
    })

  it("signup.sh claims, triggers the sign-up, waits for the code, verifies and burns: exit code 0", async () => {
    const run = await runScript({ APP_URL })
    expect(run.code, run.stderr).toBe(0)
    const aliases = (await h.request("/aliases?includeBurned=true", { token: process.env["BURNBOX_TOKEN"]! })).body.items
    expect(aliases).toContainEqual(expect.objectContaining({ label: "signup-test", status: "burned" }))
  })

  it("signup.sh against an app that never sends the mail times out with exit code 1", async () => {
    const silent = createServer((_request, response) => response.end("ok")).listen(0, "127.0.0.1")
    await new Promise((resolve) => silent.once("listening", resolve))
    try {
      const run = await runScript({ APP_URL: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, MAIL_TIMEOUT: "1" })
      expect(run.code).toBe(1)
      expect(run.stderr).toMatch(/^burnbox: .*(time|no message)/im)
    } finally {
      silent.close()
    }
  })

  it("starts with the README's command on the workspace's Node", async () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8")
    expect(readme).toContain("`SMTP_HOST=127.0.0.1 SMTP_PORT=2525 ./pnpmw exec node examples/signup-app/app.ts`")
    // `./pnpmw exec node` is the workspace's Node, the one running this test.
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as AddressInfo
        probe.close(() => resolve(port))
      })
    })
    const app = spawn(process.execPath, [fileURLToPath(new URL("./app.ts", import.meta.url))], {
      env: { ...process.env, SMTP_HOST: "127.0.0.1", SMTP_PORT: String(h.smtpPort), PORT: String(port) },
      stdio: ["ignore", "pipe", "pipe"]
    })
    try {
      const started = await new Promise<string>((resolve, reject) => {
        let output = ""
        app.stdout.on("data", (chunk: Buffer) => {
          output += chunk.toString()
          if (output.includes("\n")) resolve(output)
        })
        app.once("exit", (code) => reject(new Error(`the app exited with ${code}`)))
      })
      expect(started).toMatch(/^sign-up app on http:\/\/127\.0\.0\.1:\d+\n$/)
      expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(200)
    } finally {
      app.kill()
    }
  })

  it("is what the README shows, word for word", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8")
    const source = readFileSync(new URL(import.meta.url), "utf8")
    const recipe = /\/\/ recipe:client\n([\s\S]*?)\n *\/\/ end recipe:client/.exec(source)![1]!
    expect(readme).toContain(recipe.split("\n").map((line) => line.slice(2)).join("\n"))
    expect(readme).toContain(`\`\`\`sh\n${readFileSync(script, "utf8")}\`\`\``)
  })
})
