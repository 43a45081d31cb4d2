import { analyzeMessage, parseMessage } from "@burnbox/domain/mail/index"
import { describe, expect, it } from "vitest"
import { fakeMail, fakeMailRequest } from "../src/FakeMail.ts"

/** Parses `raw` as the pipeline does and answers the message with what burnbox extracts from it. */
const received = async (raw: Uint8Array) => {
  const parsed = await parseMessage(raw)
  if (!parsed.ok) throw new Error(`unparsable: ${parsed.reason} ${parsed.detail}`)
  return { message: parsed.message, analysis: analyzeMessage(parsed.message) }
}

const to = "4815162342@burnbox.test"
const link = "https://shop.example.com/verify?token=Zm9vYmFy&email=4815162342%40burnbox.test"

describe("fakeMail", () => {
  it("a verification mail's code and link are what burnbox extracts, with a text part and an HTML alternative", async () => {
    const { message, analysis } = await received(fakeMail({ to, code: "482913", link, html: true }))
    expect(message.to).toEqual([to])
    expect(message.subject).toBe("482913 is your verification code")
    expect(message.sender.address).toBe("no-reply@shop.example.com")
    expect(message.text).toContain("Your verification code is 482913.")
    expect(message.html).toContain("<strong>482913</strong>")
    expect(analysis.otpCodes).toEqual(["482913"])
    expect(analysis.verificationLinks).toEqual([link])
  })

  it("an HTML-only mail (text: null) still yields its code and link from the visible text", async () => {
    const { message, analysis } = await received(fakeMail({ to, code: "730155", link, text: null, html: true }))
    expect(message.text).toBeNull()
    expect(analysis.otpCodes).toEqual(["730155"])
    expect(analysis.verificationLinks).toEqual([link])
  })

  it("a plain mail without code or link has nothing to extract", async () => {
    const { message, analysis } = await received(fakeMail({ to, subject: "Your receipt" }))
    expect(message.subject).toBe("Your receipt")
    expect(message.html).toBeNull()
    expect(analysis.otpCodes).toEqual([])
    expect(analysis.verificationLinks).toEqual([])
  })

  it("attachments arrive with their names, types and bytes", async () => {
    const bytes = Uint8Array.from([0x25, 0x50, 0x44, 0x46, 0x00, 0xff])
    const { message } = await received(fakeMail({
      to,
      attachments: [{ filename: "invoice.pdf", contentType: "application/pdf", content: bytes }, { filename: "notes.txt", contentType: "text/plain", content: "héllo" }]
    }))
    expect(message.attachments.map((a) => [a.filename, a.mimeType])).toEqual([["invoice.pdf", "application/pdf"], ["notes.txt", "text/plain"]])
    expect(Buffer.from(message.attachments[0]!.content)).toEqual(Buffer.from(bytes))
    expect(Buffer.from(message.attachments[1]!.content).toString("utf8")).toBe("héllo")
  })

  it("the same options give the same bytes; another date or recipient gives others", () => {
    const options = { to, code: "482913", html: true }
    expect(Buffer.from(fakeMail(options))).toEqual(Buffer.from(fakeMail(options)))
    expect(Buffer.from(fakeMail({ ...options, date: new Date("2025-06-01T12:00:00Z") }))).not.toEqual(Buffer.from(fakeMail(options)))
    expect(Buffer.from(fakeMail({ ...options, to: "other@burnbox.test" }))).not.toEqual(Buffer.from(fakeMail(options)))
  })

  it("fakeMailRequest is the test-mail body of the same mail; one the API would refuse throws", () => {
    expect(fakeMailRequest({ code: "482913" })).toMatchObject({ from: "Example Shop <no-reply@shop.example.com>", subject: "482913 is your verification code", html: null })
    expect(() => fakeMailRequest({ text: null })).toThrow(/text_or_html_required/)
    expect(() => fakeMailRequest({ from: "not a mailbox" })).toThrow(/invalid_mailbox/)
  })
})
