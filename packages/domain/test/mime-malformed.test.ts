import { describe, expect, it } from "@effect/vitest"
import { type ParseResult, parseMessage, UNKNOWN_SENDER_ADDRESS } from "../src/mail/parse.ts"

// Whatever arrives over SMTP reaches the parser. For every input here, parseMessage must
// resolve (never throw), quickly, without touching the caller's bytes, and give either a
// message with sane fields or a typed failure. On failure the pipeline marks the message
// `failed` and keeps its raw bytes readable, so nothing a sender writes can crash a worker.

// "Quickly" is a generous 10 s: what it catches (runaway backtracking or recursion) costs far more;
// a stopwatch closer than that fails on a busy machine, not on a slow parser.
const TIME_BOUND_MS = 10_000

const encoder = new TextEncoder()
const text = (value: string): Uint8Array => encoder.encode(value)
const crlf = (...lines: Array<string>): Uint8Array => text(lines.join("\r\n"))
const bytes = (...chunks: Array<string | Uint8Array | ReadonlyArray<number>>): Uint8Array =>
  Buffer.concat(chunks.map((chunk) => (typeof chunk === "string" ? Buffer.from(chunk, "latin1") : Buffer.from(chunk))))

/** Deterministic pseudo-random bytes (mulberry32), so a failure reproduces. */
const garbage = (length: number, seed: number): Uint8Array => {
  const out = new Uint8Array(length)
  let state = seed >>> 0
  for (let i = 0; i < length; i++) {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    out[i] = (t ^ (t >>> 14)) & 0xff
  }
  return out
}

const deeplyNested = (levels: number): Uint8Array => {
  let message = ""
  for (let level = 0; level < levels; level++) {
    message += `Content-Type: multipart/mixed; boundary="b${level}"\r\n\r\n--b${level}\r\n`
  }
  return text(`${message}Content-Type: text/plain\r\n\r\ndeep\r\n`)
}

const manyParts = (count: number): Uint8Array => {
  const parts = Array.from({ length: count }, (_, i) => `--p\r\nContent-Type: application/octet-stream\r\n\r\n${i}\r\n`)
  return text(`Content-Type: multipart/mixed; boundary=p\r\n\r\n${parts.join("")}--p--\r\n`)
}

const withAttachment = (...partHeaders: Array<string>): Uint8Array => crlf(
  "From: a@example.com",
  "Content-Type: multipart/mixed; boundary=m",
  "",
  "--m",
  ...partHeaders,
  "",
  "content",
  "--m--",
)

/** Corpus entry: the input, and optionally what must hold of the result beyond sanity. */
interface Case {
  readonly name: string
  readonly raw: () => Uint8Array
  readonly check?: (result: ParseResult) => void
}

const expectFailure = (reason: string) => (result: ParseResult) => {
  expect(result).toMatchObject({ ok: false, reason })
}

const expectMessage = (check: (message: Extract<ParseResult, { ok: true }>["message"]) => void) =>
  (result: ParseResult) => {
    if (!result.ok) throw new Error(`expected a message, got ${result.reason}: ${result.detail}`)
    check(result.message)
  }

const corpus: ReadonlyArray<Case> = [
  { name: "zero-byte input", raw: () => new Uint8Array(0), check: expectFailure("empty") },
  { name: "random binary garbage", raw: () => garbage(256 * 1024, 1) },
  { name: "random garbage after a valid header", raw: () => bytes("Subject: x\r\n\r\n", garbage(128 * 1024, 2)) },
  { name: "random garbage as headers", raw: () => bytes(garbage(4096, 3).map((b) => (b === 0x0a ? 0x41 : b)), "\r\n\r\nbody") },
  {
    name: "multipart nested 200 levels deep",
    raw: () => deeplyNested(200),
    check: expectFailure("nesting_too_deep"),
  },
  {
    name: "multipart nested within the limit (20 levels)",
    raw: () => deeplyNested(20),
    check: expectMessage((message) => expect(message.text).toBe("deep\n")),
  },
  { name: "ten thousand parts", raw: () => manyParts(10_000), check: expectFailure("too_many_parts") },
  {
    name: "a thousand parts is still accepted",
    raw: () => manyParts(1000),
    check: expectMessage((message) => expect(message.attachments).toHaveLength(1000)),
  },
  {
    name: "broken base64 body",
    raw: () => crlf("Content-Type: text/plain", "Content-Transfer-Encoding: base64", "", "SGVsbG8*!!@@", "V29y=bGQ", "A"),
  },
  {
    name: "broken base64 attachment",
    raw: () => withAttachment("Content-Type: application/pdf; name=a.pdf", "Content-Transfer-Encoding: base64"),
    check: expectMessage((message) => expect(message.attachments[0]?.filename).toBe("a.pdf")),
  },
  {
    name: "base64 with a padding run on every line",
    raw: () => text(`Content-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\n\r\n${"QQ==\r\n".repeat(60_000)}`),
    check: expectFailure("too_many_unencoded_lines"),
  },
  {
    name: "broken quoted-printable",
    raw: () => crlf("Content-Type: text/plain", "Content-Transfer-Encoding: quoted-printable", "", "=ZZ=4 =", "=\r", "tail=3"),
  },
  {
    name: "unknown body charset x-unknown",
    raw: () => bytes("Content-Type: text/plain; charset=x-unknown\r\n\r\nCaf", [0xe9], "\r\n"),
    check: expectMessage((message) => expect(message.text).toBe("Café\n")),
  },
  {
    name: "unknown encoded-word charset utf-99",
    raw: () => crlf("Subject: =?utf-99?Q?hello_world?=", "", "x"),
    check: expectMessage((message) => expect(message.subject).toBe("hello world")),
  },
  {
    name: "malformed encoded-words",
    raw: () => crlf("Subject: =?utf-8?B?not base64?= =?utf-8?Q? =?=?= =?utf-8?X?abc?= =?", "From: =?utf-8?B?@@?= <a@example.com>", "", "x"),
    check: expectMessage((message) => expect(message.sender.address).toBe("a@example.com")),
  },
  {
    name: "no headers at all (starts with a blank line)",
    raw: () => crlf("", "only a body"),
    check: expectMessage((message) => {
      expect(message.headers).toEqual({})
      expect(message.text).toBe("only a body\n")
    }),
  },
  {
    name: "body-only text without a header block",
    raw: () => text("Hello world\nthis is not a header\n"),
    check: expectMessage((message) => {
      expect(message.headers).toEqual({})
      expect(message.sender).toEqual({ name: null, address: UNKNOWN_SENDER_ADDRESS })
    }),
  },
  {
    name: "missing From",
    raw: () => crlf("To: box@burnbox.test", "Subject: hi", "", "x"),
    check: expectMessage((message) => expect(message.sender).toEqual({ name: null, address: UNKNOWN_SENDER_ADDRESS })),
  },
  {
    name: "header-only message without a blank line",
    raw: () => crlf("From: a@example.com", "Subject: just headers"),
    check: expectMessage((message) => {
      expect(message.subject).toBe("just headers")
      expect(message.text).toBeNull()
    }),
  },
  { name: "header-only message ending in a blank line", raw: () => crlf("Subject: s", "", "") },
  {
    name: "NUL bytes in headers",
    raw: () => bytes("From: Ev\u0000il <a@example.com>\r\nSubject: a\u0000b\u0007c\r\nX-\u0000Bad: v\r\n\r\nx"),
    check: expectMessage((message) => {
      expect(message.subject).toBe("abc")
      expect(message.sender).toEqual({ name: "Evil", address: "a@example.com" })
    }),
  },
  {
    name: "NUL bytes in the body",
    raw: () => bytes("Subject: s\r\n\r\nbe\u0000fore\u0000after\r\n"),
    check: expectMessage((message) => expect(message.text).toBe("beforeafter\n")),
  },
  {
    name: "bare LF line endings",
    raw: () => text("From: a@example.com\nSubject: lf\n\nline one\nline two\n"),
    check: expectMessage((message) => {
      expect(message.subject).toBe("lf")
      expect(message.text).toBe("line one\nline two\n")
    }),
  },
  { name: "bare CR line endings", raw: () => text("From: a@example.com\rSubject: cr\r\rbody\r") },
  {
    name: "a 1 MB single header line",
    raw: () => text(`X-Long: ${"a".repeat(1_000_000)}\r\nSubject: after\r\n\r\nbody`),
  },
  {
    name: "headers over the header budget",
    raw: () => text(`X-Long: ${"a".repeat(2_000_000)}\r\n\r\nbody`),
    check: expectFailure("headers_too_large"),
  },
  {
    name: "10,000 headers",
    raw: () => text(`${Array.from({ length: 10_000 }, (_, i) => `X-H${i}: v${i}\r\n`).join("")}\r\nbody`),
    check: expectMessage((message) => expect(message.headers["x-h9999"]).toBe("v9999")),
  },
  {
    name: "8-bit raw UTF-8 in headers",
    raw: () => crlf("From: Jürgen <j@example.com>", "Subject: Grüße ✓", "", "x"),
    check: expectMessage((message) => {
      expect(message.subject).toBe("Grüße ✓")
      expect(message.sender.name).toBe("Jürgen")
    }),
  },
  {
    name: "8-bit raw Latin-1 in headers",
    raw: () => bytes("Subject: Caf", [0xe9], " cr", [0xe8], "me\r\nFrom: ", [0xc9], "lo <e@example.com>\r\n\r\nx"),
    check: expectMessage((message) => expect(message.subject).toBe("Caf\ufffd cr\ufffdme")),
  },
  {
    name: "unterminated boundary",
    raw: () => crlf("Content-Type: multipart/mixed; boundary=u", "", "--u", "Content-Type: text/plain", "", "never closed"),
    check: expectMessage((message) => expect(message.text).toBe("never closed\n")),
  },
  {
    name: "boundary declared but never used",
    raw: () => crlf("Content-Type: multipart/mixed; boundary=unused", "", "just text", "--other"),
  },
  {
    name: "empty boundary parameter",
    raw: () => crlf("Content-Type: multipart/mixed; boundary=\"\"", "", "--", "----", "text"),
  },
  { name: "only a close-delimiter", raw: () => crlf("Content-Type: multipart/mixed; boundary=b", "", "--b--") },
  {
    name: "nested message/rfc822 three deep",
    raw: () => crlf(
      "Content-Type: message/rfc822", "",
      "Content-Type: message/rfc822", "",
      "Content-Type: message/rfc822", "",
      "Subject: innermost", "", "hello",
    ),
    check: expectMessage((message) => expect(message.attachments.map((a) => a.mimeType)).toEqual(["message/rfc822"])),
  },
  {
    name: "base64 message/rfc822 hiding a million empty lines",
    raw: () => crlf(
      "Content-Type: message/rfc822",
      "Content-Transfer-Encoding: base64",
      "",
      ...(Buffer.from(`Subject: inner\r\n\r\n${"\n".repeat(1_000_000)}`).toString("base64").match(/.{1,76}/g) ?? []),
    ),
    check: expectMessage((message) => expect(message.attachments).toHaveLength(1)),
  },
  {
    name: "malformed Content-Type values",
    raw: () => crlf(
      "Content-Type: multipart/mixed; boundary=m",
      "",
      "--m", "Content-Type: text/", "", "a",
      "--m", "Content-Type: ;;;", "", "b",
      "--m", "Content-Type: multipart/mixed; boundary", "", "c",
      "--m", "Content-Type: (((", "", "d",
      "--m", "Content-Type: image/png; name=\"unterminated", "", "e",
      "--m--",
    ),
  },
  {
    name: "obfuscated multipart Content-Type over a base64 encoding",
    raw: () => text(
      "Content-Type: multi(x)part/mixed; boundary=b\r\nContent-Transfer-Encoding: base64\r\n\r\n--b\r\n\r\n" +
        "xx\n".repeat(200_000),
    ),
    check: expectFailure("too_many_unencoded_lines"),
  },
  {
    name: "duplicated Content-Type headers",
    raw: () => crlf("Content-Type: text/plain", "Content-Type: multipart/mixed; boundary=x", "", "--x", "", "body"),
    check: expectMessage((message) => expect(message.text).toBe("--x\n\nbody\n")),
  },
  {
    name: "unknown Content-Transfer-Encoding",
    raw: () => crlf("Content-Type: text/plain", "Content-Transfer-Encoding: x-uuencode", "", "begin 644 a", "end"),
  },
  {
    name: "attachments without names",
    raw: () => crlf(
      "Content-Type: multipart/mixed; boundary=m", "",
      "--m", "Content-Type: application/pdf", "Content-Disposition: attachment", "", "x",
      "--m", "Content-Type: no-such/thing", "Content-Disposition: form-data", "", "y",
      "--m", "Content-Type: image/png", "Content-Disposition: attachment; filename=\"\"", "", "z",
      "--m--",
    ),
    check: expectMessage((message) => {
      expect(message.attachments.map(({ filename, mimeType, disposition }) => ({ filename, mimeType, disposition }))).toEqual([
        { filename: "attachment-1.pdf", mimeType: "application/pdf", disposition: "attachment" },
        { filename: "attachment-2.bin", mimeType: "no-such/thing", disposition: "attachment" },
        { filename: "attachment-3.png", mimeType: "image/png", disposition: "attachment" },
      ])
    }),
  },
  {
    name: "path-traversal filenames",
    raw: () => crlf(
      "Content-Type: multipart/mixed; boundary=m", "",
      "--m", "Content-Type: text/plain", "Content-Disposition: attachment; filename=\"../../etc/passwd\"", "", "x",
      "--m", "Content-Type: application/octet-stream", "Content-Disposition: attachment; filename=C:\\Windows\\evil.exe", "", "x",
      "--m", "Content-Type: text/plain", "Content-Disposition: attachment; filename=\"..\"", "", "x",
      "--m", "Content-Type: text/plain", "Content-Disposition: attachment; filename=\"/abs/.hidden\"", "", "x",
      // In a quoted string a backslash escapes the next character (RFC 2045), so no path is left.
      "--m", "Content-Type: text/plain", "Content-Disposition: attachment; filename=\"C:\\tmp\\a.txt\"", "", "x",
      "--m--",
    ),
    check: expectMessage((message) => {
      expect(message.attachments.map(({ filename, dangerous }) => ({ filename, dangerous }))).toEqual([
        { filename: "passwd", dangerous: false },
        { filename: "evil.exe", dangerous: true },
        { filename: "attachment-3.txt", dangerous: false },
        { filename: "hidden", dangerous: false },
        { filename: "C_tmpa.txt", dangerous: false },
      ])
    }),
  },
  {
    name: "filename disguised with a bidi override and a NUL",
    raw: () => withAttachment(
      "Content-Type: application/octet-stream",
      "Content-Disposition: attachment; filename*=utf-8''invoice%E2%80%AEfdp.exe",
    ),
    check: expectMessage((message) => expect(message.attachments[0]).toMatchObject({ filename: "invoicefdp.exe", dangerous: true })),
  },
  {
    name: "a .pdf that is really a Windows program",
    raw: () => crlf(
      "Content-Type: multipart/mixed; boundary=m", "",
      "--m", "Content-Type: application/pdf; name=report.pdf", "Content-Transfer-Encoding: base64", "", "TVqQAAMAAAAEAAAA",
      "--m--",
    ),
    check: expectMessage((message) => expect(message.attachments[0]).toMatchObject({ filename: "report.pdf", dangerous: true })),
  },
  {
    name: "extremely long line without a newline",
    raw: () => text(`Subject: long\r\n\r\n${"x".repeat(5_000_000)}`),
    check: expectMessage((message) => expect(message.text).toHaveLength(5_000_001)),
  },
  {
    name: "just under every line budget (the slowest input the limits accept)",
    raw: () => text(
      "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\n" + "text line here\n".repeat(49_000) +
        "--b\r\nContent-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\n\r\n" + "QUJD\n".repeat(250_000) + "--b--\r\n",
    ),
    check: expectMessage((message) => expect(message.attachments).toHaveLength(1)),
  },
  {
    name: "a million empty lines",
    raw: () => text(`Subject: s\r\n\r\n${"\n".repeat(1_000_000)}`),
    check: expectFailure("too_many_unencoded_lines"),
  },
  {
    name: "a header named __proto__",
    raw: () => crlf("__proto__: polluted", "constructor: also", "Subject: s", "", "x"),
    check: expectMessage((message) => {
      expect(Object.getPrototypeOf(message.headers)).toBe(Object.prototype)
      expect(Object.hasOwn(message.headers, "__proto__")).toBe(true)
      expect(message.headers["constructor"]).toBe("also")
    }),
  },
  {
    name: "lines that are not headers",
    raw: () => crlf(": no name", "no colon at all", "Bad Name: spaces", "Subject: kept", "", "x"),
    check: expectMessage((message) => expect(message.headers).toEqual({ subject: "kept" })),
  },
  {
    name: "first header line folded (leading space)",
    raw: () => crlf(" Content-Type: multipart/mixed; boundary=f", "Content-Transfer-Encoding: base64", "", "--f", "", "part", "--f--"),
  },
  {
    name: "multipart/digest with default message/rfc822 parts",
    raw: () => crlf("Content-Type: multipart/digest; boundary=d", "", "--d", "", "Subject: one", "", "1", "--d--"),
  },
  {
    name: "huge To list and an out-of-range Date",
    raw: () => text(`To: ${"a@example.com, ".repeat(20_000)}\r\nDate: Fri, 31 Dec 275761 00:00:00 GMT\r\n\r\nx`),
    check: expectMessage((message) => {
      expect(message.to).toHaveLength(20_000)
      expect(message.date).toBeNull()
    }),
  },
  {
    name: "boundary lines with trailing blanks and stray terminators",
    raw: () => crlf("Content-Type: multipart/alternative; boundary=t", "", "--t \t", "", "one", "--t--", "--t--", "--t", "", "late"),
  },
]

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/
// oxlint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/
const FAILURE_REASONS = [
  "empty", "too_large", "too_many_lines", "too_many_unencoded_lines", "too_many_parts",
  "nesting_too_deep", "headers_too_large", "unparsable",
]

/** What every result must satisfy, whatever the input. */
const expectSane = (result: ParseResult): void => {
  if (!result.ok) {
    expect(FAILURE_REASONS).toContain(result.reason)
    expect(typeof result.detail).toBe("string")
    return
  }
  const message = result.message
  for (const [key, value] of Object.entries(message.headers)) {
    expect(key).toMatch(/^[\x21-\x39\x3b-\x7e]+$/)
    expect(key).toBe(key.toLowerCase())
    for (const one of typeof value === "string" ? [value] : value) {
      expect(typeof one).toBe("string")
      expect(one).not.toMatch(CONTROL)
    }
  }
  expect(message.sender.address).toMatch(EMAIL)
  if (message.sender.name !== null) {
    expect(message.sender.name.length).toBeGreaterThan(0)
    expect(message.sender.name).not.toMatch(CONTROL)
  }
  expect(message.subject).not.toMatch(CONTROL)
  for (const address of message.to) expect(address).not.toMatch(CONTROL)
  if (message.date !== null) expect(new Date(message.date).toISOString()).toBe(message.date)
  expect(message.text ?? "").not.toContain("\u0000")
  expect(message.html ?? "").not.toContain("\u0000")
  for (const attachment of message.attachments) {
    expect(attachment.filename.length).toBeGreaterThan(0)
    expect(Array.from(attachment.filename).length).toBeLessThanOrEqual(255)
    expect(attachment.filename).not.toMatch(/[/\\]|^\.|[.\s]$/)
    expect(attachment.filename).not.toMatch(CONTROL)
    expect(attachment.mimeType).toMatch(/^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/)
    expect(attachment.content).toBeInstanceOf(Uint8Array)
    expect([null, "attachment", "inline"]).toContain(attachment.disposition)
    if (attachment.previewable) expect(attachment.dangerous).toBe(false)
  }
}

describe("parseMessage: malformed and hostile input", () => {
  it("has a corpus of at least 30 inputs", () => {
    expect(corpus.length).toBeGreaterThanOrEqual(30)
  })

  for (const entry of corpus) {
    it(`${entry.name}: resolves quickly, leaves the bytes alone, sane or a typed failure`, async () => {
      const raw = entry.raw()
      const before = Buffer.from(raw)
      const started = performance.now()
      const result = await parseMessage(raw)
      const elapsed = performance.now() - started
      expect(elapsed).toBeLessThan(TIME_BOUND_MS)
      expect(Buffer.from(raw).equals(before)).toBe(true)
      expectSane(result)
      entry.check?.(result)
    })
  }

  it("refuses input over the size limit before parsing it", async () => {
    const result = await parseMessage(text("Subject: s\r\n\r\n0123456789"), { maxBytes: 10 })
    expect(result).toMatchObject({ ok: false, reason: "too_large" })
  })

  it("does not read past a view into a larger buffer, nor change it", async () => {
    const backing = text("GARBAGE-BEFORE\r\nSubject: inside\r\n\r\nbody\r\nGARBAGE-AFTER")
    const copy = backing.slice()
    const view = backing.subarray(16, backing.length - 15)
    const result = await parseMessage(view)
    expect(result).toMatchObject({ ok: true, message: { subject: "inside", text: "body\n" } })
    expect(backing).toEqual(copy)
  })
})
