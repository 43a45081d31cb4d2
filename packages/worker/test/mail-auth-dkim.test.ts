/**
 * DKIM through authenticateMail: a signed message is checked against its body (a changed body
 * fails), and an unsigned one is read only up to the end of its header block, with the same
 * results as when mailauth reads it whole.
 */
import { generateKeyPairSync } from "node:crypto"
import { authenticateMail, DnsResolver, mailauthInput, ManyHeaderLines } from "@burnbox/worker"
import { Effect } from "effect"
import { authenticate, dkimSign } from "mailauth"
import { describe, expect, it } from "vitest"

const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
const records = {
  "TXT signer.test": [["v=spf1 ip4:192.0.2.10 -all"]],
  "TXT _dmarc.signer.test": [["v=DMARC1; p=reject"]],
  "TXT mail._domainkey.signer.test": [[`v=DKIM1; k=rsa; p=${publicKey.export({ type: "spki", format: "der" }).toString("base64")}`]]
}
const envelope = { ip: "192.0.2.10", helo: "mx.signer.test", sender: "news@signer.test" }
const resolver = Effect.runSync(Effect.service(DnsResolver).pipe(Effect.provide(DnsResolver.fixed(records))))
const check = (raw: Uint8Array) => Effect.runPromise(authenticateMail(raw, envelope).pipe(Effect.provideService(DnsResolver, resolver)))
/** mailauth reading the whole message itself. */
const wholeRead = async (raw: Buffer) => {
  const result = await authenticate(raw, { ...envelope, mta: "mx.burnbox.test", resolver: resolver as never, disableArc: true, disableBimi: true })
  return { spf: result.spf ? result.spf.status.result : null, dkim: result.dkim.results[0]?.status.result ?? "none", dmarc: result.dmarc ? result.dmarc.status.result : null }
}

const unsigned = [
  "From: News <news@signer.test>",
  "To: <someone@burnbox.test>",
  "Subject: Your code is 482913",
  "Date: Sun, 22 Nov 2026 05:00:00 +0000",
  "Message-ID: <m1@signer.test>",
  "MIME-Version: 1.0",
  "Content-Type: text/plain; charset=utf-8",
  "",
  "Your code is 482913.",
  "DKIM-Signature: in the body, not a header",
  ""
].join("\r\n")

const sign = async (message: string) => {
  const key = { signingDomain: "signer.test", selector: "mail", privateKey: privateKey.export({ type: "pkcs8", format: "pem" }).toString() }
  // mailauth signs with the keys of signatureData (its typings name only the top-level fields).
  const options = { ...key, signatureData: [key] }
  const signed = await dkimSign(message, options)
  return signed.signatures + message
}

describe("authenticateMail and DKIM", () => {
  it("passes a signed message, and not once its body is changed: the body is read when there is a signature", async () => {
    const signed = await sign(unsigned)
    expect(mailauthInput(Buffer.from(signed))).toHaveLength(Buffer.byteLength(signed))
    expect(await check(Buffer.from(signed))).toEqual({ spf: "pass", dkim: "pass", dmarc: "pass" })
    // mailauth reports a body that no longer matches its body hash as "neutral" (body hash did not verify).
    expect((await check(Buffer.from(signed.replace("code is 482913.", "code is 000000.")))).dkim).toBe("neutral")
  })

  it("reads an unsigned message up to the empty line after its headers, with the results of reading it whole", async () => {
    const raw = Buffer.from(unsigned)
    const headerBlock = unsigned.slice(0, unsigned.indexOf("\r\n\r\n") + 4)
    expect(Buffer.from(mailauthInput(raw)).toString("latin1")).toBe(headerBlock)
    expect(await check(raw)).toEqual(await wholeRead(raw))
    expect(await check(raw)).toEqual({ spf: "pass", dkim: "none", dmarc: "pass" })
    // LF-only line ends, and a message without a body, as mailauth's parser reads them.
    expect(Buffer.from(mailauthInput(Buffer.from("Subject: a\nFrom: b@c.test\n\nbody\n"))).toString()).toBe("Subject: a\nFrom: b@c.test\n\n")
    expect(mailauthInput(Buffer.from("Subject: a\r\nFrom: b@c.test\r\n"))).toHaveLength(28)
  })

  it("gives mailauth only the From fields of an unsigned message with very many header lines, with the results of reading it whole", async () => {
    const padding = Array.from({ length: ManyHeaderLines }, (_, i) => `X-Pad-${i}: ${"v".repeat(20)}\r\n`).join("")
    const folded = unsigned.replace("\r\n\r\n", `\r\n${padding}Comments: one\r\n and two\r\n\r\n`)
    const raw = Buffer.from(folded)
    const input = Buffer.from(mailauthInput(raw)).toString("latin1")
    expect(input).toMatch(/^from[ \t]*:/i)
    expect(input.split("\r\n").filter((line) => line !== "").every((line) => /^from[ \t]*:|^[ \t]/i.test(line))).toBe(true)
    expect(await check(raw)).toEqual(await wholeRead(raw))
    expect(await check(raw)).toEqual({ spf: "pass", dkim: "none", dmarc: "pass" })
  })
})
