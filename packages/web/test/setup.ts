/** Vitest global setup of the browser project: Chromium present, the web inbox built. */
import { ensureWebBuild } from "@burnbox/web"
import { ensureChromium } from "@burnbox/web/chromium"

export default async function setup() {
  ensureChromium()
  await ensureWebBuild((line) => process.stderr.write(`${line}\n`))
}
