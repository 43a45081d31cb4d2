/**
 * An external Mercure hub (decisions.md "Realtime", issue #32): with BURNBOX_MERCURE_URL (the
 * hub's URL, e.g. https://hub.example.com/.well-known/mercure) and BURNBOX_MERCURE_JWT_KEY (the
 * hub's HS256 key, publisher and subscriber alike), the bootstrap names that hub, the session
 * bootstrap sets the `mercureAuthorization` cookie (a subscriber JWT for the account's own topic
 * only), and the worker POSTs every update to it as a private update (MercurePublisher).
 */
import { createHmac } from "node:crypto"
import { Config, Context, Effect, Layer, Option, Redacted } from "effect"

export interface ExternalHubSettings {
  readonly url: string
  readonly key: Redacted.Redacted<string>
}

export class ExternalHub extends Context.Service<ExternalHub, Option.Option<ExternalHubSettings>>()("burnbox/ExternalHub") {
  static readonly layer = Layer.effect(ExternalHub, Effect.gen(function*() {
    const url = yield* Config.option(Config.String("BURNBOX_MERCURE_URL"))
    const key = yield* Config.option(Config.Redacted("BURNBOX_MERCURE_JWT_KEY"))
    if (Option.isNone(url)) return Option.none()
    if (Option.isNone(key)) return yield* Effect.die(new Error("BURNBOX_MERCURE_URL needs BURNBOX_MERCURE_JWT_KEY (the hub's HS256 key)"))
    return Option.some({ url: url.value, key: key.value })
  }).pipe(Effect.orDie))
  /** No external hub: the project's own serves (tests). */
  static readonly none = Layer.succeed(ExternalHub, Option.none())
}

/** An HS256 JWT with `claims`, as Mercure hubs read them. */
export const mercureJwt = (key: Redacted.Redacted<string>, claims: object): string => {
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url")
  const unsigned = `${part({ alg: "HS256", typ: "JWT" })}.${part(claims)}`
  return `${unsigned}.${createHmac("sha256", Redacted.value(key)).update(unsigned).digest("base64url")}`
}

/** The publisher's token: may publish to any topic. */
export const publisherJwt = (key: Redacted.Redacted<string>) => mercureJwt(key, { mercure: { publish: ["*"] } })

/** A browser's token: may subscribe to its own topic only (private updates included), until `expiresAt` (epoch seconds). */
export const subscriberJwt = (key: Redacted.Redacted<string>, topic: string, expiresAt: number) =>
  mercureJwt(key, { exp: expiresAt, mercure: { subscribe: [topic] } })
