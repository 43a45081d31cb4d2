/**
 * The browser suite's kit: Chromium (../chromium.ts), axe-core run inside a page, screenshots
 * written to `.screenshots/` at the repository's root.
 */
import { mkdirSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { repositoryRoot } from "@burnbox/testkit/ServiceProcess"
import type { Page } from "playwright-core"
export { ensureChromium, launchChromium } from "@burnbox/web/chromium"

/** Where each run writes a screenshot of every main page (README, "The web inbox"). */
export const screenshotsDir = join(repositoryRoot, ".screenshots")

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
