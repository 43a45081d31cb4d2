/**
 * Signs webhook deliveries (spec 6.4): `v1` HMAC-SHA256 with each live endpoint secret (the
 * current one, and the previous one until its overlap ends) and `v1a` Ed25519 with every
 * published service key (`ServiceKeys`, so a rotated key keeps signing while it is published).
 * Endpoint secrets are stored encrypted under BURNBOX_SECRET; decrypted, they stay `Redacted`
 * until the moment of signing.
 */
import { signatureHeader } from "@burnbox/domain/webhooks/index"
import { Context, Effect, Layer, Redacted } from "effect"
import { BurnboxConfig } from "../platform/Config.ts"
import { ServiceKeys } from "./ServiceKeys.ts"
import { decryptEndpointSecret } from "./Webhooks.ts"

/** An endpoint's secrets as stored (encrypted under BURNBOX_SECRET). */
export interface EndpointSecrets {
  readonly current: string
  /** The secret before the last rotation; it signs too until `previousExpiresAt`. */
  readonly previous: string | null
  readonly previousExpiresAt: Date | null
}

/** What a signature covers (spec 6.4: `id.timestamp.body`). */
export interface SignedContent {
  readonly id: string
  /** Unix seconds, as sent in `webhook-timestamp`. */
  readonly timestamp: number
  readonly body: Uint8Array
}

/** Signs the deliveries of one batch. */
export interface BatchSigner {
  /** The `webhook-signature` header: one `v1` per secret of the endpoint live at `at`, one `v1a` per service key. */
  readonly sign: (secrets: EndpointSecrets, content: SignedContent, at: Date) => Effect.Effect<string>
}

export class Signer extends Context.Service<Signer, {
  /**
   * A signer for one batch of deliveries: the service keys are read once, and each endpoint
   * secret is decrypted at most once (when first needed) and forgotten with the batch.
   */
  readonly forBatch: Effect.Effect<BatchSigner>
}>()("burnbox/Signer") {
  static readonly layerNoDeps = Layer.effect(Signer, Effect.gen(function*() {
    const keys = yield* ServiceKeys
    const config = yield* BurnboxConfig

    const forBatch = Effect.gen(function*() {
      const ed25519Keys = (yield* keys.signingKeys).map((key) => Redacted.make(key.privateKey))
      const decrypted = new Map<string, Redacted.Redacted<string>>()
      const decrypt = (encrypted: string) => {
        let secret = decrypted.get(encrypted)
        if (secret === undefined) decrypted.set(encrypted, secret = decryptEndpointSecret(encrypted, config.secret))
        return secret
      }
      const sign = (secrets: EndpointSecrets, content: SignedContent, at: Date) =>
        Effect.sync(() => {
          const live = [decrypt(secrets.current)]
          if (secrets.previous !== null && secrets.previousExpiresAt !== null && secrets.previousExpiresAt > at) {
            live.push(decrypt(secrets.previous))
          }
          return signatureHeader({
            secrets: live.map(Redacted.value),
            ed25519Keys: ed25519Keys.map(Redacted.value),
            id: content.id,
            timestamp: content.timestamp,
            body: content.body
          })
        })
      return { sign } satisfies BatchSigner
    }).pipe(Effect.withSpan("Signer.forBatch"))

    return Signer.of({ forBatch })
  }))

  /** With the service keys of the database it is given. */
  static readonly layer = Signer.layerNoDeps.pipe(Layer.provide(ServiceKeys.layer))
}
