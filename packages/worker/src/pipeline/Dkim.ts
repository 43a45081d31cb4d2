/**
 * The DKIM half of mail authentication: the only part of it that reads the message. mailauth's
 * DKIM verifier parses the header block and canonicalizes and hashes the body, which on hostile
 * input costs far more than its size (measured here: a Subject folded over 20,000 lines, 0.5 s;
 * 40,000 lines, 7.5 s; a signed 14 MB single-line body, 9.5 s). So it runs in a mail worker
 * thread (MailWork.ts) beside parsing, and only its DNS (the signers' public keys) comes back to
 * the main thread. SPF and DMARC read nothing of the message but the envelope and the From
 * domains found here, and stay on the main thread with their DNS (MailAuth.ts).
 *
 * No Effect here: this module is loaded by the worker thread, which should start fast.
 */
import type { DNSResolver } from "mailauth"
// The verifier alone: all of mailauth (SPF, DMARC, ARC, BIMI) would double a thread's start.
import { dkimVerify } from "mailauth/lib/dkim/verify.js"

export type Resolve = (name: string, rrtype: string) => Promise<unknown>

const LF = 0x0a
const CR = 0x0d

/** Above this many header lines, unsigned mail gives mailauth its From fields alone. */
export const ManyHeaderLines = 500

/**
 * The From fields of a header block (each with its folded continuation lines), and the empty
 * line that ends the block: all that mailauth's DKIM verifier reads of unsigned mail (headerFrom
 * and fromFields, for DMARC). One linear pass.
 */
const fromFieldsOnly = (headers: string): Uint8Array => {
  const kept: Array<string> = []
  let keeping = false
  for (const line of headers.split("\n")) {
    const continued = line.startsWith(" ") || line.startsWith("\t")
    if (!continued) keeping = /^from[ \t]*:/i.test(line)
    if (keeping) kept.push(line)
  }
  return Buffer.from(`${kept.join("\n")}\r\n\r\n`, "latin1")
}

/**
 * What mailauth needs to read of `raw`: without a DKIM-Signature header only the header block
 * (through the empty line that ends it, found as mailauth's DKIM parser finds it), since the
 * body only ever feeds the body hash of a signature (ARC and BIMI are off). That saves streaming
 * every unsigned body through the DKIM parser; signed mail is read whole. An unsigned header
 * block of more than ManyHeaderLines lines is cut to its From fields: mailauth's header parsing
 * grows faster than the lines (40,000 header lines: 2.5 s), and nothing else of it is read.
 */
export const mailauthInput = (raw: Uint8Array): Uint8Array => {
  let lines = 0
  for (let i = raw.indexOf(LF); i >= 0; i = raw.indexOf(LF, i + 1)) {
    lines++
    if (i === 0 || raw[i - 1] === LF || (raw[i - 1] === CR && (i === 1 || raw[i - 2] === LF))) {
      const headers = raw.subarray(0, i + 1)
      const text = Buffer.from(headers.buffer, headers.byteOffset, headers.byteLength).toString("latin1")
      if (text.toLowerCase().includes("dkim-signature")) return raw
      return lines > ManyHeaderLines ? fromFieldsOnly(text) : headers
    }
  }
  return raw
}

/** One signature's verdict, with what DMARC needs of it. */
export interface DkimSignature {
  readonly id: string | null
  readonly signingDomain: string | null
  readonly result: string
  readonly aligned: string | false
  readonly underSized: number | null
}

/**
 * What DKIM verification found, as plain data (it crosses from the worker thread): the From
 * addresses DMARC is evaluated for, and each signature's verdict. `failed` when mailauth could
 * not read the message at all (authentication then has no results, as before).
 */
export type DkimOutcome =
  | {
    readonly ok: true
    readonly headerFrom: ReadonlyArray<string>
    readonly fromFields: number
    readonly signatures: ReadonlyArray<DkimSignature>
  }
  | { readonly ok: false; readonly failed: string }

/** DKIM as mailauth's `authenticate` runs it (lenient mode, no ARC sealing). Never throws. */
export const verifyDkim = async (
  raw: Uint8Array,
  options: { readonly resolver: Resolve; readonly sender: string | null }
): Promise<DkimOutcome> => {
  try {
    const input = mailauthInput(raw)
    const result = await dkimVerify(Buffer.from(input.buffer, input.byteOffset, input.byteLength), {
      resolver: options.resolver as DNSResolver,
      ...(options.sender === null ? {} : { sender: options.sender }),
      strict: false
    })
    return {
      ok: true,
      headerFrom: [...(result.headerFrom ?? [])],
      fromFields: result.fromFields ?? 0,
      signatures: (result.results ?? []).map((row) => ({
        id: row.id ?? null,
        signingDomain: row.signingDomain ?? null,
        result: row.status.result,
        aligned: row.status.aligned ?? false,
        underSized: row.status.underSized ?? null
      }))
    }
  } catch (error) {
    return { ok: false, failed: error instanceof Error ? error.message : String(error) }
  }
}
