/**
 * The web inbox's only way to the API: @burnbox/client over the browser's cookie session.
 * Every state change carries the bootstrap's CSRF token; a 401 (expired session) or a stale
 * CSRF token is reported to `onSignedOut`, so the app asks for the password again over the page
 * instead of navigating away from what the user typed.
 */
import { type BurnboxProblem, createClient, isBurnboxProblem } from "@burnbox/client"
import type { Effect } from "effect"

let csrfToken: string | undefined

export const setCsrfToken = (token: string | undefined) => {
  csrfToken = token
}

const safe = new Set(["GET", "HEAD", "OPTIONS"])

const sessionFetch: typeof globalThis.fetch = (input, init) => {
  const request = new Request(input, init)
  const headers = new Headers(request.headers)
  if (!safe.has(request.method) && csrfToken !== undefined) headers.set("x-csrf-token", csrfToken)
  return globalThis.fetch(new Request(request, { headers, credentials: "same-origin" }))
}

export const client = createClient({ baseUrl: globalThis.location?.origin ?? "http://localhost", fetch: sessionFetch })
export const raw = client.raw

type Listener = () => void
const signedOutListeners = new Set<Listener>()
export const onSignedOut = (listener: Listener) => {
  signedOutListeners.add(listener)
  return () => signedOutListeners.delete(listener)
}

/** True when the problem means "sign in again" rather than "this request is wrong". */
export const needsSignIn = (problem: BurnboxProblem) =>
  problem.status === 401 || (problem.status === 403 && problem.code === "invalid_csrf_token")

/** Runs a `raw` call; a lost session is announced before the promise rejects. */
export const call = async <A, E>(effect: Effect.Effect<A, E>): Promise<A> => {
  try {
    return await client.run(effect)
  } catch (error) {
    if (isBurnboxProblem(error) && needsSignIn(error)) for (const listener of signedOutListeners) listener()
    throw error
  }
}

/** A problem as one line for the user. */
export const describe = (error: unknown): string => {
  if (isBurnboxProblem(error)) {
    if (error.code === "rate_limited" || error.status === 429) return `${error.message} (too many attempts)`
    if (error.code === "plan_required") return `${error.message} Upgrade your plan to use it.`
    const fields = error.fields === undefined ? "" : ` (${Object.entries(error.fields).map(([k, v]) => `${k}: ${v}`).join(", ")})`
    return `${error.message}${fields}`
  }
  return error instanceof Error ? error.message : String(error)
}

/** Same-origin API URL for a path the API answered (htmlUrl, rawUrl, downloadUrl). */
export const apiUrl = (url: string) => {
  const parsed = new URL(url, location.origin)
  return `${location.origin}${parsed.pathname}${parsed.search}`
}
