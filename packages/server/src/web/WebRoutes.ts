/**
 * The web inbox at `{site_url}/` (packages/web's build, dist/): the page, its hashed assets and
 * the service worker, outside the /api/v1 prefix. The page's CSP allows only this origin's
 * scripts, styles and connections (no inline script, no eval), frames only from this origin
 * (the sandboxed message view) and no framing of the app itself.
 */
import { existsSync, readFileSync } from "node:fs"
import { basename, extname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"

/** packages/web/dist, where `ensureWebBuild` (burnbox start, the browser tests) writes the build. */
export const webDistDir = fileURLToPath(new URL("../../../web/dist/", import.meta.url))

export const appPolicy = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "frame-src 'self'",
  "worker-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'"
].join("; ")

const pageHeaders = {
  "content-security-policy": appPolicy,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin"
}

const types: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".html": "text/html; charset=utf-8"
}

/** Files are read once (a build replaces them with new hashed names, and the page is small). */
const cache = new Map<string, Uint8Array>()
const read = (path: string): Uint8Array | undefined => {
  const cached = cache.get(path)
  if (cached !== undefined) return cached
  if (!existsSync(path)) return undefined
  const bytes = readFileSync(path)
  if (!path.endsWith("index.html")) cache.set(path, bytes)
  return bytes
}

const notBuilt = HttpServerResponse.text(
  "The web inbox is not built. `./pnpmw burnbox start` builds it; or run `node packages/web/build.ts`.\n",
  { status: 503, headers: { "retry-after": "5" } }
)

const page = Effect.sync(() => {
  const bytes = read(join(webDistDir, "index.html"))
  return bytes === undefined
    ? notBuilt
    : HttpServerResponse.uint8Array(bytes, { contentType: types[".html"]!, headers: { ...pageHeaders, "cache-control": "no-cache" } })
})

const asset = Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
  const name = basename(new URL(request.url, "http://x").pathname)
  const bytes = /^[\w.-]+$/.test(name) ? read(join(webDistDir, "assets", name)) : undefined
  return bytes === undefined
    ? HttpServerResponse.text("Not found\n", { status: 404 })
    : HttpServerResponse.uint8Array(bytes, {
      contentType: types[extname(name)] ?? "application/octet-stream",
      headers: { "x-content-type-options": "nosniff", "cache-control": "public, max-age=31536000, immutable" }
    })
})

const serviceWorker = Effect.sync(() => {
  const bytes = read(join(webDistDir, "sw.js"))
  return bytes === undefined
    ? HttpServerResponse.text("Not found\n", { status: 404 })
    : HttpServerResponse.uint8Array(bytes, { contentType: types[".js"]!, headers: { ...pageHeaders, "cache-control": "no-cache" } })
})

export const WebRoutes = Layer.mergeAll(
  HttpRouter.add("GET", "/", page),
  HttpRouter.add("GET", "/index.html", page),
  HttpRouter.add("GET", "/assets/*", asset),
  HttpRouter.add("GET", "/sw.js", serviceWorker)
)
