/**
 * Verifying a webhook delivery (spec 6.4) the way a receiver must, in Node 20+ or a browser:
 * `webhook-signature` lists `v1,<base64>` HMAC-SHA256 entries (keyed with the endpoint secret,
 * Standard Webhooks) and `v1a,<base64>` Ed25519 entries (by a service key of the published key
 * set), over `<webhook-id>.<webhook-timestamp>.<raw body>`; the timestamp must be within five
 * minutes. HMAC through Web Crypto, Ed25519 through @noble/curves.
 */
import { ed25519 } from "@noble/curves/ed25519.js"
import { Effect } from "effect"
import { BurnboxProblem } from "./BurnboxProblem.ts"

/** Receivers refuse timestamps further than this from their clock (spec 6.4.3). */
export const WebhookToleranceSeconds = 300

export type WebhookHeaders =
  | { readonly get: (name: string) => string | null }
  | Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

export interface VerifyWebhookOptions {
  /** The endpoint secret (`whsec_...`), or the live ones during a rotation: checks `v1`. */
  readonly secret?: string | ReadonlyArray<string> | undefined
  /** Service public keys (raw 32 bytes, or their base64 as the key set publishes them): checks `v1a`. */
  readonly publicKey?: string | Uint8Array | ReadonlyArray<string | Uint8Array> | undefined
  /** The key-set document (`/.well-known/service-webhooks.json`): checks `v1a` with its keys. */
  readonly keySet?: { readonly keys: ReadonlyArray<{ readonly publicKey: string }> } | undefined
  /** The request's headers: a Fetch `Headers`, or Node's `req.headers`. */
  readonly headers: WebhookHeaders
  /** The exact raw body, as received (not re-serialized JSON). */
  readonly body: string | Uint8Array
  /** The receiver's clock (default: now). */
  readonly now?: Date | undefined
  readonly toleranceSeconds?: number | undefined
}

export interface VerifiedWebhook {
  /** `webhook-id`: the event id, to deduplicate on. */
  readonly id: string
  readonly timestamp: number
  /** Which entry verified. */
  readonly scheme: "v1" | "v1a"
  /** The parsed JSON body (the event envelope, spec 6.2). */
  readonly payload: unknown
}

const refused = (code: string, message: string) => new BurnboxProblem({ status: 0, code, message })

const header = (headers: WebhookHeaders, name: string): string | undefined => {
  if ("get" in headers && typeof headers.get === "function") return headers.get(name) ?? undefined
  const value = (headers as Readonly<Record<string, string | ReadonlyArray<string> | undefined>>)[name]
  return typeof value === "string" ? value : value?.[0]
}

const base64Pattern = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

const fromBase64 = (text: string): Uint8Array<ArrayBuffer> | undefined => {
  if (!base64Pattern.test(text)) return undefined
  const binary = atob(text)
  const bytes = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
  return bytes
}

const secretKey = (secret: string): Uint8Array<ArrayBuffer> => {
  const key = fromBase64(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret)
  if (key === undefined || key.length === 0) throw refused("invalid_secret", "An endpoint secret is `whsec_` followed by standard base64.")
  return key
}

const publicKeyBytes = (key: string | Uint8Array): Uint8Array => {
  const bytes = typeof key === "string" ? fromBase64(key) : key
  if (bytes === undefined || bytes.length !== 32) throw refused("invalid_public_key", "An Ed25519 public key is 32 bytes (44 characters of base64).")
  return bytes
}

const listOf = <A>(value: A | ReadonlyArray<A> | undefined): ReadonlyArray<A> =>
  value === undefined ? [] : Array.isArray(value) ? value : [value as A]

/**
 * Resolves with the delivery's id, timestamp and parsed body when one of its signatures is
 * valid; rejects with a BurnboxProblem (status 0) whose code says why not: `missing_header`,
 * `invalid_timestamp`, `timestamp_too_old`, `timestamp_too_new`, `invalid_signature`.
 */
export const verifyWebhook = async (options: VerifyWebhookOptions): Promise<VerifiedWebhook> => {
  const secrets = listOf(options.secret).map(secretKey)
  const publicKeys = [...listOf(options.publicKey), ...(options.keySet?.keys.map((key) => key.publicKey) ?? [])].map(publicKeyBytes)
  if (secrets.length === 0 && publicKeys.length === 0) {
    throw refused("invalid_secret", "Give the endpoint secret, a public key or the key set to verify with.")
  }
  const id = header(options.headers, "webhook-id")
  const timestampText = header(options.headers, "webhook-timestamp")
  const signature = header(options.headers, "webhook-signature")
  if (id === undefined || timestampText === undefined || signature === undefined) {
    throw refused("missing_header", "A delivery carries webhook-id, webhook-timestamp and webhook-signature.")
  }
  if (!/^\d{1,15}$/.test(timestampText.trim())) throw refused("invalid_timestamp", "webhook-timestamp is not Unix seconds.")
  const timestamp = Number(timestampText.trim())
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000)
  const tolerance = options.toleranceSeconds ?? WebhookToleranceSeconds
  if (now - timestamp > tolerance) throw refused("timestamp_too_old", `The delivery is more than ${tolerance} s old.`)
  if (timestamp - now > tolerance) throw refused("timestamp_too_new", `The delivery is more than ${tolerance} s in the future.`)

  const body = typeof options.body === "string" ? new TextEncoder().encode(options.body) : options.body
  const prefix = new TextEncoder().encode(`${id}.${timestamp}.`)
  const content = new Uint8Array(prefix.length + body.length)
  content.set(prefix)
  content.set(body, prefix.length)

  const entries = signature.split(" ").flatMap((entry) => {
    const comma = entry.indexOf(",")
    const bytes = comma > 0 ? fromBase64(entry.slice(comma + 1)) : undefined
    return bytes === undefined ? [] : [{ version: entry.slice(0, comma), bytes }]
  })
  const verified = await firstVerified(entries, secrets, publicKeys, content)
  if (verified === undefined) throw refused("invalid_signature", "No signature of the delivery matches.")
  return { id, timestamp, scheme: verified, payload: JSON.parse(new TextDecoder().decode(body)) }
}

const firstVerified = async (
  entries: ReadonlyArray<{ readonly version: string; readonly bytes: Uint8Array<ArrayBuffer> }>,
  secrets: ReadonlyArray<Uint8Array<ArrayBuffer>>,
  publicKeys: ReadonlyArray<Uint8Array>,
  content: Uint8Array<ArrayBuffer>
): Promise<"v1" | "v1a" | undefined> => {
  for (const entry of entries) {
    if (entry.version === "v1") {
      for (const secret of secrets) {
        const key = await crypto.subtle.importKey("raw", secret, { name: "HMAC", hash: "SHA-256" }, false, ["verify"])
        // Web Crypto's verify compares in constant time.
        if (await crypto.subtle.verify("HMAC", key, entry.bytes, content)) return "v1"
      }
    } else if (entry.version === "v1a" && entry.bytes.length === 64) {
      for (const publicKey of publicKeys) {
        if (verifiesEd25519(entry.bytes, content, publicKey)) return "v1a"
      }
    }
  }
  return undefined
}

const verifiesEd25519 = (signature: Uint8Array, content: Uint8Array, publicKey: Uint8Array): boolean => {
  try {
    return ed25519.verify(signature, content, publicKey)
  } catch {
    return false
  }
}

/** `verifyWebhook` as an Effect. */
export const verifyWebhookEffect = (options: VerifyWebhookOptions): Effect.Effect<VerifiedWebhook, BurnboxProblem> =>
  Effect.tryPromise({
    try: () => verifyWebhook(options),
    catch: (error) => error instanceof BurnboxProblem ? error : refused("invalid_signature", String(error))
  })
