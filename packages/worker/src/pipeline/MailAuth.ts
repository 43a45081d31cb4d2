/**
 * SPF, DKIM and DMARC of received mail through mailauth. DNS goes through the `DnsResolver`
 * service, so tests answer from fixed records and production from the system resolver through
 * a cache: a slow or unreachable DNS makes the results null or `temperror`, never stalls the
 * pipeline.
 *
 * Without a reachable DNS server (an isolated deployment) every lookup fails: each name costs
 * at most one timeout (1 s) per `FailureTtlMs`, concurrent lookups of one name share it, and
 * the results read `none`/`temperror`/null; mail is still processed.
 *
 * The checks are split as the work is: DKIM reads the message (Dkim.ts) and so runs in the
 * pipeline's mail worker thread, with its few key lookups answered from here; SPF (the envelope)
 * and DMARC (the From domains DKIM found) read no message bytes and run here, SPF beside the
 * thread's work. Together they answer what mailauth's `authenticate` answers.
 */
import { promises as dns } from "node:dns"
import { isIP } from "node:net"
import { hostname } from "node:os"
import { Context, Effect, Layer } from "effect"
import { type DMARCOptions, type DNSResolver, dmarc, spf, type SPFOptions, type SPFResult } from "mailauth"
import { type DkimOutcome, type Resolve, verifyDkim } from "./Dkim.ts"

export { type DkimOutcome, mailauthInput, ManyHeaderLines, type Resolve } from "./Dkim.ts"

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

export interface Envelope {
  readonly ip: string | null
  readonly helo: string | null
  readonly sender: string | null
}

/** SPF of the envelope as mailauth's `authenticate` runs it; false when it has nothing to check. */
const checkSpf = (resolver: Resolve, envelope: Envelope) => {
  // authenticate's rules: the client address stands in for a missing HELO, an address HELO is bracketed.
  const helo = envelope.helo ?? envelope.ip
  return spf({
    ...(envelope.ip === null ? {} : { ip: envelope.ip }),
    ...(helo === null ? {} : { helo: isIP(helo) ? `[${helo}]` : helo }),
    ...(envelope.sender === null ? {} : { sender: envelope.sender }),
    mta: hostname(),
    resolver: resolver as DNSResolver,
    strict: false
  } as SPFOptions)
}

/** DMARC as `authenticate` evaluates it: over the From domains, SPF's domain if it passed, the passing signatures. */
const checkDmarc = (resolver: Resolve, dkim: Extract<DkimOutcome, { ok: true }>, spfResult: SPFResult | false) => {
  const options: DMARCOptions = {
    headerFrom: [...dkim.headerFrom],
    fromFields: dkim.fromFields,
    spfDomains: spfResult && spfResult.status.result === "pass" && spfResult.domain ? [spfResult.domain] : [],
    dkimDomains: dkim.signatures
      .filter((signature) => signature.result === "pass")
      .map((signature) => ({
        ...(signature.id === null ? {} : { id: signature.id }),
        domain: signature.signingDomain ?? "",
        aligned: signature.aligned,
        ...(signature.underSized === null ? {} : { underSized: signature.underSized })
      })),
    resolver: resolver as DNSResolver,
    strict: false
  }
  return dmarc(options)
}

/**
 * Runs `work` (which reads the message and answers its DKIM outcome, e.g. in a mail worker
 * thread) with SPF beside it, then DMARC: the results mailauth's `authenticate` gives, with
 * ARC and BIMI off, null where a check could not run. A failure of `work` is its caller's; SPF
 * and DMARC are bounded to five seconds once `work` is done, and any failure of theirs, or a DKIM
 * outcome that could not be read, leaves no results (as a failure of `authenticate` did).
 */
export const authenticateBeside = <A, E, R>(
  work: Effect.Effect<A, E, R>,
  dkimOf: (done: A) => DkimOutcome,
  envelope: Envelope
) =>
  Effect.gen(function*() {
    const resolver = yield* DnsResolver
    // SPF needs only the envelope: it starts now, while `work` reads the message. (Settled into
    // a value, so it never rejects unheard.)
    const spfOutcome = checkSpf(resolver, envelope).then(
      (result) => ({ ok: true as const, result }),
      (error: unknown) => ({ ok: false as const, error })
    )
    const done = yield* work
    const dkim = dkimOf(done)
    if (!dkim.ok) return [done, noAuth] as const
    const auth = yield* Effect.tryPromise(async (): Promise<AuthResults> => {
      const spfResult = await spfOutcome
      if (!spfResult.ok) throw spfResult.error
      const dmarcResult = await checkDmarc(resolver, dkim, spfResult.result)
      return {
        spf: spfResult.result ? spfResult.result.status.result : null,
        dkim: dkim.signatures[0]?.result ?? "none",
        dmarc: dmarcResult ? dmarcResult.status.result : null
      }
    }).pipe(
      Effect.timeout("5 seconds"),
      Effect.catchCause(() => Effect.succeed(noAuth))
    )
    return [done, auth] as const
  })

/** The results of one message, read here on the calling thread; null where a check could not run. */
export const authenticateMail = (raw: Uint8Array, envelope: Envelope) =>
  Effect.gen(function*() {
    const resolver = yield* DnsResolver
    const dkim = Effect.promise(() => verifyDkim(raw, { resolver, sender: envelope.sender }))
    const [, auth] = yield* authenticateBeside(dkim, (outcome) => outcome, envelope)
    return auth
  })
