/**
 * An external Mercure hub (decisions.md "Realtime", issue #32): with BURNBOX_MERCURE_URL (the
 * hub's URL, e.g. https://hub.example.com/.well-known/mercure) and BURNBOX_MERCURE_JWT_KEY (the
 * hub's HS256 key, publisher and subscriber alike; BurnboxConfig's `externalHub`), the bootstrap
 * names that hub, the session bootstrap sets the `mercureAuthorization` cookie (a subscriber JWT
 * for the account's own topic only), and the worker POSTs every update to it as a private update
 * (MercurePublisher). These are its tokens.
 */
import { createHmac } from "node:crypto"
import { Redacted } from "effect"

const jwtPart = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url")

/** An HS256 JWT with `claims`, as Mercure hubs read them. */
export const mercureJwt = (key: Redacted.Redacted<string>, claims: object): string => {
  const unsigned = `${jwtPart({ alg: "HS256", typ: "JWT" })}.${jwtPart(claims)}`
  return `${unsigned}.${createHmac("sha256", Redacted.value(key)).update(unsigned).digest("base64url")}`
}

/** The publisher's token: may publish to any topic. */
export const publisherJwt = (key: Redacted.Redacted<string>) => mercureJwt(key, { mercure: { publish: ["*"] } })

/** A browser's token: may subscribe to its own topic only (private updates included), until `expiresAt` (epoch seconds). */
export const subscriberJwt = (key: Redacted.Redacted<string>, topic: string, expiresAt: number) =>
  mercureJwt(key, { exp: expiresAt, mercure: { subscribe: [topic] } })
