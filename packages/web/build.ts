/**
 * The web inbox's build: rolldown bundles src/main.tsx (Preact, @burnbox/client) into
 * dist/assets/app-<hash>.js and copies the stylesheet beside it, then writes dist/index.html
 * naming both (no inline script or style: the page's CSP allows neither). `ensureWebBuild`
 * builds only when the bundle is missing or older than a source it is made of, so
 * `burnbox start` and the browser tests' setup call it on every run.
 */
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { rolldown } from "rolldown"

/** packages/web: the sources' and the build's parent. */
export const webRoot = fileURLToPath(new URL("./", import.meta.url))
/** What the server serves at `{site_url}/`. */
export const webDist = join(webRoot, "dist")
const stamp = join(webDist, "index.html")

/** The newest modification time among the files the bundle is made of (ours, not node_modules). */
const newestSource = (): number => {
  const dirs = [join(webRoot, "src"), join(webRoot, "../client/src"), join(webRoot, "../domain/src")]
  let newest = Math.max(statSync(join(webRoot, "build.ts")).mtimeMs, statSync(join(webRoot, "package.json")).mtimeMs)
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else newest = Math.max(newest, statSync(path).mtimeMs)
    }
  }
  for (const dir of dirs) if (existsSync(dir)) walk(dir)
  return newest
}

/** True when dist/ is missing or older than a source. */
export const webBuildStale = (): boolean => !existsSync(stamp) || statSync(stamp).mtimeMs < newestSource()

const hashed = (name: string, ext: string, bytes: string | Uint8Array) =>
  `${name}-${createHash("sha256").update(bytes).digest("hex").slice(0, 10)}.${ext}`

/** Builds dist/ from scratch; answers the files written (relative to dist/). */
export const buildWeb = async (): Promise<ReadonlyArray<string>> => {
  const bundle = await rolldown({
    input: join(webRoot, "src/main.tsx"),
    platform: "browser",
    // JSX as tsconfig.json says (Preact's automatic runtime): rolldown reads it.
    tsconfig: join(webRoot, "tsconfig.json"),
    logLevel: "warn"
  })
  const { output } = await bundle.generate({ format: "esm", minify: true, codeSplitting: false })
  await bundle.close()
  const chunk = output.find((item) => item.type === "chunk" && item.isEntry)
  if (chunk === undefined || chunk.type !== "chunk") throw new Error("rolldown produced no entry chunk")
  const css = readFileSync(join(webRoot, "src/styles.css"), "utf8")
  const jsName = hashed("app", "js", chunk.code)
  const cssName = hashed("app", "css", css)
  const html = readFileSync(join(webRoot, "src/index.html"), "utf8")
    .replace("%SCRIPT%", `/assets/${jsName}`)
    .replace("%STYLE%", `/assets/${cssName}`)
  rmSync(webDist, { recursive: true, force: true })
  mkdirSync(join(webDist, "assets"), { recursive: true })
  writeFileSync(join(webDist, "assets", jsName), chunk.code)
  writeFileSync(join(webDist, "assets", cssName), css)
  writeFileSync(join(webDist, "sw.js"), readFileSync(join(webRoot, "src/sw.js")))
  writeFileSync(stamp, html) // last: its time says the build is whole
  return [`assets/${jsName}`, `assets/${cssName}`, "sw.js", "index.html"]
}

/** Builds when stale; answers whether it built. */
export const ensureWebBuild = async (log: (line: string) => void = () => {}): Promise<boolean> => {
  if (!existsSync(join(webRoot, "src/main.tsx"))) return false
  if (!webBuildStale()) return false
  const started = performance.now()
  await buildWeb()
  log(`web inbox built in ${Math.round(performance.now() - started)} ms`)
  return true
}

if (import.meta.main) {
  const files = await buildWeb()
  for (const file of files) process.stdout.write(`${file}\t${statSync(join(webDist, file)).size} bytes\n`)
}
