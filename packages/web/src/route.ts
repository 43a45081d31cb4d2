/** Hash routes (`#/inbox`, `#/m/12`...): the server serves one page, so every view is reachable by URL. */
import { signal } from "./signal.ts"

export type Route =
  | { readonly page: "signin" }
  | { readonly page: "signup" }
  | { readonly page: "inbox"; readonly alias?: number | undefined }
  | { readonly page: "message"; readonly id: number }
  | { readonly page: "aliases" }
  | { readonly page: "settings" }
  | { readonly page: "desk"; readonly aliasId: number; readonly replyTo?: number | undefined }

export const parseRoute = (hash: string): Route => {
  const path = hash.replace(/^#/, "")
  const message = /^\/m\/(\d+)$/.exec(path)
  if (message !== null) return { page: "message", id: Number(message[1]) }
  const alias = /^\/alias\/(\d+)$/.exec(path)
  if (alias !== null) return { page: "inbox", alias: Number(alias[1]) }
  const desk = /^\/desk\/(\d+)(?:\/reply\/(\d+))?$/.exec(path)
  if (desk !== null) return { page: "desk", aliasId: Number(desk[1]), replyTo: desk[2] === undefined ? undefined : Number(desk[2]) }
  if (path === "/signin") return { page: "signin" }
  if (path === "/signup") return { page: "signup" }
  if (path === "/aliases") return { page: "aliases" }
  if (path === "/settings") return { page: "settings" }
  return { page: "inbox" }
}

export const route = signal<Route>(parseRoute(globalThis.location?.hash ?? ""))
globalThis.addEventListener?.("hashchange", () => route.set(parseRoute(location.hash)))

export const go = (hash: string) => {
  if (location.hash === hash) route.set(parseRoute(hash))
  else location.hash = hash
}
