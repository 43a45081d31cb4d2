/**
 * `GET {site_url}/.well-known/service-webhooks.json` (spec 4.10, decisions.md): the Ed25519
 * keys whose `v1a` signatures a receiver may trust, outside the /api/v1 prefix and without
 * authentication.
 */
import { ServiceKeys } from "@burnbox/store"
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"

export const KeySetPath = "/.well-known/service-webhooks.json"

export const WellKnownRoutes = Layer.unwrap(Effect.gen(function*() {
  const keys = yield* ServiceKeys
  return HttpRouter.add<never, never>(
    "GET",
    KeySetPath,
    Effect.map(keys.keySet, (keySet) =>
      HttpServerResponse.jsonUnsafe(keySet, {
        // Receivers may cache it briefly; a rotation publishes the new key before it signs alone.
        headers: { "cache-control": "public, max-age=300" }
      }))
  )
}))
