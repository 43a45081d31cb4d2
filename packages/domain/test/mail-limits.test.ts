/**
 * Hostile HTML cannot make the work grow past linear (issue #15, items 3 and 4): HTML is checked
 * against limits before anything walks it with a parser, and HTML past them is processed, not
 * failed: rendered as the text part (or as text read without a parser), its codes, links and
 * search words taken from that text. No test here measures time: the check must answer at
 * all, on input that took minutes before.
 */
import { describe, expect, it } from "@effect/vitest"
import {
  analyzeMessage,
  checkHtmlLimits,
  htmlTextWithoutParser,
  HtmlMaxAttributes,
  HtmlMaxDepth,
  HtmlMaxElementAttributes,
  HtmlMaxElements,
  HtmlMaxEndTags,
  HtmlMaxStyleChars,
  HtmlMaxTextPieces,
  messageText,
  RequestTimeHtmlMaxChars,
  sanitizeEmailHtml,
  SearchTextMaxChars,
  smallCheckedHtml,
  storedColumns,
  textAsHtml
} from "../src/mail/index.ts"
import type { ParsedMessage } from "../src/mail/parse.ts"
import { payloadTextBody } from "../src/webhooks/textBody.ts"
import { checked } from "./checked-html.ts"

const verdict = (html: string) => {
  const result = checkHtmlLimits(html)
  return result.ok ? "within" : result.limit
}

const message = (bodies: { readonly text?: string; readonly html?: string }): ParsedMessage => ({
  headers: {},
  sender: { name: null, address: "sender@example.com" },
  to: ["reader@burnbox.test"],
  subject: "s",
  messageId: null,
  date: null,
  text: bodies.text ?? null,
  html: bodies.html ?? null,
  attachments: [{ filename: "report.pdf", mimeType: "application/pdf", content: new Uint8Array(1), contentId: null, disposition: "attachment", dangerous: false, previewable: false }]
})

/** An element with `n` attributes of distinct names. */
const withAttributes = (n: number) => `<div ${Array.from({ length: n }, (_, i) => `data-a${i}="${i}"`).join(" ")}>x</div>`

/** The 300,000 nested `<b>` of the issue: 61 s in the sanitizer before #15. */
const nestedBold = `<html><body>${"<b>".repeat(300_000)}deep 123456</body></html>`

describe("checkHtmlLimits: answers on any input, in one pass", () => {
  it("1,000,000 unclosed tags are past the depth limit", () => {
    expect(checkHtmlLimits("<i>".repeat(1_000_000))).toMatchObject({ ok: false, limit: "depth", detail: `nested deeper than ${HtmlMaxDepth} elements` })
  })

  it("15 MB inputs: text within the limits; tags, end tags, stray `<`, character references and attributes past them", () => {
    const mb15 = 15 * 1024 * 1024
    const fill = (unit: string) => unit.repeat(Math.floor(mb15 / unit.length))
    expect(verdict(fill("word 1234 "))).toBe("within")
    expect(verdict(fill("<span>1234</span>"))).toBe("elements")
    expect(verdict(fill("</x>"))).toBe("end_tags")
    expect(verdict(fill("< "))).toBe("text_pieces")
    expect(verdict(fill("&amp;"))).toBe("text_pieces")
    expect(verdict(`<div ${fill("a ")}>`)).toBe("element_attributes")
    expect(verdict(fill("<br a b c>"))).toBe("attributes")
  })
})

describe("checkHtmlLimits: each limit, just under and just over", () => {
  it(`nesting: ${HtmlMaxDepth} open elements, counted as the sanitizer's parser holds them`, () => {
    expect(verdict("<b>".repeat(HtmlMaxDepth))).toBe("within")
    expect(verdict("<b>".repeat(HtmlMaxDepth + 1))).toBe("depth")
    // Void elements hold nothing open; closed and implicitly closed elements no longer count.
    expect(verdict(`${"<b>".repeat(HtmlMaxDepth)}<br><img src="x.png"><hr>`)).toBe("within")
    expect(verdict(`${"<b>".repeat(HtmlMaxDepth)}</b><i>`)).toBe("within")
    expect(verdict("<p>".repeat(HtmlMaxDepth * 4))).toBe("within")
    expect(verdict(`<ul>${"<li>".repeat(HtmlMaxDepth * 4)}`)).toBe("within")
    // `<b/>` is no void element in HTML: each one stays open.
    expect(verdict("<b/>".repeat(HtmlMaxDepth + 1))).toBe("depth")
    // An end tag of an element that is not open closes nothing.
    expect(verdict("<b></x>".repeat(HtmlMaxDepth + 1))).toBe("depth")
    // Inside svg, `/>` does close.
    expect(verdict(`<svg>${"<path/>".repeat(HtmlMaxDepth * 4)}</svg>`)).toBe("within")
    // Tags inside comments and style sheets are text.
    expect(verdict(`<!--${"<b>".repeat(HtmlMaxDepth * 4)}--><style>${"<b>".repeat(HtmlMaxDepth * 4)}</style>`)).toBe("within")
  })

  it(`elements: ${HtmlMaxElements} start tags`, () => {
    expect(verdict("<br>".repeat(HtmlMaxElements))).toBe("within")
    expect(verdict("<br>".repeat(HtmlMaxElements + 1))).toBe("elements")
    // A second <form> is ignored by the parser, but read all the same.
    expect(verdict("<form>".repeat(HtmlMaxElements + 1))).toBe("elements")
  })

  it(`end tags: ${HtmlMaxEndTags}, matched or not`, () => {
    expect(verdict("</x>".repeat(HtmlMaxEndTags))).toBe("within")
    expect(verdict("</x>".repeat(HtmlMaxEndTags + 1))).toBe("end_tags")
  })

  it(`text pieces: ${HtmlMaxTextPieces} runs, character references and stray \`<\``, () => {
    expect(verdict("&amp;".repeat(HtmlMaxTextPieces))).toBe("within")
    expect(verdict("&amp;".repeat(HtmlMaxTextPieces + 1))).toBe("text_pieces")
    // A `<` that starts no tag ends a piece of text.
    expect(verdict("x < ".repeat(HtmlMaxTextPieces / 2))).toBe("within")
    expect(verdict("x < ".repeat(HtmlMaxTextPieces + 1))).toBe("text_pieces")
  })

  it(`attributes: ${HtmlMaxElementAttributes} on one element, repeated names included`, () => {
    expect(verdict(withAttributes(HtmlMaxElementAttributes))).toBe("within")
    expect(verdict(withAttributes(HtmlMaxElementAttributes + 1))).toBe("element_attributes")
    expect(verdict(`<div ${"a ".repeat(HtmlMaxElementAttributes + 1)}>`)).toBe("element_attributes")
  })

  it(`attributes: ${HtmlMaxAttributes} in all`, () => {
    const perElement = HtmlMaxAttributes / HtmlMaxElements
    const element = `<br ${"a ".repeat(perElement)}>`
    expect(verdict(element.repeat(HtmlMaxElements))).toBe("within")
    expect(verdict(element.repeat(HtmlMaxElements - 1) + `<br ${"a ".repeat(perElement + 1)}>`)).toBe("attributes")
  })

  it(`style attributes: ${HtmlMaxStyleChars} characters in all`, () => {
    const half = `<p style="${"c".repeat(HtmlMaxStyleChars / 2)}">x</p>`
    expect(verdict(half + half)).toBe("within")
    expect(verdict(`${half + half}<p style="c">x</p>`)).toBe("style_chars")
    // Other attributes may be long: inline images are.
    expect(verdict(`<img src="data:image/png;base64,${"A".repeat(HtmlMaxStyleChars * 2)}">`)).toBe("within")
  })
})

describe("htmlTextWithoutParser: the text of HTML past the limits", () => {
  it("drops tags, comments, scripts and styles, breaks lines at blocks and decodes a few entities", () => {
    const html = `<html><head><title>T</title><style>p { color: red }</style></head><body>` +
      `<p>Code: <span>4</span><span>8</span><b>2</b></p><!-- hidden 999999 --><script>var x = "<p>1111</p>"</script>` +
      `<table><tr><td>Qty</td><td>1</td></tr></table><p>Tom &amp; Jerry&nbsp;&lt;3 &#65;&#x42; a < b</p></body></html>`
    expect(htmlTextWithoutParser(html)).toBe("Code: 482\n\nQty 1\n\nTom & Jerry <3 AB a < b")
  })

  it("reads what htmlToPlainText reads of ordinary markup", () => {
    const html = `<div><h1>Welcome</h1><p>Line one<br>line two</p><ul><li>a</li><li>b</li></ul></div>`
    expect(htmlTextWithoutParser(html)).toBe("Welcome\n\nLine one\nline two\n\na\nb")
  })

  it("an unclosed comment, script or tag hides the rest, as in a browser", () => {
    expect(htmlTextWithoutParser("before<!-- after")).toBe("before")
    expect(htmlTextWithoutParser("before<script> after")).toBe("before")
    expect(htmlTextWithoutParser("before<b after")).toBe("before")
  })

  it("answers on 15 MB of stray `<`, unclosed comments and unclosed style elements", () => {
    expect(htmlTextWithoutParser("<".repeat(15_000_000)).length).toBe(15_000_000)
    expect(htmlTextWithoutParser(`x${"<!--".repeat(3_500_000)}`)).toBe("x")
    expect(htmlTextWithoutParser(`x${"<style>".repeat(2_000_000)}`)).toBe("x")
    expect(htmlTextWithoutParser(`${"<i>".repeat(1_000_000)}unclosed`)).toBe("unclosed")
  })
})

describe("messageText reads HTML past the limits without the parser", () => {
  it("the text part first; without one, the linear reading of the HTML", () => {
    expect(messageText("Your code is 123456", nestedBold)).toBe("Your code is 123456")
    expect(messageText(null, nestedBold)).toBe("deep 123456")
    expect(messageText("  ", `<p>${"<b>".repeat(HtmlMaxDepth + 1)}past &amp; deep</p>`)).toBe("past & deep")
  })
})

describe("analyzeMessage of HTML past the limits: processed, rendered as text", () => {
  it("300,000 nested <b> without a text part: the HTML's text, escaped in a <pre>, gives snippet, code and search words", () => {
    const analysis = analyzeMessage(message({ html: nestedBold }))
    expect(analysis).toMatchObject({
      htmlLimit: "depth",
      snippet: "deep 123456",
      otpCodes: ["123456"],
      verificationLinks: [],
      sanitizedHtml: textAsHtml("deep 123456"),
      sanitizedHtmlWithRemoteImages: null,
      remoteImageCount: 0,
      searchText: "deep 123456 report.pdf",
      webhookTextBody: "deep 123456"
    })
    expect(analysis.sanitizedHtml).toBe(`<pre style="white-space: pre-wrap; overflow-wrap: anywhere; font-family: inherit">deep 123456</pre>`)
  })

  it("a text past the search words' bound is cut before the file names are joined to it: the same first SearchTextMaxChars", () => {
    const text = "word ".repeat(SearchTextMaxChars / 4)
    const parsed = message({ text })
    const analysis = analyzeMessage(parsed)
    expect(analysis.searchText).toBe(`${text.slice(0, SearchTextMaxChars)} report.pdf`)
    expect(storedColumns(parsed, analysis).search_text).toBe([text, "report.pdf"].join(" ").slice(0, SearchTextMaxChars))
    const short = message({ text: "Your code is 123456" })
    expect(analyzeMessage(short).searchText).toBe("Your code is 123456 report.pdf")
  })

  it("with a text part: the text part, escaped, is the rendering; codes and links come from it", () => {
    const text = "Hi <script>alert(1)</script> & welcome.\r\nYour code is 654321.\r\nVerify your address: https://example.com/verify?token=abcdef123456\r\n"
    const html = `${"<b>".repeat(300_000)}<a href="https://example.com/other?token=zzz">Verify</a> 111111`
    const analysis = analyzeMessage(message({ text, html }))
    expect(analysis.htmlLimit).toBe("depth")
    expect(analysis.sanitizedHtml).toBe(
      `<pre style="white-space: pre-wrap; overflow-wrap: anywhere; font-family: inherit">Hi &lt;script&gt;alert(1)&lt;/script&gt; &amp; welcome.\r\n` +
        `Your code is 654321.\r\nVerify your address: https://example.com/verify?token=abcdef123456\r\n</pre>`
    )
    expect(analysis.otpCodes).toEqual(["654321"])
    // The HTML's anchors are never read: only the text part's link.
    expect(analysis.verificationLinks).toEqual(["https://example.com/verify?token=abcdef123456"])
    expect(analysis.webhookTextBody).toBe(payloadTextBody(text))
  })

  it("each limit passed gives the same fallback", () => {
    const pastEach = [
      "<br>".repeat(HtmlMaxElements + 1),
      "</x>".repeat(HtmlMaxEndTags + 1),
      "&amp;".repeat(HtmlMaxTextPieces + 1),
      `<div ${"a ".repeat(HtmlMaxElementAttributes + 1)}>x</div>`
    ]
    for (const html of pastEach) {
      const analysis = analyzeMessage(message({ text: "code 246810", html }))
      expect(analysis.htmlLimit).not.toBeNull()
      expect(analysis.sanitizedHtml).toBe(textAsHtml("code 246810"))
      expect(analysis.otpCodes).toEqual(["246810"])
    }
  })
})

describe("analyzeMessage of ordinary HTML", () => {
  const html = `<p>Hello <img src="https://tracker.example/p.gif" alt=""> your code is 135790</p>` +
    `<p><a href="https://example.com/verify?token=abcdef123456">Verify your email</a></p>`

  it("makes the rendering with remote images loaded too, equal to a fresh sanitizing", () => {
    const analysis = analyzeMessage(message({ html }))
    expect(analysis.htmlLimit).toBeNull()
    expect(analysis.remoteImageCount).toBe(1)
    expect(analysis.sanitizedHtml).toBe(sanitizeEmailHtml(checked(html), { allowRemoteImages: false }).html)
    expect(analysis.sanitizedHtmlWithRemoteImages).toBe(sanitizeEmailHtml(checked(html), { allowRemoteImages: true }).html)
    expect(analysis.sanitizedHtmlWithRemoteImages).toContain(`src="https://tracker.example/p.gif"`)
    expect(analysis.verificationLinks).toEqual(["https://example.com/verify?token=abcdef123456"])
    expect(analysis.webhookTextBody).toBe("Hello your code is 135790\n\nVerify your email")
  })

  it("without remote images, no second rendering (the blocked one is the same)", () => {
    const analysis = analyzeMessage(message({ html: `<p>Hi <img src="cid:logo"></p>` }))
    expect(analysis.remoteImageCount).toBe(0)
    expect(analysis.sanitizedHtmlWithRemoteImages).toBeNull()
  })

  it("webhookTextBody is the reader text as the payload carries it: controls dropped, at most 32 KiB", () => {
    const text = `start\r\n\u0007${"x".repeat(40_000)}`
    const analysis = analyzeMessage(message({ text }))
    expect(analysis.webhookTextBody).toBe(payloadTextBody(text))
    expect(analysis.webhookTextBody.length).toBe(32_768)
    expect(payloadTextBody(analysis.webhookTextBody)).toBe(analysis.webhookTextBody)
  })
})

describe("smallCheckedHtml: what a request may still read on the main thread", () => {
  it(`HTML of at most ${RequestTimeHtmlMaxChars} characters, within the limits`, () => {
    const small = `<p>${"x".repeat(RequestTimeHtmlMaxChars - 7)}</p>`
    expect(smallCheckedHtml(small)).toBe(small)
    expect(smallCheckedHtml(`${small} `)).toBeUndefined()
    expect(smallCheckedHtml("<b>".repeat(HtmlMaxDepth + 1))).toBeUndefined()
  })
})
