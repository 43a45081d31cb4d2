/**
 * The worked message's columns as UTF-8 JSON (`jsonBytes`, mail/worked.ts): byte for byte what
 * `JSON.stringify` and a TextEncoder make, also for the long strings it writes straight into the
 * bytes (escapes of quotes, backslashes and control characters, 2-, 3- and 4-byte characters),
 * and for a string that is not well-formed (left to JSON.stringify).
 */
import { describe, expect, it } from "vitest"
import { jsonBytes } from "../src/mail/worked.ts"

const reference = (value: Record<string, unknown>) => new TextEncoder().encode(JSON.stringify(value))
const long = (piece: string) => piece.repeat(Math.ceil(70_000 / piece.length))

describe("jsonBytes", () => {
  it.each([
    ["plain ASCII", long("lorem ipsum dolor sit amet ")],
    ["quotes and backslashes", long(`say "hi" \\ and C:\\path `)],
    ["every control character", long(Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)).join("") + "x\u007f")],
    ["2-, 3- and 4-byte characters", long("Grüße, 日本語, emoji 😀🎉 and a line\u2028separator ")],
    ["a lone surrogate (not well-formed)", long("broken \ud800 here ")],
    ["short text", "short \"text\"\n"]
  ])("%s: the same bytes as JSON.stringify", (_name, text) => {
    const columns = { sender_name: null, subject: "Subject \"quoted\"", text_body: text, headers: { a: ["b", "c"] }, remote_image_count: 3, has_attachments: false, skipped: undefined }
    expect(Buffer.from(jsonBytes(columns)).equals(Buffer.from(reference(columns)))).toBe(true)
  })

  it("an empty object, and long strings side by side", () => {
    expect(new TextDecoder().decode(jsonBytes({}))).toBe("{}")
    const columns = { a: long("x\"y"), b: long("é\t"), c: long("😀") }
    expect(Buffer.from(jsonBytes(columns)).equals(Buffer.from(reference(columns)))).toBe(true)
    expect(JSON.parse(new TextDecoder().decode(jsonBytes(columns)))).toEqual(columns)
  })
})
