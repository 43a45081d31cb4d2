/**
 * SPF, DKIM and DMARC of received mail through mailauth. DNS goes through the `DnsResolver`
 * service, so tests answer from fixed records and production from the system resolver with
 * a short timeout: a slow or unreachable DNS makes the results null, never stalls the pipeline.
 */
import { promises as dns } from "node:dns"
import { hostname } from "node:os"
import { Context, Effect, Layer } from "effect"
import { authenticate } from "mailauth"

export type Resolve = (name: string, rrtype: string) => Promise<unknown>

export class DnsResolver extends Context.Service<DnsResolver, Resolve>()("burnbox/DnsResolver") {
  static readonly layer = Layer.sync(DnsResolver, () => {
    const resolver = new dns.Resolver({ timeout: 1_500, tries: 1 })
    return (name: string, rrtype: string) => resolver.resolve(name, rrtype as "TXT")
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

/** The results of one message; null where a check could not run. Bounded to five seconds. */
export const authenticateMail = (
  raw: Uint8Array,
  envelope: { readonly ip: string | null; readonly helo: string | null; readonly sender: string | null }
) =>
  Effect.gen(function*() {
    const resolver = yield* DnsResolver
    const result = yield* Effect.tryPromise(() =>
      authenticate(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength), {
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
