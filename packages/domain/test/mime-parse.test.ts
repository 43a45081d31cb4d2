import { describe, expect, it } from "@effect/vitest"
import { type ParsedMessage, parseMessage, UNKNOWN_SENDER_ADDRESS } from "../src/mail/parse.ts"

const crlf = (...lines: Array<string>): Uint8Array => new TextEncoder().encode(lines.join("\r\n"))
const base64 = (text: string | Uint8Array): string => Buffer.from(text).toString("base64")

/** Parses and insists on success, so each test reads as the fields it expects. */
const parsed = async (raw: Uint8Array): Promise<ParsedMessage> => {
  const result = await parseMessage(raw)
  if (!result.ok) throw new Error(`expected a parsed message, got ${result.reason}: ${result.detail}`)
  return result.message
}

const subjectOf = async (subject: string) => (await parsed(crlf(`Subject: ${subject}`, "", "x"))).subject
const senderOf = async (...headers: Array<string>) => (await parsed(crlf(...headers, "", "x"))).sender

describe("parseMessage: well-formed mail", () => {
  it("reads a plain text message field by field", async () => {
    const message = await parsed(crlf(
      "From: Alice Example <alice@example.com>",
      "To: box@burnbox.test",
      "Subject: Your code is 123456",
      "Message-ID: <m1@example.com>",
      "Date: Tue, 2 Jan 2024 10:20:30 +0100",
      "Content-Type: text/plain; charset=utf-8",
      "",
      "Hello,",
      "your code is 123456.",
      "",
    ))
    expect(message).toEqual({
      headers: {
        from: "Alice Example <alice@example.com>",
        to: "box@burnbox.test",
        subject: "Your code is 123456",
        "message-id": "<m1@example.com>",
        date: "Tue, 2 Jan 2024 10:20:30 +0100",
        "content-type": "text/plain; charset=utf-8",
      },
      sender: { name: "Alice Example", address: "alice@example.com" },
      to: ["box@burnbox.test"],
      subject: "Your code is 123456",
      messageId: "<m1@example.com>",
      date: "2024-01-02T09:20:30.000Z",
      text: "Hello,\nyour code is 123456.\n",
      html: null,
      attachments: [],
    })
  })

  it("takes both bodies of a multipart/alternative", async () => {
    const message = await parsed(crlf(
      "From: news@example.com",
      "Content-Type: multipart/alternative; boundary=\"alt-1\"",
      "",
      "preamble is ignored",
      "--alt-1",
      "Content-Type: text/plain; charset=us-ascii",
      "",
      "Plain version",
      "--alt-1",
      "Content-Type: text/html; charset=utf-8",
      "",
      "<p>HTML version</p>",
      "--alt-1--",
      "epilogue is ignored",
    ))
    // Un-encoded parts keep postal-mime's line ending on their last line.
    expect(message.text).toBe("Plain version\n")
    expect(message.html).toBe("<p>HTML version</p>\n")
    expect(message.attachments).toEqual([])
    expect(message.sender).toEqual({ name: null, address: "news@example.com" })
  })

  it("decodes quoted-printable (soft breaks, UTF-8 escapes) and base64 bodies", async () => {
    const message = await parsed(crlf(
      "From: a@example.com",
      "Content-Type: multipart/alternative; boundary=b",
      "",
      "--b",
      "Content-Type: text/plain; charset=utf-8",
      "Content-Transfer-Encoding: quoted-printable",
      "",
      "Caf=C3=A9 soft=",
      "break =3D done",
      "--b",
      "Content-Type: text/html; charset=utf-8",
      "Content-Transfer-Encoding: base64",
      "",
      base64("<p>Grüße</p>"),
      "--b--",
    ))
    expect(message.text).toBe("Café softbreak = done\n")
    expect(message.html).toBe("<p>Grüße</p>")
  })

  it("decodes encoded-word subjects in UTF-8 (B and Q) and ISO-8859-1", async () => {
    expect(await subjectOf("=?UTF-8?B?w4lsb2TDrWUg4pyT?=")).toBe("Élodíe ✓")
    expect(await subjectOf("=?utf-8?q?Gr=C3=BC=C3=9Fe_aus_K=C3=B6ln?=")).toBe("Grüße aus Köln")
    expect(await subjectOf("=?ISO-8859-1?Q?Caf=E9_cr=E8me?=")).toBe("Café crème")
    expect(await subjectOf("Re: =?iso-8859-1?q?=C0_bient=F4t?= (2)")).toBe("Re: À bientôt (2)")
  })

  it("keys headers by lowercase name and turns repeated ones into arrays in order", async () => {
    const message = await parsed(crlf(
      "Received: from a by b; Mon, 1 Jan 2024 00:00:00 +0000",
      "X-Mixed-CASE: value\twith tab",
      "RECEIVED: from c by d; Mon, 1 Jan 2024 00:00:01 +0000",
      "received: from e by f; Mon, 1 Jan 2024 00:00:02 +0000",
      "Subject: folded",
      "  onto two lines",
      "X-Encoded: =?utf-8?q?caf=C3=A9?=",
      "",
      "body",
    ))
    expect(message.headers).toEqual({
      received: [
        "from a by b; Mon, 1 Jan 2024 00:00:00 +0000",
        "from c by d; Mon, 1 Jan 2024 00:00:01 +0000",
        "from e by f; Mon, 1 Jan 2024 00:00:02 +0000",
      ],
      "x-mixed-case": "value with tab",
      subject: "folded  onto two lines",
      "x-encoded": "café",
    })
  })

  it("lists attachments with decoded bytes, safe names and their flags", async () => {
    const pdf = new Uint8Array([0x25, 0x50, 0x44, 0x46, 0x2d, 0x31, 0x2e, 0x37])
    const message = await parsed(crlf(
      "From: Billing <billing@example.com>",
      "Subject: Invoice",
      "Content-Type: multipart/mixed; boundary=mix",
      "",
      "--mix",
      "Content-Type: text/plain",
      "",
      "See attached.",
      "--mix",
      "Content-Type: application/pdf; name=\"=?UTF-8?Q?r=C3=A9sum=C3=A9.pdf?=\"",
      "Content-Disposition: attachment; filename=\"=?UTF-8?Q?r=C3=A9sum=C3=A9.pdf?=\"",
      "Content-Transfer-Encoding: base64",
      "",
      base64(pdf),
      "--mix",
      "Content-Type: application/octet-stream",
      "Content-Disposition: attachment; filename=\"invoice.pdf.exe\"",
      "Content-Transfer-Encoding: base64",
      "",
      base64("MZ\x90\x00"),
      "--mix",
      "Content-Type: application/pdf",
      "Content-Disposition: attachment",
      "Content-Transfer-Encoding: base64",
      "",
      base64(pdf),
      "--mix--",
    ))
    expect(message.text).toBe("See attached.\n")
    expect(message.attachments).toEqual([
      {
        filename: "résumé.pdf", mimeType: "application/pdf", content: pdf, contentId: null,
        disposition: "attachment", dangerous: false, previewable: false,
      },
      {
        filename: "invoice.pdf.exe", mimeType: "application/octet-stream",
        content: new Uint8Array([0x4d, 0x5a, 0xc2, 0x90, 0x00]), contentId: null,
        disposition: "attachment", dangerous: true, previewable: false,
      },
      {
        filename: "attachment-3.pdf", mimeType: "application/pdf", content: pdf, contentId: null,
        disposition: "attachment", dangerous: false, previewable: false,
      },
    ])
  })

  it("keeps inline images of a multipart/related with their Content-ID, brackets removed", async () => {
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
    const message = await parsed(crlf(
      "From: shop@example.com",
      "Content-Type: multipart/related; boundary=rel",
      "",
      "--rel",
      "Content-Type: text/html; charset=utf-8",
      "",
      "<p>Logo: <img src=\"cid:logo@shop\"></p>",
      "--rel",
      "Content-Type: image/png; name=logo.png",
      "Content-Transfer-Encoding: base64",
      "Content-ID: <logo@shop>",
      "Content-Disposition: inline; filename=logo.png",
      "",
      base64(png),
      "--rel",
      "Content-Type: image/svg+xml",
      "Content-ID: <vector@shop>",
      "Content-Disposition: inline",
      "",
      "<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
      "--rel--",
    ))
    expect(message.html).toBe("<p>Logo: <img src=\"cid:logo@shop\"></p>\n")
    expect(message.attachments).toEqual([
      {
        filename: "logo.png", mimeType: "image/png", content: png, contentId: "logo@shop",
        disposition: "inline", dangerous: false, previewable: true,
      },
      {
        filename: "attachment-2.svg", mimeType: "image/svg+xml",
        content: new TextEncoder().encode("<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n"),
        contentId: "vector@shop", disposition: "inline", dangerous: true, previewable: false,
      },
    ])
  })

  it("keeps a forwarded message/rfc822 part as an .eml attachment", async () => {
    const message = await parsed(crlf(
      "From: a@example.com",
      "Content-Type: multipart/mixed; boundary=m",
      "",
      "--m",
      "Content-Type: text/plain",
      "",
      "Forwarding:",
      "--m",
      "Content-Type: message/rfc822",
      "",
      "From: b@example.com",
      "Subject: inner",
      "",
      "inner body",
      "--m--",
    ))
    expect(message.text).toBe("Forwarding:\n")
    expect(message.attachments.map(({ filename, mimeType }) => ({ filename, mimeType }))).toEqual([
      { filename: "attachment-1.eml", mimeType: "message/rfc822" },
    ])
  })

  it("flattens To groups and reads display names", async () => {
    const message = await parsed(crlf(
      "From: \"Doe, Jane\" <jane@example.com>",
      "To: Alias <box@burnbox.test>, team: a@x.test, b@x.test;",
      "",
      "x",
    ))
    expect(message.sender).toEqual({ name: "Doe, Jane", address: "jane@example.com" })
    expect(message.to).toEqual(["box@burnbox.test", "a@x.test", "b@x.test"])
  })

  it("falls back from From to Sender to Return-Path, then to the placeholder", async () => {
    expect(await senderOf("From: Broken <not an address>", "Sender: Relay <relay@example.net>"))
      .toEqual({ name: "Relay", address: "relay@example.net" })
    expect(await senderOf("Return-Path: <bounce@example.org>")).toEqual({ name: null, address: "bounce@example.org" })
    expect(await senderOf("From: Mallory <mallory>")).toEqual({ name: "Mallory", address: UNKNOWN_SENDER_ADDRESS })
    expect(await senderOf("From: just some words")).toEqual({ name: "just some words", address: UNKNOWN_SENDER_ADDRESS })
    expect(await senderOf("Subject: no sender at all")).toEqual({ name: null, address: UNKNOWN_SENDER_ADDRESS })
  })

  it("gives null for a missing or unparsable Date and Message-ID, and an empty subject", async () => {
    const message = await parsed(crlf("Date: the day after tomorrow", "", "x"))
    expect(message.date).toBeNull()
    expect(message.messageId).toBeNull()
    expect(message.subject).toBe("")
  })

  it("does not change the bytes it was given", async () => {
    const raw = crlf("From: a@example.com", "Content-Transfer-Encoding: base64", "", base64("hello"))
    const copy = raw.slice()
    await parsed(raw)
    expect(raw).toEqual(copy)
  })
})
