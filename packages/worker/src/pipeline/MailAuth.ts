/**
 * SPF, DKIM and DMARC of received mail through mailauth. DNS goes through the `DnsResolver`
 * service, so tests answer from fixed records and production from the system resolver through
 * a cache: a slow or unreachable DNS makes the results null or `temperror`, never stalls the
 * pipeline.
 *
 * Without a reachable DNS server (an isolated deployment) every lookup fails: each name costs
 * at most one timeout (1 s) per `FailureTtlMs`, concurrent lookups of one name share it, and
 * the results read `none`/`temperror`/null; mail is still processed.
 */
import { promises as dns } from "node:dns"
import { hostname } from "node:os"
import { Context, Effect, Layer } from "effect"
import { authenticate } from "mailauth"

export type Resolve = (name: string, rrtype: string) => Promise<unknown>

/** How long an answer is reused (the system resolver does not tell its TTL). */
export const AnswerTtlMs = 60_000
/** How long "no such name" / "no such record" is reused. */
export const NegativeTtlMs = 60_000
/** How long a failed lookup (timeout, refused, server failure) is reused, so a dead resolver costs one wait per name. */
export const FailureTtlMs = 30_000
const MaxCachedNames = 10_000
const NegativeCodes = new Set(["ENOTFOUND", "ENODATA"])

/**
 * A resolver that remembers answers and failures (per name and record type), and shares one
 * lookup among concurrent callers. `clock` is injectable so tests can move time.
 */
export const cachingResolver = (resolve: Resolve, clock: () => number = Date.now): Resolve => {
  const entries = new Map<string, { readonly until: number; readonly answer: Promise<unknown> }>()
  return (name: string, rrtype: string) => {
    const key = `${rrtype.toUpperCase()} ${name.toLowerCase()}`
    const at = clock()
    const found = entries.get(key)
    if (found !== undefined && found.until > at) return found.answer
    // Full: the name looked up first goes (a Map keeps insertion order), one step, not a scan per lookup.
    if (entries.size >= MaxCachedNames) entries.delete(entries.keys().next().value!)
    // Until it settles the lookup is shared; then it is kept for its TTL.
    const answer = resolve(name, rrtype)
    entries.set(key, { until: Number.POSITIVE_INFINITY, answer })
    answer.then(
      () => entries.set(key, { until: clock() + AnswerTtlMs, answer }),
      (error: unknown) => {
        const code = (error as { code?: unknown }).code
        entries.set(key, { until: clock() + (typeof code === "string" && NegativeCodes.has(code) ? NegativeTtlMs : FailureTtlMs), answer })
      }
    )
    return answer
  }
}

export class DnsResolver extends Context.Service<DnsResolver, Resolve>()("burnbox/DnsResolver") {
  static readonly layer = Layer.sync(DnsResolver, () => {
    const resolver = new dns.Resolver({ timeout: 1_000, tries: 1 })
    return cachingResolver((name: string, rrtype: string) => resolver.resolve(name, rrtype as "TXT"))
  })

  /**
   * Answers from fixed records and fails every other name exactly as the system resolver does
   * (an error with code ENOTFOUND), so mailauth takes the same paths as in production.
   */
  static readonly fixed = (records: Readonly<Record<string, ReadonlyArray<unknown>>>) =>
    Layer.succeed(DnsResolver, async (name: string, rrtype: string) => {
      const answer = records[`${rrtype.toUpperCase()} ${name.toLowerCase()}`]
      if (answer === undefined) throw Object.assign(new Error(`queryTxt ENOTFOUND ${name}`), { code: "ENOTFOUND", hostname: name })
      return answer
    })
}

export interface AuthResults {
  readonly spf: string | null
  readonly dkim: string | null
  readonly dmarc: string | null
}

export const noAuth: AuthResults = { spf: null, dkim: null, dmarc: null }

interface MailauthResult {
  readonly spf?: { readonly status?: { readonly result?: string } } | false
  readonly dkim?: { readonly results?: ReadonlyArray<{ readonly status?: { readonly result?: string } }> }
  readonly dmarc?: { readonly status?: { readonly result?: string } } | false
}

const LF = 0x0a
const CR = 0x0d

/**
 * What mailauth needs to read of `raw`: without a DKIM-Signature header only the header block
 * (through the empty line that ends it, found as mailauth's DKIM parser finds it), since the
 * body only ever feeds the body hash of a signature (ARC and BIMI are off). That saves streaming
 * every unsigned body through the DKIM parser; signed mail is read whole.
 */
export const mailauthInput = (raw: Uint8Array): Uint8Array => {
  for (let i = raw.indexOf(LF); i >= 0; i = raw.indexOf(LF, i + 1)) {
    if (i === 0 || raw[i - 1] === LF || (raw[i - 1] === CR && (i === 1 || raw[i - 2] === LF))) {
      const headers = raw.subarray(0, i + 1)
      return Buffer.from(headers.buffer, headers.byteOffset, headers.byteLength).toString("latin1").toLowerCase().includes("dkim-signature")
        ? raw
        : headers
    }
  }
  return raw
}

/** The results of one message; null where a check could not run. Bounded to five seconds. */
export const authenticateMail = (
  raw: Uint8Array,
  envelope: { readonly ip: string | null; readonly helo: string | null; readonly sender: string | null }
) =>
  Effect.gen(function*() {
    const resolver = yield* DnsResolver
    const input = mailauthInput(raw)
    const result = yield* Effect.tryPromise(() =>
      authenticate(Buffer.from(input.buffer, input.byteOffset, input.byteLength), {
        ...(envelope.ip === null ? {} : { ip: envelope.ip }),
        ...(envelope.helo === null ? {} : { helo: envelope.helo }),
        ...(envelope.sender === null ? {} : { sender: envelope.sender }),
        mta: hostname(),
        resolver: resolver as Parameters<typeof authenticate>[1] extends { resolver?: infer R } ? R : never,
        disableArc: true,
        disableBimi: true
      }) as Promise<MailauthResult>
    )
    return {
      spf: result.spf ? result.spf.status?.result ?? null : null,
      dkim: result.dkim?.results?.[0]?.status?.result ?? "none",
      dmarc: result.dmarc ? result.dmarc.status?.result ?? null : null
    } satisfies AuthResults
  }).pipe(
    Effect.timeout("5 seconds"),
    Effect.catchCause(() => Effect.succeed(noAuth))
  )
