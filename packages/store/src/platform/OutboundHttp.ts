/**
 * The one way out (architecture.md "Services"): every request burnbox makes to a URL a user
 * gave (webhooks now, browser push later) is checked and sent here.
 *
 * The check: the URL's rules, then DNS once; every address the name resolves to must be allowed
 * (`BURNBOX_WEBHOOK_ALLOW_PRIVATE` lifts the private-address rule). The request then connects to
 * the checked address, never resolving again (no DNS rebinding).
 *
 * The POST goes over kept-alive connections. A connection belongs to one pool per checked
 * target: the address that passed the SSRF policy, the port, the host name (SNI and
 * certificate) and the SPKI pin. A request therefore only ever travels over a connection to the
 * address its own attempt checked, and every connection was opened with a full handshake whose
 * certificate passed the host name check and the pin (TLS session resumption is off, since Node
 * skips `checkServerIdentity` on a resumed session). Redirects are never followed (undici's
 * `request` does not), and HTTP/2 is not offered. The CAs trusted are Node's, plus
 * `BURNBOX_WEBHOOK_CA_FILE` when set.
 *
 * Why pools: a fresh TLS connection per delivery cost ~50 ms of CPU here (most of it building a
 * secure context from the trusted CAs for every connection) and capped delivery at ~20/s.
 * The secure context is now built once per layer and connections are reused; the pools close
 * with the layer's scope.
 */
import { createHash, X509Certificate } from "node:crypto"
import { lookup } from "node:dns/promises"
import { readFileSync } from "node:fs"
import { isIP } from "node:net"
import { checkServerIdentity, createSecureContext, type PeerCertificate, rootCertificates, type SecureContext } from "node:tls"
import { checkResolvedAddresses, checkWebhookUrl } from "@burnbox/domain/net/index"
import { Context, Effect, Layer, Option } from "effect"
import { Pool } from "undici"
import { BurnboxConfig } from "./Config.ts"
import { pgText } from "./PgText.ts"

// ---------------------------------------------------------------------------------------------
// Where a URL leads

/** Resolves a host name to its addresses (all families). */
export type HostResolver = (host: string) => Effect.Effect<ReadonlyArray<string>>

/** The resolver webhook checks and deliveries use; tests replace it, the default asks the system. */
export const TargetResolver = Context.Reference<HostResolver>("burnbox/TargetResolver", {
  defaultValue: () => (host: string) =>
    Effect.promise(() =>
      lookup(host, { all: true, verbatim: true }).then((answers) => answers.map((a) => a.address), () => [] as Array<string>)
    )
})

/** Where a request may go: the checked address (and the name for SNI and certificates), or why not. */
export type TargetCheck =
  | { readonly ok: true; readonly url: URL; readonly host: string; readonly address: string }
  | { readonly ok: false; readonly reason: string }

const checkTargetWith = (resolve: HostResolver, raw: string, allowPrivate: boolean) =>
  Effect.gen(function*() {
    const checked = checkWebhookUrl(raw, { allowPrivate })
    if (!checked.ok) return { ok: false, reason: checked.reason } as TargetCheck
    const addresses = checked.literalIp !== null ? [checked.literalIp] : yield* resolve(checked.host)
    const resolved = checkResolvedAddresses(addresses, { allowPrivate })
    if (!resolved.ok) return { ok: false, reason: resolved.reason } as TargetCheck
    return { ok: true, url: checked.url, host: checked.host, address: addresses[0]! } as TargetCheck
  })

/**
 * The URL rules, then DNS: every address the name resolves to must be allowed. The caller
 * connects to `address`, the one that was checked, never resolving again (no rebinding).
 */
export const checkTarget = (raw: string, allowPrivate: boolean) =>
  Effect.gen(function*() {
    const resolve = yield* TargetResolver
    return yield* checkTargetWith(resolve, raw, allowPrivate)
  })

// ---------------------------------------------------------------------------------------------
// The POST

/** A target that passed the check. */
export interface PostTarget {
  readonly url: URL
  /** Host name for SNI and certificate checks (or the IP literal). */
  readonly host: string
  /** The address that passed the policy: the only one connected to. */
  readonly address: string
}

export interface PostOptions {
  /** `sha256/<base64>` the receiver's public key must match, or null. */
  readonly spkiPin: string | null
  /** For the whole request: connecting, the handshake, the status and the snippet. */
  readonly timeoutMs: number
}

export type PostResult =
  | { readonly kind: "response"; readonly status: number; readonly snippet: string | null; readonly latencyMs: number }
  | { readonly kind: "error"; readonly errorCode: string; readonly latencyMs: number }

const SnippetChars = 512
/** Idle connections close after this; below Node's default server keep-alive (5 s), so the receiver rarely closes first. */
const IdleConnectionMs = 4_000
/** A pool unused this long is closed and forgotten. */
const IdlePoolMs = 60_000
/**
 * At most this many connections to one target at a time. Delivery attempts no more at once, so
 * no attempt's timeout runs while it waits for a connection (a false timeout would count toward
 * disabling the endpoint).
 */
export const ConnectionsPerTarget = 64

/**
 * `sha256/<base64 SHA-256 of the DER SubjectPublicKeyInfo>` of a certificate. Taken from the
 * certificate's DER, not `cert.pubkey`, which for EC keys is the bare point, not the SPKI.
 */
export const spkiPinOf = (cert: { readonly raw: Buffer }): string => {
  const spki = new X509Certificate(cert.raw).publicKey.export({ type: "spki", format: "der" })
  return `sha256/${createHash("sha256").update(spki).digest("base64")}`
}

const errorCodeOf = (error: unknown, timedOut: boolean): string => {
  if (timedOut) return "timeout"
  const code = (error as { code?: unknown }).code
  switch (code) {
    case "ERR_SPKI_PIN_MISMATCH":
      return "spki_pin_mismatch"
    case "UND_ERR_CONNECT_TIMEOUT":
    case "UND_ERR_HEADERS_TIMEOUT":
    case "UND_ERR_BODY_TIMEOUT":
      return "timeout"
    case "ECONNREFUSED":
      return "connection_refused"
    case "ECONNRESET":
    case "EPIPE":
    case "UND_ERR_SOCKET":
      return "connection_reset"
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return "unreachable"
    default:
      if (typeof code === "string" && /CERT|TLS|SSL|SELF_SIGNED|UNABLE_TO/.test(code)) return "tls_error"
      return "connection_error"
  }
}

interface PoolEntry {
  readonly pool: Pool
  lastUsed: number
}

/** The kept-alive connections, one pool per checked target. */
class TargetPools {
  private readonly pools = new Map<string, PoolEntry>()
  private readonly secureContext: SecureContext
  private lastSweep = 0

  /** `ca`: the trusted CAs (unset: Node's default store). */
  constructor(ca: ReadonlyArray<string> | undefined) {
    this.secureContext = createSecureContext(ca === undefined ? {} : { ca: [...ca] })
  }

  private poolFor(target: PostTarget, spkiPin: string | null, timeoutMs: number): Pool {
    const port = target.url.port === "" ? 443 : Number(target.url.port)
    const key = `${target.address}\u0000${port}\u0000${target.host}\u0000${spkiPin ?? ""}`
    const now = Date.now()
    this.sweep(now)
    const found = this.pools.get(key)
    if (found !== undefined) {
      found.lastUsed = now
      return found.pool
    }
    const host = target.host
    const pool = new Pool(`https://${isIP(target.address) === 6 ? `[${target.address}]` : target.address}:${port}`, {
      connections: ConnectionsPerTarget,
      pipelining: 1,
      allowH2: false,
      keepAliveTimeout: IdleConnectionMs,
      keepAliveMaxTimeout: IdleConnectionMs,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      connect: {
        secureContext: this.secureContext,
        ...(isIP(host) === 0 ? { servername: host } : {}),
        maxCachedSessions: 0,
        timeout: timeoutMs,
        // Runs inside every handshake, before a byte of any request is sent.
        checkServerIdentity: (_host: string, cert: PeerCertificate) => {
          const identity = checkServerIdentity(host, cert)
          if (identity !== undefined) return identity
          if (spkiPin !== null && spkiPinOf(cert) !== spkiPin) {
            return Object.assign(new Error("The receiver's public key does not match the endpoint's spki_pin"), { code: "ERR_SPKI_PIN_MISMATCH" })
          }
          return undefined
        }
      }
    })
    this.pools.set(key, { pool, lastUsed: now })
    return pool
  }

  private sweep(now: number) {
    if (now - this.lastSweep < 10_000) return
    this.lastSweep = now
    for (const [key, entry] of this.pools) {
      if (now - entry.lastUsed >= IdlePoolMs) {
        this.pools.delete(key)
        entry.pool.close().catch(() => undefined)
      }
    }
  }

  /** One POST; never rejects. `latencyMs` runs from the start until the response snippet is read. */
  async post(target: PostTarget, body: Uint8Array, headers: Record<string, string>, options: PostOptions): Promise<PostResult> {
    const started = performance.now()
    const elapsed = () => Math.max(0, Math.round(performance.now() - started))
    const controller = new AbortController()
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      controller.abort()
    }, options.timeoutMs)
    try {
      const pool = this.poolFor(target, options.spkiPin, options.timeoutMs)
      const response = await pool.request({
        path: `${target.url.pathname}${target.url.search}`,
        method: "POST",
        headers: { ...headers, host: target.url.host },
        body: Buffer.from(body.buffer, body.byteOffset, body.byteLength),
        signal: controller.signal
      })
      const chunks: Array<Buffer> = []
      let size = 0
      try {
        for await (const chunk of response.body) {
          chunks.push(chunk as Buffer)
          size += (chunk as Buffer).length
          // Enough for the snippet: stop reading (the connection is dropped, not reused).
          if (size >= SnippetChars * 4) break
        }
      } catch {
        // The status arrived; a body cut short still makes a response (with what came of it).
      }
      // Cut to its length, which may split a character; stored as text PostgreSQL takes.
      const text = pgText(Buffer.concat(chunks).toString("utf8").slice(0, SnippetChars))
      return { kind: "response", status: response.statusCode, snippet: text === "" ? null : text, latencyMs: elapsed() }
    } catch (error) {
      return { kind: "error", errorCode: errorCodeOf(error, timedOut), latencyMs: elapsed() }
    } finally {
      clearTimeout(timer)
    }
  }

  async close(): Promise<void> {
    const pools = [...this.pools.values()]
    this.pools.clear()
    await Promise.all(pools.map((entry) => entry.pool.destroy().catch(() => undefined)))
  }
}

// ---------------------------------------------------------------------------------------------
// The service

export class OutboundHttp extends Context.Service<OutboundHttp, {
  /** Where a request to `url` may go, under the SSRF policy and the configured private-address rule. */
  readonly check: (url: string) => Effect.Effect<TargetCheck>
  /** One HTTPS POST to a checked target; never fails (a failure is a result of kind `error`). No redirect is followed. */
  readonly post: (target: PostTarget, body: Uint8Array, headers: Record<string, string>, options: PostOptions) => Effect.Effect<PostResult>
}>()("burnbox/OutboundHttp") {
  /** Scoped: its connections close when the scope that built it closes. */
  static readonly layer = Layer.effect(OutboundHttp, Effect.gen(function*() {
    const config = yield* BurnboxConfig
    const resolve = yield* TargetResolver
    const ca = Option.isSome(config.webhookCaFile)
      ? [...rootCertificates, readFileSync(config.webhookCaFile.value, "utf8")]
      : undefined
    const pools = yield* Effect.acquireRelease(
      Effect.sync(() => new TargetPools(ca)),
      (opened) => Effect.promise(() => opened.close())
    )

    const check = Effect.fn("OutboundHttp.check")(function*(url: string) {
      return yield* checkTargetWith(resolve, url, config.webhookAllowPrivate)
    })

    const post = Effect.fn("OutboundHttp.post")(function*(target: PostTarget, body: Uint8Array, headers: Record<string, string>, options: PostOptions) {
      return yield* Effect.promise(() => pools.post(target, body, headers, options))
    })

    return OutboundHttp.of({ check, post })
  }))
}
