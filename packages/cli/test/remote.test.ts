/**
 * `burnbox alias new|burn` and `burnbox mail wait` (decisions.md, "Waiting for mail"), run as a
 * script would run them against a running burnbox, with the sign-up example app sending the mail
 * over SMTP.
 */
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { type SignupApp, startSignupApp } from "@burnbox/example-signup-app"
import { type Harness, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const bin = fileURLToPath(new URL("../bin/burnbox.mjs", import.meta.url))

let h: Harness
let app: SignupApp
let token: string

interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  readonly ms: number
}

/** Runs `burnbox <args>` with BURNBOX_URL and BURNBOX_TOKEN (or what `env` says instead). */
const burnbox = (args: ReadonlyArray<string>, env: Record<string, string | undefined> = {}, timeout = 60_000) =>
  new Promise<Run>((resolve) => {
    const started = Date.now()
    const merged: Record<string, string> = {}
    for (const [key, value] of Object.entries({ ...process.env, BURNBOX_URL: h.baseUrl, BURNBOX_TOKEN: token, ...env })) {
      if (value !== undefined) merged[key] = value
    }
    execFile(process.execPath, [bin, ...args], { env: merged, timeout }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr, ms: Date.now() - started })
    })
  })

const signUp = (address: string) => fetch(`${app.url}/signup`, { method: "POST", body: new URLSearchParams({ email: address }) })

const verify = async (address: string, code: string) =>
  (await fetch(`${app.url}/verify`, { method: "POST", body: new URLSearchParams({ email: address, code }) })).status

const newAlias = async () => {
  const run = await burnbox(["alias", "new"])
  expect(run.code, run.stderr).toBe(0)
  return run.stdout.trim()
}

/** One line on stderr beginning `burnbox: `, as the other commands' failures are. */
const expectOneLine = (run: Run, code: number, pattern: RegExp) => {
  expect(run.code, run.stderr).toBe(code)
  expect(run.stdout).toBe("")
  const [first, ...others] = run.stderr.trimEnd().split("\n")
  expect(first).toMatch(/^burnbox: /)
  expect(first).toMatch(pattern)
  return others
}

beforeAll(async () => {
  h = await startHarness()
  app = await startSignupApp({ smtp: { host: "127.0.0.1", port: h.smtpPort } })
  token = await h.createToken(await h.signup({ plan: "pro" }), ["read", "manage-aliases"], "ci")
})
afterAll(async () => {
  await app?.close()
  await h?.close()
})

describe("burnbox alias new and burn", () => {
  it("alias new reserves and claims in one call and prints the address of an active alias", async () => {
    const run = await burnbox(["alias", "new", "--label", "ci run", "--style", "numeric"])
    expect(run.code, run.stderr).toBe(0)
    const address = run.stdout.trim()
    expect(run.stdout).toBe(`${address}\n`)
    const aliases = (await h.request("/aliases", { token })).body.items
    expect(aliases).toContainEqual(expect.objectContaining({ address, label: "ci run", style: "numeric", status: "active" }))
  })

  it("alias new in 16 parallel jobs on one token: each prints its own address, none fails", async () => {
    // 16 programs at once (a CI fleet's parallel workers); the client test runs 50 claims at once.
    const runs = await Promise.all(Array.from({ length: 16 }, () => burnbox(["alias", "new"], {}, 170_000)))
    expect(runs.filter((run) => run.code !== 0).map((run) => `${run.code}: ${run.stderr}`)).toEqual([])
    expect(new Set(runs.map((run) => run.stdout.trim())).size).toBe(16)
  }, 180_000)

  it("--json prints the Alias", async () => {
    const run = await burnbox(["alias", "new", "--json"])
    expect(run.code, run.stderr).toBe(0)
    expect(JSON.parse(run.stdout)).toMatchObject({ id: expect.any(Number), address: expect.stringContaining("@"), status: "active" })
  })

  it("alias burn burns it; burning an address nobody holds exits 1", async () => {
    const address = await newAlias()
    const burned = await burnbox(["alias", "burn", address])
    expect(burned.code, burned.stderr).toBe(0)
    expect(burned.stdout.trim()).toBe(address)
    const aliases = (await h.request("/aliases?includeBurned=true", { token })).body.items
    expect(aliases.find((alias: { address: string }) => alias.address === address)?.status).toBe("burned")
    expectOneLine(await burnbox(["alias", "burn", "nobody.here@example.com"]), 1, /nobody\.here@example\.com|not found/i)
  })
})

describe("burnbox mail wait", () => {
  it("--otp prints the code of a mail sent after it started waiting", async () => {
    const address = await newAlias()
    await h.untilRealtimeSubscriptions(0)
    const waiting = burnbox(["mail", "wait", "--alias", address, "--otp", "--timeout", "30"])
    // Sent once the command's request is waiting (it holds a realtime subscription in the service).
    await h.untilRealtimeSubscriptions(1)
    expect((await signUp(address)).status).toBe(200)
    const run = await waiting
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toMatch(/^\d{6}\n$/)
    expect(await verify(address, run.stdout.trim())).toBe(200)
  })

  it("--link prints the verification link, which verifies the address", async () => {
    const address = await newAlias()
    await signUp(address)
    const run = await burnbox(["mail", "wait", "--alias", address, "--link", "--timeout", "30"])
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toMatch(new RegExp(`^${app.url}/verify\\?`))
    const opened = await fetch(run.stdout.trim())
    expect(await opened.text()).toContain("Email verified")
  })

  it("--json prints the message detail; without a flag a short summary", async () => {
    const address = await newAlias()
    await signUp(address)
    const run = await burnbox(["mail", "wait", "--alias", address, "--json", "--timeout", "30"])
    expect(run.code, run.stderr).toBe(0)
    const message = JSON.parse(run.stdout)
    expect(message).toMatchObject({
      alias: expect.objectContaining({ address }),
      subject: "Confirm your email address",
      otpCodes: [expect.stringMatching(/^\d{6}$/)],
      verificationLinks: [expect.stringContaining("/verify?")]
    })
    const plain = await burnbox(["mail", "wait", "--alias", address, "--timeout", "5"])
    expect(plain.stdout).toContain("subject: Confirm your email address")
    expect(plain.stdout).toContain(`code: ${message.otpCodes[0]}`)
  })

  it("--since leaves out mail received before it", async () => {
    const address = await newAlias()
    await signUp(address)
    await burnbox(["mail", "wait", "--alias", address, "--timeout", "30"])
    // The harness's clock stands still: mail is received at its time, so later means after it.
    const later = new Date(h.clock.now().getTime() + 1000).toISOString()
    const run = await burnbox(["mail", "wait", "--alias", address, "--since", later, "--timeout", "1"])
    expect(run.code, run.stderr).toBe(1)
  })

  it("times out with exit code 1 within the timeout; with --json the Problem on stderr", async () => {
    const address = await newAlias()
    const [text, json, startup] = await Promise.all([
      burnbox(["mail", "wait", "--alias", address, "--otp", "--timeout", "1"]),
      burnbox(["mail", "wait", "--alias", address, "--json", "--timeout", "1"]),
      // What starting the program costs on this machine now: a usage error asks nothing of the API.
      burnbox(["mail", "wait"])
    ])
    expect(expectOneLine(text, 1, /time|no message/i)).toEqual([])
    expect(startup.code).toBe(2)
    // Ends at its 1 s timeout, not later (a generous bound: a busy machine starts a program slowly).
    expect(text.ms - startup.ms).toBeLessThan(10_000)
    expect(json.code).toBe(1)
    expect(json.stdout).toBe("")
    expect(JSON.parse(json.stderr)).toEqual({ error: { code: "timeout", message: expect.any(String) } })
  })

  it("an alias the token cannot see exits 1", async () => {
    const run = await burnbox(["mail", "wait", "--alias", "nobody.here@example.com", "--timeout", "1"])
    expect(run.code, run.stderr).toBe(1)
  })
})

describe("configuration, token and usage errors", () => {
  it("a missing BURNBOX_TOKEN or BURNBOX_URL is one line and exit code 3", async () => {
    const [noToken, noUrl] = await Promise.all([
      burnbox(["alias", "new"], { BURNBOX_TOKEN: undefined }),
      burnbox(["mail", "wait", "--alias", "a@example.com"], { BURNBOX_URL: "" })
    ])
    expect(expectOneLine(noToken, 3, /BURNBOX_TOKEN is not set/)).toEqual([])
    expect(expectOneLine(noUrl, 3, /BURNBOX_URL is not set/)).toEqual([])
  })

  it("a refused token is one line and exit code 3; with --json the Problem on stderr", async () => {
    const [text, json] = await Promise.all([
      burnbox(["alias", "new"], { BURNBOX_TOKEN: "bbx_pat_not_a_real_token" }),
      burnbox(["alias", "burn", "x@example.com", "--json"], { BURNBOX_TOKEN: "bbx_pat_not_a_real_token" })
    ])
    expect(expectOneLine(text, 3, /token/i)).toEqual([])
    expect(json.code).toBe(3)
    expect(JSON.parse(json.stderr)).toEqual({ error: { code: expect.any(String), message: expect.stringMatching(/token/i) } })
  })

  it("an unreachable API is exit code 3, at once also for mail wait (it looks the alias up first)", async () => {
    const run = await burnbox(["alias", "new"], { BURNBOX_URL: "http://127.0.0.1:9/api/v1" })
    expect(expectOneLine(run, 3, /cannot reach the API/)).toEqual([])
    const started = Date.now()
    const wait = await burnbox(["mail", "wait", "--alias", "a@example.com", "--timeout", "60"], { BURNBOX_URL: "http://127.0.0.1:9/api/v1" })
    expect(expectOneLine(wait, 3, /cannot reach the API/)).toEqual([])
    expect(Date.now() - started).toBeLessThan(30_000)
  })

  it("usage errors print one line and the usage, and exit 2", async () => {
    const cases = [
      ["mail", "wait"],
      ["mail", "wait", "--alias", "a@example.com", "--timeout", "soon"],
      ["mail", "wait", "--alias", "a@example.com", "--since", "yesterday"],
      ["mail", "wait", "--alias", "a@example.com", "--otp", "--link"],
      ["mail", "wait", "--alias"],
      ["alias", "new", "--style", "fancy"],
      ["alias", "burn"],
      ["alias", "rename", "a@example.com"],
      ["mail", "read"]
    ]
    const runs = await Promise.all(cases.map((args) => burnbox(args)))
    runs.forEach((run, i) => {
      const rest = expectOneLine(run, 2, /./)
      expect(rest.join("\n"), cases[i]!.join(" ")).toContain("burnbox mail wait --alias ADDRESS")
    })
  })
})
