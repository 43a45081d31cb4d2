import { createHash } from "node:crypto"
import { Effect } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"

/** A weak ETag of what the caller sees: any visible change gives another tag. */
export const weakEtag = (body: unknown): string =>
  `W/"${createHash("sha256").update(JSON.stringify(body)).digest("base64url").slice(0, 27)}"`

const matches = (header: string | undefined, etag: string): boolean => {
  if (header === undefined) return false
  const opaque = (tag: string) => tag.trim().replace(/^W\//, "")
  return header.split(",").some((candidate) => candidate.trim() === "*" || opaque(candidate) === opaque(etag))
}

/**
 * Answers a message resource with its weak ETag, or 304 with no body when If-None-Match
 * names it (weak comparison, RFC 9110 13.1.2).
 */
export const conditionalJson = (body: unknown) =>
  Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
    const etag = weakEtag(body)
    return matches(request.headers["if-none-match"], etag)
      ? HttpServerResponse.empty({ status: 304, headers: { etag } })
      : HttpServerResponse.jsonUnsafe(body, { headers: { etag } })
  })
