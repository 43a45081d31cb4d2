/**
 * The HTTPS POST of a webhook delivery (spec 6.5.1), over kept-alive connections.
 *
 * A connection belongs to one pool per checked target: the address that passed the SSRF policy,
 * the port, the host name (SNI and certificate) and the SPKI pin. A request therefore only ever
 * travels over a connection to the address its own attempt checked, and every connection was
 * opened with a full handshake whose certificate passed the host name check and the pin (TLS
 * session resumption is off, since Node skips `checkServerIdentity` on a resumed session).
 * Redirects are never followed (undici's `request` does not), and HTTP/2 is not offered.
 *
 * Why pools: a fresh TLS connection per delivery cost ~50 ms of CPU here (most of it building a
 * secure context from the trusted CAs for every connection) and capped delivery at ~20/s.
 * The secure context is now built once per engine and connections are reused.
 */
import { createHash, X509Certificate } from "node:crypto"
import { isIP } from "node:net"
import { checkServerIdentity, createSecureContext, type PeerCertificate, type SecureContext } from "node:tls"
import { Pool } from "undici"
import { pgText } from "@burnbox/store"

export interface PostTarget {
  readonly url: URL
  /** Host name for SNI and certificate checks (or the IP literal). */
  readonly host: string
  /** The address that passed the policy: the only one connected to. */
  readonly address: string
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

export class WebhookTransport {
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
  async post(
    target: PostTarget,
    body: Uint8Array,
    headers: Record<string, string>,
    options: { readonly spkiPin: string | null; readonly timeoutMs: number }
  ): Promise<PostResult> {
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
