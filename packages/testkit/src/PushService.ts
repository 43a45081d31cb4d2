/**
 * Browser push from the browser's side, for tests (issue #32): a subscription's own keys (a P-256
 * key pair and a 16-byte auth secret, as PushManager.subscribe makes them), the decryption of a
 * received aes128gcm push with them (RFC 8291 over RFC 8188, with node:crypto: ECDH, HKDF,
 * AES-128-GCM), the check of its VAPID header (RFC 8292: an ES256 JWT for the push service's
 * origin, signed with the application server's key); and the worker's push sender on a
 * harness's database and clock, run a pass at a time. The push service itself is the HTTPS
 * `Receiver`.
 */
import { createCipheriv, createDecipheriv, createECDH, createPublicKey, hkdfSync, randomBytes, verify } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { BurnboxConfig, type BurnboxSettings, DatabaseUrl, type PushOutcome, PushSender, StoreLive } from "@burnbox/store"
import { Clock, Context, Effect, Exit, Layer, Redacted, Scope } from "effect"
import { type Harness, TestSecret } from "./Harness.ts"
import type { ReceivedRequest } from "./Receiver.ts"

/** A browser's subscription keys: what it sends (`keys`) and what it keeps (its private key). */
export interface BrowserPushKeys {
  readonly keys: { readonly p256dh: string; readonly auth: string }
  readonly privateKey: Buffer
  readonly publicKey: Buffer
  readonly authSecret: Buffer
}

export const makeBrowserPushKeys = (): BrowserPushKeys => {
  const ecdh = createECDH("prime256v1")
  const publicKey = ecdh.generateKeys()
  const authSecret = randomBytes(16)
  return {
    keys: { p256dh: publicKey.toString("base64url"), auth: authSecret.toString("base64url") },
    privateKey: ecdh.getPrivateKey(),
    publicKey,
    authSecret
  }
}

const hkdf = (salt: Buffer, ikm: Buffer, info: Buffer, length: number) => Buffer.from(hkdfSync("sha256", ikm, salt, info, length))

/** Decrypts an aes128gcm push body (one record) with the subscription's own keys; throws when it does not authenticate. */
export const decryptPush = (body: Uint8Array, browser: BrowserPushKeys): string => {
  const data = Buffer.from(body)
  const salt = data.subarray(0, 16)
  const idLength = data[20]!
  const serverPublic = data.subarray(21, 21 + idLength)
  const ciphertext = data.subarray(21 + idLength)
  const ecdh = createECDH("prime256v1")
  ecdh.setPrivateKey(browser.privateKey)
  const shared = ecdh.computeSecret(serverPublic)
  const keyInfo = Buffer.concat([Buffer.from("WebPush: info\0"), browser.publicKey, serverPublic])
  const ikm = hkdf(browser.authSecret, shared, keyInfo, 32)
  const cek = hkdf(salt, ikm, Buffer.from("Content-Encoding: aes128gcm\0"), 16)
  const nonce = hkdf(salt, ikm, Buffer.from("Content-Encoding: nonce\0"), 12)
  const decipher = createDecipheriv("aes-128-gcm", cek, nonce)
  decipher.setAuthTag(ciphertext.subarray(ciphertext.length - 16))
  const padded = Buffer.concat([decipher.update(ciphertext.subarray(0, ciphertext.length - 16)), decipher.final()])
  // The last record ends with the delimiter 0x02, then zero padding.
  let end = padded.length - 1
  while (end >= 0 && padded[end] === 0) end--
  if (padded[end] !== 2) throw new Error("no last-record delimiter")
  return padded.subarray(0, end).toString("utf8")
}

/** Encrypts like a push sender would (for the decryption's own test). */
export const encryptPushForTest = (plaintext: string, browser: BrowserPushKeys): Buffer => {
  const server = createECDH("prime256v1")
  const serverPublic = server.generateKeys()
  const salt = randomBytes(16)
  const shared = server.computeSecret(browser.publicKey)
  const ikm = hkdf(browser.authSecret, shared, Buffer.concat([Buffer.from("WebPush: info\0"), browser.publicKey, serverPublic]), 32)
  const cek = hkdf(salt, ikm, Buffer.from("Content-Encoding: aes128gcm\0"), 16)
  const nonce = hkdf(salt, ikm, Buffer.from("Content-Encoding: nonce\0"), 12)
  const cipher = createCipheriv("aes-128-gcm", cek, nonce)
  const sealed = Buffer.concat([cipher.update(Buffer.concat([Buffer.from(plaintext), Buffer.from([2])])), cipher.final(), cipher.getAuthTag()])
  const header = Buffer.alloc(21)
  salt.copy(header, 0)
  header.writeUInt32BE(4096, 16)
  header[20] = serverPublic.length
  return Buffer.concat([header, serverPublic, sealed])
}

/**
 * Checks a push request's `Authorization: vapid t=<JWT>, k=<key>` (RFC 8292): `k` is the
 * expected application server key, the JWT is ES256 over it, for the endpoint's origin, not
 * expired and at most 24 h ahead. Answers the JWT's claims; throws when any check fails.
 */
export const verifyVapid = (request: ReceivedRequest, expectedPublicKey: string, audience: string): { aud: string; exp: number; sub: string } => {
  const header = String(request.headers["authorization"] ?? "")
  const match = /^vapid t=([^,\s]+),\s*k=([A-Za-z0-9_-]+)$/u.exec(header)
  if (match === null) throw new Error(`not a VAPID authorization: ${header.slice(0, 20)}`)
  const [, jwt, key] = match
  if (key !== expectedPublicKey) throw new Error("the VAPID key is not the service's public key")
  const [head, claims, signature] = jwt!.split(".")
  const point = Buffer.from(key, "base64url")
  const publicKey = createPublicKey({
    key: { kty: "EC", crv: "P-256", x: point.subarray(1, 33).toString("base64url"), y: point.subarray(33, 65).toString("base64url") },
    format: "jwk"
  })
  const valid = verify("sha256", Buffer.from(`${head}.${claims}`), { key: publicKey, dsaEncoding: "ieee-p1363" }, Buffer.from(signature!, "base64url"))
  if (!valid) throw new Error("the VAPID JWT signature does not verify")
  const parsedHead = JSON.parse(Buffer.from(head!, "base64url").toString()) as { alg: string }
  if (parsedHead.alg !== "ES256") throw new Error(`VAPID alg ${parsedHead.alg}`)
  const parsed = JSON.parse(Buffer.from(claims!, "base64url").toString()) as { aud: string; exp: number; sub: string }
  const nowSeconds = Date.now() / 1000
  if (parsed.aud !== audience) throw new Error(`VAPID aud ${parsed.aud}, expected ${audience}`)
  if (!(parsed.exp > nowSeconds && parsed.exp <= nowSeconds + 86_400)) throw new Error(`VAPID exp ${parsed.exp} out of range`)
  return parsed
}

/** The worker's push sender against a harness's database and clock. */
export interface PushSenderHandle {
  /** Attempts every push due at the harness clock's time, once; answers the outcomes. */
  readonly sendDue: () => Promise<ReadonlyArray<PushOutcome>>
  readonly close: () => Promise<void>
}

export const startPushSender = async (h: Harness, settings: Partial<BurnboxSettings> = {}): Promise<PushSenderHandle> => {
  const url = Redacted.make(h.databaseUrl)
  const config = BurnboxConfig.make({ secret: Redacted.make(TestSecret), siteUrl: "http://127.0.0.1", ...settings })
  const layer = StoreLive.pipe(
    Layer.provideMerge(PgClient.layer({ url, maxConnections: 3 })),
    Layer.provideMerge(Layer.succeed(DatabaseUrl, url)),
    Layer.provideMerge(Layer.succeed(BurnboxConfig, config)),
    Layer.provideMerge(Layer.succeed(Clock.Clock, h.clock))
  )
  const scope = Scope.makeUnsafe()
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  const sender = Context.get(context, PushSender)
  return {
    sendDue: () => Effect.runPromise(Effect.provideService(sender.sendDue(100), Clock.Clock, h.clock)),
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}
