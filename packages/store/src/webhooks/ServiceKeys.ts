/**
 * The service's Ed25519 webhook signing keys (`v1a`, spec 6.4) and the key-set document of
 * decisions.md. The first key is generated on first use by any process (the unique index on
 * the current key makes concurrent first starts agree); private parts are stored encrypted
 * under BURNBOX_SECRET and decrypted only in memory.
 */
import {
  buildKeySet,
  decryptPrivateKey,
  encryptPrivateKey,
  generateEd25519KeyPair,
  keyId,
  type WebhookKeySet
} from "@burnbox/domain/webhooks/index"
import { Context, Effect, Layer, Redacted, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { BurnboxConfig } from "../platform/Config.ts"
import { now } from "../platform/Time.ts"

/** A rotated key stays published, and keeps signing, this long (decisions.md: at least 7 days). */
export const PreviousKeyPublishedMs = 7 * 24 * 60 * 60 * 1000

const KeyRow = Schema.Struct({
  kid: Schema.String,
  public_key: Schema.Uint8Array,
  private_key_encrypted: Schema.String,
  status: Schema.Literals(["current", "previous"]),
  created_at: Schema.Date,
  retired_at: Schema.NullOr(Schema.Date)
})

export interface SigningKey {
  readonly kid: string
  readonly publicKey: Uint8Array
  readonly privateKey: Uint8Array
  readonly status: "current" | "previous"
}

export class ServiceKeys extends Context.Service<ServiceKeys, {
  /** The published key set: the current key and previous keys still within their overlap. */
  readonly keySet: Effect.Effect<WebhookKeySet>
  /** The private keys that sign a delivery now (every published key). */
  readonly signingKeys: Effect.Effect<ReadonlyArray<SigningKey>>
  /** Makes a new current key; the old one becomes previous. Answers the new key set. */
  readonly rotate: Effect.Effect<{ kid: string; keySet: WebhookKeySet }>
}>()("burnbox/ServiceKeys") {
  static readonly layer = Layer.effect(ServiceKeys, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* BurnboxConfig
    const secret = Redacted.value(config.secret)

    const insertKey = SqlSchema.findAll({
      Request: Schema.Struct({ kid: Schema.String, publicKey: Schema.Uint8Array, privateKeyEncrypted: Schema.String, at: Schema.Date }),
      Result: Schema.Struct({ kid: Schema.String }),
      execute: (key) => sql`
        INSERT INTO webhook_signing_keys (kid, public_key, private_key_encrypted, status, created_at)
        VALUES (${key.kid}, ${key.publicKey}, ${key.privateKeyEncrypted}, 'current', ${key.at})
        ON CONFLICT DO NOTHING RETURNING kid`
    })
    const insertCurrent = (at: Date) => {
      const pair = generateEd25519KeyPair()
      return insertKey({ kid: keyId(pair.publicKey), publicKey: pair.publicKey, privateKeyEncrypted: encryptPrivateKey(pair.privateKey, secret), at })
    }
    const publishedSince = SqlSchema.findAll({
      Request: Schema.Date,
      Result: KeyRow,
      execute: (cutoff) => sql`
        SELECT kid, public_key, private_key_encrypted, status, created_at, retired_at FROM webhook_signing_keys
        WHERE status = 'current' OR retired_at > ${cutoff}
        ORDER BY created_at DESC`
    })

    const published = Effect.gen(function*() {
      const at = yield* now
      const cutoff = new Date(at.getTime() - PreviousKeyPublishedMs)
      const read = publishedSince(cutoff)
      let rows = yield* read
      if (!rows.some((row) => row.status === "current")) {
        yield* insertCurrent(at)
        rows = yield* read
      }
      return rows
    }).pipe(Effect.orDie)

    const keySet = published.pipe(Effect.map((rows) =>
      buildKeySet(rows.map((row) => ({ publicKey: row.public_key, status: row.status, createdAt: row.created_at })))
    ))

    const signingKeys = published.pipe(Effect.map((rows) =>
      rows.map((row) => ({
        kid: row.kid,
        publicKey: row.public_key,
        privateKey: decryptPrivateKey(row.private_key_encrypted, secret),
        status: row.status
      }))
    ))

    const rotate = Effect.gen(function*() {
      const at = yield* now
      const kid = yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`LOCK TABLE webhook_signing_keys IN SHARE ROW EXCLUSIVE MODE`
        yield* sql`UPDATE webhook_signing_keys SET status = 'previous', retired_at = ${at} WHERE status = 'current'`
        const [row] = yield* insertCurrent(at)
        return row!.kid
      })).pipe(Effect.orDie)
      return { kid, keySet: yield* keySet }
    })

    // Generated on first start, so the key set is never empty.
    yield* published

    return ServiceKeys.of({
      keySet: Effect.withSpan(keySet, "ServiceKeys.keySet"),
      signingKeys: Effect.withSpan(signingKeys, "ServiceKeys.signingKeys"),
      rotate: Effect.withSpan(rotate, "ServiceKeys.rotate")
    })
  }))
}
