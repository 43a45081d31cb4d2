/**
 * Chromium for the browser suite and the web benchmark: Debian's `chromium` package (installed
 * with apt-get when missing; the registry's Playwright browser downloads are not reachable from
 * CI), driven by playwright-core.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { type Browser, chromium } from "playwright-core"

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
