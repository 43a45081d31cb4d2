/**
 * The pure rules of protected desks (spec 4.6, 8; decisions.md "Protected operator desks"): the
 * byte limits, one recipient, the reply prefill and threading, and the hourly send limits.
 */
import { describe, expect, it } from "@effect/vitest"
import { deskSendRefusal, isSingleRecipient, replyPrefill, replyReferences, utf8Bytes } from "../src/index.ts"

describe("utf8Bytes", () => {
  it("counts UTF-8 bytes as the limits do: 1 to 4 per character", () => {
    expect(utf8Bytes("")).toBe(0)
    expect(utf8Bytes("abc")).toBe(3)
    expect(utf8Bytes("é")).toBe(2)
    expect(utf8Bytes("€")).toBe(3)
    expect(utf8Bytes("😀")).toBe(4)
    expect(utf8Bytes("a€😀é")).toBe(new TextEncoder().encode("a€😀é").length)
    // A lone surrogate is written as U+FFFD.
    expect(utf8Bytes("\ud800x")).toBe(new TextEncoder().encode("\ud800x").length)
  })
})

describe("isSingleRecipient", () => {
  it("takes one plain address", () => {
    for (const to of ["a@example.org", "first.last+tag@mail.example.co.uk", "o'neil@example.org", "jörg@exämple.de"]) {
      expect(isSingleRecipient(to), to).toBe(true)
    }
  })
  it("refuses lists, display names, quotes, spaces and malformed addresses", () => {
    for (const to of [
      "a@example.org, b@example.org", "a,b@example.org", "a@example.org;b@example.org", "Ann <a@example.org>", "<a@example.org>",
      "\"a b\"@example.org", "a b@example.org", "a@example", "@example.org", "a@", "a..b@example.org", ".a@example.org",
      "a@-example.org", "a@example.org\r\nBcc: x@example.org", `${"a".repeat(250)}@example.org`
    ]) expect(isSingleRecipient(to), to).toBe(false)
  })
})

describe("replyPrefill", () => {
  it("answers the sender with one Re: in front", () => {
    expect(replyPrefill({ senderAddress: "c@example.org", replyTo: undefined, subject: "Help" })).toEqual({ to: "c@example.org", subject: "Re: Help" })
    expect(replyPrefill({ senderAddress: "c@example.org", replyTo: undefined, subject: "RE: Help" })?.subject).toBe("RE: Help")
    expect(replyPrefill({ senderAddress: "c@example.org", replyTo: undefined, subject: "" })?.subject).toBe("Re:")
  })
  it("prefers a Reply-To that names one address", () => {
    expect(replyPrefill({ senderAddress: "c@example.org", replyTo: "Desk <d@example.org>", subject: "x" })?.to).toBe("d@example.org")
    expect(replyPrefill({ senderAddress: "c@example.org", replyTo: "d@example.org", subject: "x" })?.to).toBe("d@example.org")
    expect(replyPrefill({ senderAddress: "c@example.org", replyTo: "a@example.org, b@example.org", subject: "x" })?.to).toBe("c@example.org")
  })
  it("has no reply when there is no address to answer", () => {
    expect(replyPrefill({ senderAddress: "unknown@sender.invalid x", replyTo: undefined, subject: "x" })).toBeUndefined()
    expect(replyPrefill({ senderAddress: "", replyTo: "nonsense", subject: "x" })).toBeUndefined()
    // The parser's stand-in for a From it could not read.
    expect(replyPrefill({ senderAddress: "unknown@sender.invalid", replyTo: undefined, subject: "x" })).toBeUndefined()
  })
  it("keeps the subject within 998 bytes and on one line", () => {
    const long = replyPrefill({ senderAddress: "c@example.org", replyTo: undefined, subject: "€".repeat(400) })!.subject
    expect(utf8Bytes(long)).toBeLessThanOrEqual(998)
    expect(long.startsWith("Re: €")).toBe(true)
    expect(replyPrefill({ senderAddress: "c@example.org", replyTo: undefined, subject: "a\r\nb" })?.subject).toBe("Re: a b")
  })
})

describe("replyReferences", () => {
  it("is the original's references followed by its Message-ID", () => {
    expect(replyReferences({ messageId: "<2@x>", references: undefined })).toBe("<2@x>")
    expect(replyReferences({ messageId: "<3@x>", references: " <1@x>\r\n <2@x>" })).toBe("<1@x> <2@x> <3@x>")
  })
})

describe("deskSendRefusal", () => {
  const now = new Date("2026-11-27T12:00:00.000Z")
  const ago = (seconds: number) => new Date(now.getTime() - seconds * 1000)

  it("allows the 10th attempt of an account in an hour and refuses the 11th until the oldest counted leaves", () => {
    const nine = Array.from({ length: 9 }, (_, i) => ({ accountId: 1, at: ago(60 * i) }))
    expect(deskSendRefusal({ now, accountId: 1, recent: nine })).toBeUndefined()
    const ten = [{ accountId: 1, at: ago(0) }, ...nine]
    expect(deskSendRefusal({ now, accountId: 1, recent: ten })).toEqual({ scope: "account", limit: 10, retryAfter: 3600 - 480 })
    expect(deskSendRefusal({ now, accountId: 2, recent: ten })).toBeUndefined()
  })

  it("does not count attempts an hour old or older", () => {
    const old = Array.from({ length: 10 }, () => ({ accountId: 1, at: ago(3600) }))
    expect(deskSendRefusal({ now, accountId: 1, recent: old })).toBeUndefined()
  })

  it("refuses every account at 60 attempts an hour across the service", () => {
    const sixty = Array.from({ length: 60 }, (_, i) => ({ accountId: 10 + (i % 7), at: ago(i * 10) }))
    expect(deskSendRefusal({ now, accountId: 99, recent: sixty })).toEqual({ scope: "service", limit: 60, retryAfter: 3600 - 590 })
    expect(deskSendRefusal({ now, accountId: 99, recent: sixty.slice(0, 59) })).toBeUndefined()
  })

  it("never asks to wait less than a second", () => {
    const ten = Array.from({ length: 10 }, () => ({ accountId: 1, at: new Date(now.getTime() - 3_599_999) }))
    expect(deskSendRefusal({ now, accountId: 1, recent: ten })?.retryAfter).toBe(1)
  })
})
