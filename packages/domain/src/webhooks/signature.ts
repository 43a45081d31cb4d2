import { ed25519 } from "@noble/curves/ed25519.js"
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createHmac,
  createPrivateKey,
  createSecretKey,
  hkdfSync,
  type KeyObject,
  randomBytes,
  sign as signWithKey,
  timingSafeEqual
} from "node:crypto"
import { Schema } from "effect"

/*
 * Standard Webhooks signing (spec 6.4): every delivery carries `webhook-id`, `webhook-timestamp`
 * and `webhook-signature`; the signature header lists one `v1,` HMAC-SHA256 entry per live
 * endpoint secret and one `v1a,` Ed25519 entry per service signing key, over
 * `<id>.<timestamp>.<raw body>`.
 */

// ---------------------------------------------------------------------------------------------
// Endpoint secrets (HMAC, `v1`)

const endpointSecretPrefix = "whsec_"
const endpointSecretBytes = 32

/** Receivers must refuse timestamps further than this from their clock (spec 6.4.3). */
export const timestampToleranceSeconds = 300

/** A new endpoint secret: `whsec_` + standard base64 of 32 random bytes, as Standard Webhooks libraries expect. */
export const generateEndpointSecret = (): string =>
  endpointSecretPrefix + randomBytes(endpointSecretBytes).toString("base64")

// Strict standard base64 with padding: Buffer's decoder silently skips junk, which would let a
// mistyped secret sign with a different key than the receiver's library derives.
const base64Pattern = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/** The HMAC key bytes of an endpoint secret (the `whsec_` prefix is optional). */
export const decodeEndpointSecret = (secret: string): Uint8Array => {
  const encoded = secret.startsWith(endpointSecretPrefix) ? secret.slice(endpointSecretPrefix.length) : secret
  if (encoded === "" || !base64Pattern.test(encoded)) {
    throw new Error("Endpoint secret must be `whsec_` followed by non-empty standard base64")
  }
  return new Uint8Array(Buffer.from(encoded, "base64"))
}

/** The signed bytes: `<id>.<timestamp>.` in UTF-8 followed by the exact body bytes. */
export const signedContent = (id: string, timestamp: number, body: Uint8Array): Uint8Array => {
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new Error(`Webhook timestamp must be whole Unix seconds, got ${timestamp}`)
  }
  const prefix = new TextEncoder().encode(`${id}.${timestamp}.`)
  const content = new Uint8Array(prefix.length + body.length)
  content.set(prefix)
  content.set(body, prefix.length)
  return content
}

const hmacDigest = (key: Uint8Array | KeyObject, content: Uint8Array): Buffer =>
  createHmac("sha256", key).update(content).digest()

// Every delivery signs with its endpoint's secret: the decoded key is kept as a KeyObject, so
// neither the base64 nor the key is prepared again for each request.
const hmacKeyObjects = new Map<string, KeyObject>()
const hmacKeyObject = (secret: string): KeyObject => {
  let key = hmacKeyObjects.get(secret)
  if (key === undefined) {
    if (hmacKeyObjects.size >= 1024) hmacKeyObjects.clear()
    key = createSecretKey(decodeEndpointSecret(secret))
    hmacKeyObjects.set(secret, key)
  }
  return key
}

/** `v1,<base64 HMAC-SHA256>` for one endpoint secret. */
export const hmacSignature = (secret: string, id: string, timestamp: number, body: Uint8Array): string =>
  `v1,${hmacDigest(hmacKeyObject(secret), signedContent(id, timestamp, body)).toString("base64")}`

// ---------------------------------------------------------------------------------------------
// Service signing keys (Ed25519, `v1a`)

export interface Ed25519KeyPair {
  /** The 32-byte RFC 8032 seed; store it only encrypted (`encryptPrivateKey`). */
  readonly privateKey: Uint8Array
  /** The raw 32-byte public key, as published in the key set. */
  readonly publicKey: Uint8Array
}

export const generateEd25519KeyPair = (): Ed25519KeyPair => {
  const { secretKey, publicKey } = ed25519.keygen()
  return { privateKey: secretKey, publicKey }
}

export const ed25519PublicKey = (privateKey: Uint8Array): Uint8Array => ed25519.getPublicKey(privateKey)

// Signing runs once per delivery, so it goes through node:crypto (OpenSSL): the same RFC 8032
// Ed25519, deterministic, hence byte-for-byte the signature @noble/curves makes for the same
// seed (a unit test holds them equal), at a small fraction of the CPU (in the delivery benchmark
// @noble/curves' sign was ~40 % of the service's CPU). Key generation and verification stay on
// @noble/curves.
const pkcs8Ed25519Prefix = Buffer.from("302e020100300506032b657004220420", "hex")
const signingKeyObjects = new Map<string, KeyObject>()
const signingKeyObject = (seed: Uint8Array): KeyObject => {
  if (seed.length !== 32) throw new Error("An Ed25519 private key (seed) is 32 bytes")
  const cacheKey = Buffer.from(seed).toString("base64")
  let key = signingKeyObjects.get(cacheKey)
  if (key === undefined) {
    // Few keys sign at a time (current and previous); forget them all if rotations pile up.
    if (signingKeyObjects.size >= 16) signingKeyObjects.clear()
    key = createPrivateKey({ key: Buffer.concat([pkcs8Ed25519Prefix, seed]), format: "der", type: "pkcs8" })
    signingKeyObjects.set(cacheKey, key)
  }
  return key
}

/** `v1a,<base64 Ed25519 signature>` for one service signing key. */
export const ed25519Signature = (privateKey: Uint8Array, id: string, timestamp: number, body: Uint8Array): string =>
  `v1a,${signWithKey(null, signedContent(id, timestamp, body), signingKeyObject(privateKey)).toString("base64")}`

/**
 * Key id format: `bbx_` + the first 16 lowercase hex digits of SHA-256 over the raw 32-byte
 * public key. Derived from the key itself, so it is stable across restarts and identical on
 * every process without coordination, and a receiver can recompute it.
 */
export const keyId = (publicKey: Uint8Array): string => {
  if (publicKey.length !== 32) throw new Error("An Ed25519 public key is 32 bytes")
  return `bbx_${createHash("sha256").update(publicKey).digest("hex").slice(0, 16)}`
}

// ---------------------------------------------------------------------------------------------
// The signature header

export interface SignatureInput {
  /** Live endpoint secrets: after a rotation the old and the new secret both sign for 24 hours. */
  readonly secrets: ReadonlyArray<string>
  /** Private keys of the published signing keys (current, and previous while they overlap). */
  readonly ed25519Keys: ReadonlyArray<Uint8Array>
  readonly id: string
  readonly timestamp: number
  readonly body: Uint8Array
}

/** The `webhook-signature` value: space-separated `v1,` entries then `v1a,` entries. */
export const signatureHeader = (input: SignatureInput): string => {
  const { body, id, timestamp } = input
  const entries = [
    ...input.secrets.map((secret) => hmacSignature(secret, id, timestamp, body)),
    ...input.ed25519Keys.map((key) => ed25519Signature(key, id, timestamp, body))
  ]
  // An unsigned delivery would be indistinguishable from a forged one.
  if (entries.length === 0) throw new Error("A webhook must be signed by at least one secret or key")
  return entries.join(" ")
}

// ---------------------------------------------------------------------------------------------
// Verification (what a receiver does; used by the testkit's receiver)

/** The three headers as received, and the raw body. */
export interface SignedRequest {
  readonly id: string
  readonly timestamp: string | number
  readonly signature: string
  readonly body: Uint8Array
}

export interface VerifyOptions {
  /** The receiver's clock, in Unix seconds (passed in so tests control it). */
  readonly nowSeconds: number
  readonly toleranceSeconds?: number
}

export type VerificationFailure =
  | "invalid_timestamp"
  | "timestamp_too_old"
  | "timestamp_too_new"
  | "no_matching_signature"

export type VerificationResult =
  | { readonly ok: true; readonly timestamp: number }
  | { readonly ok: false; readonly reason: VerificationFailure }

/** Accepts the request when any `v1` entry is the HMAC under `secret`. */
export const verifyHmac = (secret: string, request: SignedRequest, options: VerifyOptions): VerificationResult =>
  verifyWith(request, options, "v1", (content) => {
    const expected = hmacDigest(decodeEndpointSecret(secret), content)
    return (signature) => signature.length === expected.length && timingSafeEqual(signature, expected)
  })

/** Accepts the request when any `v1a` entry verifies under one of the published public keys. */
export const verifyEd25519 = (
  publicKeys: ReadonlyArray<Uint8Array>,
  request: SignedRequest,
  options: VerifyOptions
): VerificationResult =>
  verifyWith(request, options, "v1a", (content) => (signature) =>
    signature.length === 64 && publicKeys.some((key) => verifiesEd25519(signature, content, key)))

const verifiesEd25519 = (signature: Uint8Array, content: Uint8Array, publicKey: Uint8Array): boolean => {
  try {
    return ed25519.verify(signature, content, publicKey)
  } catch {
    return false // a malformed public key is simply not a match
  }
}

const verifyWith = (
  request: SignedRequest,
  options: VerifyOptions,
  version: "v1" | "v1a",
  matcherFor: (content: Uint8Array) => (signature: Uint8Array) => boolean
): VerificationResult => {
  const timestamp = parseTimestamp(request.timestamp)
  if (timestamp === null) return { ok: false, reason: "invalid_timestamp" }
  const tolerance = options.toleranceSeconds ?? timestampToleranceSeconds
  if (options.nowSeconds - timestamp > tolerance) return { ok: false, reason: "timestamp_too_old" }
  if (timestamp - options.nowSeconds > tolerance) return { ok: false, reason: "timestamp_too_new" }

  const matches = matcherFor(signedContent(request.id, timestamp, request.body))
  const found = signatureEntries(request.signature).some((entry) =>
    entry.version === version && matches(entry.signature)
  )
  return found ? { ok: true, timestamp } : { ok: false, reason: "no_matching_signature" }
}

const parseTimestamp = (value: string | number): number | null => {
  const text = typeof value === "number" ? String(value) : value.trim()
  if (!/^\d{1,15}$/.test(text)) return null
  return Number(text)
}

interface SignatureEntry {
  readonly version: string
  readonly signature: Buffer
}

// Entries this receiver cannot read (unknown versions, bad base64) are skipped, not fatal, so
// a sender can add new schemes without breaking old receivers.
const signatureEntries = (header: string): Array<SignatureEntry> =>
  header.split(" ").flatMap((entry) => {
    const comma = entry.indexOf(",")
    if (comma <= 0) return []
    const encoded = entry.slice(comma + 1)
    if (!base64Pattern.test(encoded)) return []
    return [{ version: entry.slice(0, comma), signature: Buffer.from(encoded, "base64") }]
  })

// ---------------------------------------------------------------------------------------------
// Private keys at rest: AES-256-GCM under a key derived from BURNBOX_SECRET

/**
 * Stored format: `v1.<iv>.<ciphertext>.<tag>`, each part unpadded base64url; the 12-byte IV is
 * random per encryption. The AES key is HKDF-SHA256(BURNBOX_SECRET, no salt, fixed info), so
 * this key never equals one derived from the same secret for tokens, cookies or cursors.
 */
const encryptedKeyVersion = "v1"
const encryptionInfo = "burnbox/webhook-signing-key/aes-256-gcm/v1"

export class SigningKeyDecryptionError extends Error {
  override readonly name = "SigningKeyDecryptionError"
}

const encryptionKey = (secret: string): Buffer => {
  if (secret === "") throw new Error("The server secret must not be empty")
  return Buffer.from(hkdfSync("sha256", Buffer.from(secret, "utf8"), Buffer.alloc(0), encryptionInfo, 32))
}

export const encryptPrivateKey = (privateKey: Uint8Array, secret: string): string => {
  const iv = randomBytes(12)
  const cipher = createCipheriv("aes-256-gcm", encryptionKey(secret), iv)
  const ciphertext = Buffer.concat([cipher.update(privateKey), cipher.final()])
  const parts = [iv, ciphertext, cipher.getAuthTag()].map((part) => part.toString("base64url"))
  return [encryptedKeyVersion, ...parts].join(".")
}

/** Throws `SigningKeyDecryptionError` for a wrong secret, tampering or an unknown format. */
export const decryptPrivateKey = (encrypted: string, secret: string): Uint8Array => {
  const [version, iv, ciphertext, tag, ...rest] = encrypted.split(".")
  if (version !== encryptedKeyVersion || iv === undefined || ciphertext === undefined || tag === undefined || rest.length > 0) {
    throw new SigningKeyDecryptionError("Unrecognized encrypted signing key format (expected v1.<iv>.<ciphertext>.<tag>)")
  }
  const key = encryptionKey(secret)
  try {
    // A fixed 16-byte tag: GCM would otherwise accept a truncated, easier to forge tag.
    const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(iv, "base64url"), { authTagLength: 16 })
    decipher.setAuthTag(Buffer.from(tag, "base64url"))
    return new Uint8Array(Buffer.concat([decipher.update(Buffer.from(ciphertext, "base64url")), decipher.final()]))
  } catch {
    throw new SigningKeyDecryptionError(
      "Could not decrypt the webhook signing key: BURNBOX_SECRET differs from the one it was stored with, or the data is corrupted"
    )
  }
}

// ---------------------------------------------------------------------------------------------
// The published key set (`{site_url}/.well-known/service-webhooks.json`, decisions.md)

export const WebhookKeyStatus = Schema.Literals(["current", "previous"])
export type WebhookKeyStatus = typeof WebhookKeyStatus.Type

export const WebhookPublicKey = Schema.Struct({
  kid: Schema.String,
  alg: Schema.Literal("Ed25519"),
  /** Standard base64 of the raw 32-byte public key. */
  publicKey: Schema.String.check(Schema.isPattern(/^[A-Za-z0-9+/]{43}=$/u)),
  status: WebhookKeyStatus,
  createdAt: Schema.String
})
export type WebhookPublicKey = typeof WebhookPublicKey.Type

export const WebhookKeySet = Schema.Struct({ keys: Schema.Array(WebhookPublicKey) })
export type WebhookKeySet = typeof WebhookKeySet.Type

export interface PublishedSigningKey {
  readonly publicKey: Uint8Array
  readonly status: WebhookKeyStatus
  readonly createdAt: Date
}

/** The key-set document: the current key first, then previous keys newest first. */
export const buildKeySet = (keys: ReadonlyArray<PublishedSigningKey>): WebhookKeySet => ({
  keys: [...keys].sort(publicationOrder).map((key) => ({
    kid: keyId(key.publicKey),
    alg: "Ed25519",
    publicKey: Buffer.from(key.publicKey).toString("base64"),
    status: key.status,
    createdAt: key.createdAt.toISOString()
  }))
})

const publicationOrder = (a: PublishedSigningKey, b: PublishedSigningKey): number =>
  a.status === b.status ? b.createdAt.getTime() - a.createdAt.getTime() : a.status === "current" ? -1 : 1

/** The raw public keys of a key-set document, for `verifyEd25519`. */
export const keySetPublicKeys = (keySet: WebhookKeySet): Array<Uint8Array> =>
  keySet.keys.map((key) => new Uint8Array(Buffer.from(key.publicKey, "base64")))
