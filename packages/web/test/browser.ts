/**
 * The browser suite's kit: Debian's `chromium` (installed with apt-get when missing; the
 * registry's Playwright browser downloads are not reachable from CI), driven by playwright-core;
 * axe-core run inside a page; screenshots written to `.screenshots/` at the repository's root.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { existsSync, mkdirSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { repositoryRoot } from "@burnbox/testkit/ServiceProcess"
import { type Browser, chromium, type Page } from "playwright-core"

/** Where each run writes a screenshot of every main page (README, "The web inbox"). */
export const screenshotsDir = join(repositoryRoot, ".screenshots")

const candidates = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]

/** The Chromium binary: CHROMIUM_PATH, a system one, or Debian's package installed now (needs root or sudo). */
export const ensureChromium = (): string => {
  const configured = process.env["CHROMIUM_PATH"]
  if (configured !== undefined && configured !== "") return configured
  const found = candidates.find((path) => existsSync(path))
  if (found !== undefined) return found
  const sudo = process.getuid?.() === 0 ? [] : ["sudo", "-n"]
  const run = (args: ReadonlyArray<string>) => {
    const [command, ...rest] = [...sudo, ...args] as [string, ...Array<string>]
    return spawnSync(command, rest, { stdio: "inherit", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } }).status === 0
  }
  if (!run(["apt-get", "install", "-y", "chromium"])) {
    run(["apt-get", "update"])
    if (!run(["apt-get", "install", "-y", "chromium"])) {
      throw new Error("Chromium is missing and `apt-get install -y chromium` failed; install it or set CHROMIUM_PATH")
    }
  }
  return execFileSync("sh", ["-c", "command -v chromium"], { encoding: "utf8" }).trim()
}

export const launchChromium = (): Promise<Browser> =>
  chromium.launch({
    executablePath: ensureChromium(),
    // As root (CI containers) Chromium refuses its sandbox; /dev/shm is small in containers.
    args: ["--no-sandbox", "--disable-dev-shm-usage"]
  })

export const screenshot = async (page: Page, name: string) => {
  mkdirSync(screenshotsDir, { recursive: true })
  await page.screenshot({ path: join(screenshotsDir, `${name}.png`), fullPage: true })
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8")

export interface AxeViolation {
  readonly id: string
  readonly impact: string | null
  readonly help: string
  readonly nodes: ReadonlyArray<{ readonly target: ReadonlyArray<unknown> }>
}

/** axe-core's serious and critical violations on the page as it is now. */
export const seriousViolations = async (page: Page): Promise<ReadonlyArray<AxeViolation>> => {
  // Through the DevTools protocol, so the page's CSP (no inline script) does not apply to it.
  await page.evaluate(axeSource)
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run: (context: Document) => Promise<{ violations: Array<AxeViolation> }> } }).axe
    const result = await axe.run(document)
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target })) }))
  })
  return violations.filter((v) => v.impact === "serious" || v.impact === "critical")
}
