import { describe, expect, it } from "@effect/vitest"
import { ed25519 } from "@noble/curves/ed25519.js"
import { randomBytes } from "node:crypto"
import { Schema } from "effect"
import { Webhook } from "standardwebhooks"
import {
  buildKeySet,
  decodeEndpointSecret,
  decryptPrivateKey,
  ed25519Signature,
  encryptPrivateKey,
  generateEd25519KeyPair,
  generateEndpointSecret,
  hmacSignature,
  keyId,
  keySetPublicKeys,
  signatureHeader,
  signedContent,
  SigningKeyDecryptionError,
  verifyEd25519,
  verifyHmac,
  WebhookKeySet
} from "../src/webhooks/index.ts"

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text)
const nowSeconds = (): number => Math.floor(Date.now() / 1000)

// The test vector published with the Standard Webhooks reference libraries.
const knownAnswer = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  timestamp: 1614265330,
  body: utf8(`{"test": 2432232314}`),
  signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
}

const v1aSignatureOf = (header: string): Uint8Array => {
  const entry = header.split(" ").find((e) => e.startsWith("v1a,"))
  if (entry === undefined) throw new Error("no v1a entry")
  return new Uint8Array(Buffer.from(entry.slice(4), "base64"))
}

describe("endpoint secrets", () => {
  it("are whsec_ and the base64 of 32 random bytes", () => {
    const secret = generateEndpointSecret()
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    expect(decodeEndpointSecret(secret)).toHaveLength(32)
    expect(generateEndpointSecret()).not.toBe(secret)
  })

  it("decode with or without the prefix and refuse malformed base64", () => {
    expect(decodeEndpointSecret("whsec_AAEC")).toEqual(new Uint8Array([0, 1, 2]))
    expect(decodeEndpointSecret("AAEC")).toEqual(new Uint8Array([0, 1, 2]))
    expect(() => decodeEndpointSecret("whsec_")).toThrow()
    expect(() => decodeEndpointSecret("whsec_not base64!")).toThrow()
  })
})

describe("v1 HMAC signatures", () => {
  it("match the Standard Webhooks known answer", () => {
    const { body, id, secret, signature, timestamp } = knownAnswer
    expect(hmacSignature(secret, id, timestamp, body)).toBe(signature)
  })

  it("sign <id>.<timestamp>.<exact body bytes>", () => {
    const body = new Uint8Array([0xff, 0x00, 0x7b])
    expect(signedContent("msg_1", 1700000000, body)).toEqual(
      new Uint8Array([...utf8("msg_1.1700000000."), 0xff, 0x00, 0x7b])
    )
    expect(() => signedContent("msg_1", 1.5, body)).toThrow()
  })

  it("verify the known answer inside the 300-second tolerance and refuse outside it", () => {
    const { body, id, secret, signature, timestamp } = knownAnswer
    const request = { id, timestamp: String(timestamp), signature, body }
    expect(verifyHmac(secret, request, { nowSeconds: timestamp + 300 })).toEqual({ ok: true, timestamp })
    expect(verifyHmac(secret, request, { nowSeconds: timestamp - 300 })).toEqual({ ok: true, timestamp })
    expect(verifyHmac(secret, request, { nowSeconds: timestamp + 301 })).toEqual({
      ok: false,
      reason: "timestamp_too_old"
    })
    expect(verifyHmac(secret, request, { nowSeconds: timestamp - 301 })).toEqual({
      ok: false,
      reason: "timestamp_too_new"
    })
    expect(verifyHmac(secret, { ...request, timestamp: "16142653e3" }, { nowSeconds: timestamp })).toEqual({
      ok: false,
      reason: "invalid_timestamp"
    })
  })

  it("refuse a tampered body, timestamp or id, and the wrong secret", () => {
    const { body, id, secret, signature, timestamp } = knownAnswer
    const request = { id, timestamp, signature, body }
    const refused = { ok: false, reason: "no_matching_signature" }
    const now = { nowSeconds: timestamp }
    expect(verifyHmac(secret, { ...request, body: utf8(`{"test": 2432232315}`) }, now)).toEqual(refused)
    expect(verifyHmac(secret, { ...request, timestamp: timestamp + 1 }, now)).toEqual(refused)
    expect(verifyHmac(secret, { ...request, id: "msg_p5jXN8AQM9LWM0D4loKWxJeK" }, now)).toEqual(refused)
    expect(verifyHmac(generateEndpointSecret(), request, now)).toEqual(refused)
  })
})

describe("the webhook-signature header", () => {
  const oldSecret = generateEndpointSecret()
  const newSecret = generateEndpointSecret()
  const signingKey = generateEd25519KeyPair()
  const id = "evt_01J8Z3V6W7X8Y9ZA0B1C2D3E4F"
  const body = utf8(JSON.stringify({ id, type: "webhook.test", data: { endpoint_id: 1, message: "hello" } }))

  it("carries one v1 entry per live secret and one v1a entry per signing key", () => {
    const header = signatureHeader({
      secrets: [oldSecret, newSecret],
      ed25519Keys: [signingKey.privateKey],
      id,
      timestamp: 1700000000,
      body
    })
    expect(header.split(" ").map((entry) => entry.split(",")[0])).toEqual(["v1", "v1", "v1a"])
    expect(() => signatureHeader({ secrets: [], ed25519Keys: [], id, timestamp: 1700000000, body })).toThrow()
  })

  it("is accepted by the official standardwebhooks verifier for both secrets during a rotation", () => {
    const timestamp = nowSeconds() // the official verifier checks against the real clock
    const headers = {
      "webhook-id": id,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": signatureHeader({
        secrets: [oldSecret, newSecret],
        ed25519Keys: [signingKey.privateKey],
        id,
        timestamp,
        body
      })
    }
    const payload = Buffer.from(body)
    for (const secret of [oldSecret, newSecret]) {
      expect(new Webhook(secret).verify(payload, headers)).toMatchObject({ type: "webhook.test" })
    }
    expect(() => new Webhook(generateEndpointSecret()).verify(payload, headers)).toThrow()
  })

  it("has a v1a entry that @noble/curves verifies against the public key", () => {
    const timestamp = 1700000000
    const header = signatureHeader({ secrets: [oldSecret], ed25519Keys: [signingKey.privateKey], id, timestamp, body })
    const content = utf8(`${id}.${timestamp}.${new TextDecoder().decode(body)}`)
    expect(ed25519.verify(v1aSignatureOf(header), content, signingKey.publicKey)).toBe(true)
    expect(ed25519.verify(v1aSignatureOf(header), content, generateEd25519KeyPair().publicKey)).toBe(false)
  })
})

describe("v1a Ed25519 signatures", () => {
  const keys = generateEd25519KeyPair()
  const id = "evt_01J8Z3V6W7X8Y9ZA0B1C2D3E4F"
  const timestamp = 1700000000
  const body = utf8(`{"type":"alias.burned"}`)
  const request = { id, timestamp, signature: ed25519Signature(keys.privateKey, id, timestamp, body), body }

  it("node:crypto signs byte-for-byte what @noble/curves signs for the same key (RFC 8032 is deterministic)", () => {
    for (let i = 0; i < 20; i++) {
      const pair = generateEd25519KeyPair()
      const content = new Uint8Array(randomBytes(i * 97))
      const entry = ed25519Signature(pair.privateKey, id, timestamp + i, content)
      const noble = Buffer.from(ed25519.sign(signedContent(id, timestamp + i, content), pair.privateKey)).toString("base64")
      expect(entry).toBe(`v1a,${noble}`)
    }
  })

  const now = { nowSeconds: timestamp + 10 }

  it("are raw 32-byte keys producing 64-byte signatures", () => {
    expect(keys.privateKey).toHaveLength(32)
    expect(keys.publicKey).toHaveLength(32)
    expect(request.signature).toMatch(/^v1a,[A-Za-z0-9+/]{86}==$/)
  })

  it("verify against any of the published keys", () => {
    const other = generateEd25519KeyPair().publicKey
    expect(verifyEd25519([other, keys.publicKey], request, now)).toEqual({ ok: true, timestamp })
    expect(verifyEd25519([other], request, now)).toEqual({ ok: false, reason: "no_matching_signature" })
  })

  it("refuse a tampered body, timestamp or id", () => {
    const refused = { ok: false, reason: "no_matching_signature" }
    expect(verifyEd25519([keys.publicKey], { ...request, body: utf8(`{"type":"alias.paused"}`) }, now)).toEqual(refused)
    expect(verifyEd25519([keys.publicKey], { ...request, timestamp: timestamp + 1 }, now)).toEqual(refused)
    expect(verifyEd25519([keys.publicKey], { ...request, id: "evt_01J8Z3V6W7X8Y9ZA0B1C2D3E4G" }, now)).toEqual(refused)
  })

  it("are not mistaken for v1 entries, nor v1 for v1a", () => {
    const secret = generateEndpointSecret()
    const hmacOnly = { ...request, signature: hmacSignature(secret, id, timestamp, body) }
    expect(verifyEd25519([keys.publicKey], hmacOnly, now)).toMatchObject({ ok: false })
    expect(verifyHmac(secret, request, now)).toMatchObject({ ok: false })
  })
})

describe("key ids and the published key set", () => {
  it("derive a stable kid from the public key", () => {
    const { publicKey } = generateEd25519KeyPair()
    expect(keyId(publicKey)).toMatch(/^bbx_[0-9a-f]{16}$/)
    expect(keyId(new Uint8Array(publicKey))).toBe(keyId(publicKey))
    expect(keyId(generateEd25519KeyPair().publicKey)).not.toBe(keyId(publicKey))
    expect(keyId(new Uint8Array(32))).toBe("bbx_66687aadf862bd77")
  })

  it("lists the current key first, then previous keys newest first, as the schema describes", () => {
    const current = generateEd25519KeyPair().publicKey
    const older = generateEd25519KeyPair().publicKey
    const newer = generateEd25519KeyPair().publicKey
    const keySet = buildKeySet([
      { publicKey: older, status: "previous", createdAt: new Date("2026-01-01T00:00:00Z") },
      { publicKey: current, status: "current", createdAt: new Date("2026-03-01T00:00:00Z") },
      { publicKey: newer, status: "previous", createdAt: new Date("2026-02-01T00:00:00Z") }
    ])
    expect(keySet.keys.map((k) => [k.kid, k.status])).toEqual([
      [keyId(current), "current"],
      [keyId(newer), "previous"],
      [keyId(older), "previous"]
    ])
    expect(keySet.keys[0]).toEqual({
      kid: keyId(current),
      alg: "Ed25519",
      publicKey: Buffer.from(current).toString("base64"),
      status: "current",
      createdAt: "2026-03-01T00:00:00.000Z"
    })
    const decoded = Schema.decodeUnknownSync(WebhookKeySet)(JSON.parse(JSON.stringify(keySet)))
    expect(keySetPublicKeys(decoded)).toEqual([current, newer, older])
  })
})

describe("private keys at rest", () => {
  const serverSecret = "correct horse battery staple"

  it("round-trip through AES-256-GCM in the v1 format", () => {
    const { privateKey } = generateEd25519KeyPair()
    const encrypted = encryptPrivateKey(privateKey, serverSecret)
    expect(encrypted).toMatch(/^v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{43}\.[A-Za-z0-9_-]{22}$/)
    expect(encryptPrivateKey(privateKey, serverSecret)).not.toBe(encrypted) // fresh IV each time
    expect(decryptPrivateKey(encrypted, serverSecret)).toEqual(privateKey)
  })

  it("refuse a wrong server secret, tampering and unknown formats with a clear error", () => {
    const encrypted = encryptPrivateKey(generateEd25519KeyPair().privateKey, serverSecret)
    expect(() => decryptPrivateKey(encrypted, "another secret")).toThrow(SigningKeyDecryptionError)
    expect(() => decryptPrivateKey(encrypted, "another secret")).toThrow(/BURNBOX_SECRET/)
    const [version, iv, ciphertext, tag] = encrypted.split(".")
    const flipped = `${ciphertext?.startsWith("A") ? "B" : "A"}${ciphertext?.slice(1)}`
    expect(() => decryptPrivateKey([version, iv, flipped, tag].join("."), serverSecret)).toThrow(
      SigningKeyDecryptionError
    )
    expect(() => decryptPrivateKey([version, iv, ciphertext, tag?.slice(0, 8)].join("."), serverSecret)).toThrow(
      SigningKeyDecryptionError
    )
    expect(() => decryptPrivateKey(`v2.${encrypted.slice(3)}`, serverSecret)).toThrow(/format/)
  })
})
