import { createHmac, createSecretKey, hash, randomBytes, timingSafeEqual } from "node:crypto"
import { Context, Effect, Layer, Redacted } from "effect"
import { BurnboxConfig } from "./Config.ts"

/**
 * Keyed digests under BURNBOX_SECRET. Tokens and session ids are stored only as these
 * digests; CSRF tokens are derived from the session, so nothing extra is stored for them.
 */
export class Keyring extends Context.Service<Keyring, {
  readonly digest: (purpose: string, value: string) => Buffer
  readonly csrfToken: (sessionSecret: Redacted.Redacted<string>) => string
  readonly checkCsrf: (sessionSecret: Redacted.Redacted<string>, presented: string | undefined) => boolean
  readonly sign: (purpose: string, value: string) => string
}>()("burnbox/Keyring") {
  static readonly layer = Layer.effect(Keyring, Effect.gen(function*() {
    const config = yield* BurnboxConfig
    return Keyring.make(config.secret)
  }))

  static readonly make = (secret: Redacted.Redacted<string>) => {
    // One KeyObject for the process: handing createHmac a raw Buffer builds a new one per call.
    const key = createSecretKey(Buffer.from(Redacted.value(secret), "utf8"))
    const digest = (purpose: string, value: string) => createHmac("sha256", key).update(`${purpose}\0${value}`).digest()
    const csrfToken = (sessionSecret: Redacted.Redacted<string>) =>
      digest("csrf", Redacted.value(sessionSecret)).toString("base64url")
    return Keyring.of({
      digest,
      csrfToken,
      checkCsrf: (sessionSecret, presented) => {
        if (presented === undefined) return false
        const expected = Buffer.from(csrfToken(sessionSecret))
        const given = Buffer.from(presented)
        return expected.length === given.length && timingSafeEqual(expected, given)
      },
      sign: (purpose, value) => digest(purpose, value).toString("base64url")
    })
  }
}

/** An unkeyed SHA-256, for in-memory lookups only (never stored). */
export const fingerprint = (value: string): string => hash("sha256", value, "base64")

/** A fresh random secret, URL-safe. */
export const randomSecret = (bytes = 32): string => randomBytes(bytes).toString("base64url")
