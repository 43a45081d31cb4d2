/**
 * Hostile HTML cannot make the work grow past linear (issue #15): HTML is checked against
 * limits before anything walks it with a parser. No test here measures time: the check must
 * answer at all, on input that took minutes before.
 */
import { describe, expect, it } from "@effect/vitest"
import {
  checkHtmlLimits,
  HtmlMaxAttributes,
  HtmlMaxDepth,
  HtmlMaxElementAttributes,
  HtmlMaxElements,
  HtmlMaxEndTags,
  HtmlMaxStyleChars,
  HtmlMaxTextPieces
} from "../src/mail/limits.ts"

const verdict = (html: string) => {
  const result = checkHtmlLimits(html)
  return result.ok ? "within" : result.limit
}

/** An element with `n` attributes of distinct names. */
const withAttributes = (n: number) => `<div ${Array.from({ length: n }, (_, i) => `data-a${i}="${i}"`).join(" ")}>x</div>`

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
