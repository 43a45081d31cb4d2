import { describe, expect, it } from "@effect/vitest"
import { htmlToPlainText, makeSnippet, sanitizeEmailHtml } from "../src/mail/index.ts"
import { walkHtml } from "../src/mail/sanitize.ts"
import { checked } from "./checked-html.ts"
import { XssPayloads } from "./xss-payloads.ts"

const blocked = (html: string) => sanitizeEmailHtml(checked(html), { allowRemoteImages: false })
const allowed = (html: string) => sanitizeEmailHtml(checked(html), { allowRemoteImages: true })

interface ParsedElement {
  readonly tag: string
  readonly attributes: Readonly<Record<string, string>>
}

/** Elements of the output as a parser sees them (the walk skips invisible ones: see below). */
const parseElements = (html: string): Array<ParsedElement> => {
  const elements: Array<ParsedElement> = []
  walkHtml(checked(html), { open: (tag, attributes) => elements.push({ tag, attributes }) })
  return elements
}

/**
 * In sanitized output every `<` of text is escaped, so a literal `<name` is a tag. This catches
 * the elements the walk above skips (script, iframe, svg, template, ...).
 */
const EXECUTABLE_OR_FOREIGN_ELEMENT =
  /<\s*\/?\s*(?:script|iframe|frame|frameset|object|embed|applet|form|input|button|select|option|textarea|isindex|meta|base|link|svg|math|template|noscript|noembed|xmp|video|audio|source|animate|set|param|portal)(?![\w-])/i

const SCRIPT_SCHEME = /(?:java|vb|live)script:|data:(?!image\/(?:png|gif|jpeg|webp)[;,])/i

/** Control characters and spaces a browser drops from a URL before reading its scheme. */
const compact = (value: string) => value.replace(/[\u0000-\u0020\u007f]+/g, "").toLowerCase()

const styleElementTexts = (html: string): Array<string> =>
  [...html.matchAll(/<style\b[^>]*>([\s\S]*?)<\/style>/gi)].map((match) => match[1] ?? "")

/** The output holds nothing that could run script, whatever the input was. */
const expectInert = (html: string) => {
  expect(html).not.toMatch(EXECUTABLE_OR_FOREIGN_ELEMENT)
  for (const { tag, attributes } of parseElements(html)) {
    for (const [name, value] of Object.entries(attributes)) {
      expect(name, `<${tag} ${name}>`).not.toMatch(/^on/i)
      expect(["srcdoc", "action", "formaction", "xlink:href", "poster", "ping", "srcset", "data", "http-equiv"]).not.toContain(name)
      expect(compact(value), `<${tag} ${name}="${value}">`).not.toMatch(SCRIPT_SCHEME)
      if (name === "style") {
        expect(value).not.toMatch(/expression|behavior|binding|\\|url\((?!"https?:|"cid:|"data:image\/)/i)
      }
    }
  }
  for (const css of styleElementTexts(html)) {
    expect(css).not.toMatch(/@import|expression|javascript|vbscript|binding|behavior|[<\\]|url\((?!"https?:)/i)
  }
}

describe("sanitizeEmailHtml against XSS payloads", () => {
  it("has at least 30 payloads", () => {
    expect(XssPayloads.length).toBeGreaterThanOrEqual(30)
  })

  for (const [name, payload] of XssPayloads) {
    it(`leaves nothing executable: ${name}`, () => {
      const { html } = blocked(payload)
      expectInert(html)
      expectInert(allowed(payload).html)
      // Sanitizing again changes nothing: the output parses back into itself.
      expect(blocked(html).html).toBe(html)
    })
  }

  it("keeps the text of a link whose href it refuses", () => {
    expect(blocked(`<a href="javascript:alert(1)">click</a>`).html).toBe("<a>click</a>")
  })

  it("keeps the sibling content of refused elements", () => {
    expect(blocked(`<p>Hello</p><script>alert(1)</script><p>World</p>`).html).toBe("<p>Hello</p><p>World</p>")
  })
})

describe("sanitizeEmailHtml remote images", () => {
  const mail = `<p>Hi</p><img src="https://tracker.example/open.gif?u=42" width="1" height="1" alt="">`

  it("removes remote images by default and counts them", () => {
    const result = blocked(mail)
    expect(result.html).toBe("<p>Hi</p>")
    expect(result.remoteImageCount).toBe(1)
  })

  it("replaces remote images by the placeholder when one is given", () => {
    const result = sanitizeEmailHtml(checked(mail), { allowRemoteImages: false, blockedImagePlaceholder: "/static/blocked-image.svg" })
    expect(result.html).toBe(`<p>Hi</p><img src="/static/blocked-image.svg" width="1" height="1" alt="" />`)
    expect(result.remoteImageCount).toBe(1)
  })

  it("keeps remote images when allowed, and still counts them", () => {
    const result = allowed(mail)
    expect(result.html).toBe(`<p>Hi</p><img src="https://tracker.example/open.gif?u=42" width="1" height="1" alt="" />`)
    expect(result.remoteImageCount).toBe(1)
  })

  it("removes a blocked image without disturbing its siblings", () => {
    expect(blocked(`<div><img src="https://cdn.example/a.png"><span>x</span><img src="javascript:alert(1)"><b>y</b></div>`).html).toBe(
      "<div><span>x</span><b>y</b></div>"
    )
  })

  it("treats a protocol-relative image as remote", () => {
    expect(blocked(`<img src="//cdn.example/logo.png">`)).toEqual({ html: "", remoteImageCount: 1 })
    expect(allowed(`<img src="//cdn.example/logo.png">`).html).toBe(`<img src="https://cdn.example/logo.png" />`)
  })

  it("blocks background attributes and CSS backgrounds, and counts them", () => {
    const html = `<table background="https://cdn.example/bg.jpg"><tr><td style="background-image:url('https://cdn.example/hero.jpg');color:#333">x</td></tr></table>`
    const result = blocked(html)
    expect(result.html).toBe(`<table><tr><td style="background-image:none;color:#333">x</td></tr></table>`)
    expect(result.remoteImageCount).toBe(2)
    expect(allowed(html).html).toBe(
      `<table background="https://cdn.example/bg.jpg"><tr><td style="background-image:url(&quot;https://cdn.example/hero.jpg&quot;);color:#333">x</td></tr></table>`
    )
  })

  it("does not count a background attribute on an element that may not keep it", () => {
    expect(blocked(`<div background="https://cdn.example/bg.jpg">x</div>`)).toEqual({ html: "<div>x</div>", remoteImageCount: 0 })
  })

  it("blocks url() in style elements, and counts it", () => {
    const html = `<style>.hero{background:url(https://cdn.example/hero.jpg) no-repeat}</style><div class="hero">x</div>`
    const result = blocked(html)
    expect(result.html).toBe(`<style>.hero{background:none no-repeat}</style><div class="hero">x</div>`)
    expect(result.remoteImageCount).toBe(1)
    expect(allowed(html).html).toBe(`<style>.hero{background:url("https://cdn.example/hero.jpg") no-repeat}</style><div class="hero">x</div>`)
  })

  it("keeps cid: images as they are, without counting them", () => {
    expect(blocked(`<img src="cid:logo@mail.example" alt="Logo">`)).toEqual({
      html: `<img src="cid:logo@mail.example" alt="Logo" />`,
      remoteImageCount: 0
    })
  })

  it("keeps inline raster images and drops other data: images", () => {
    expect(blocked(`<img src="data:image/png;base64,iVBORw0KGgo=">`).html).toBe(`<img src="data:image/png;base64,iVBORw0KGgo=" />`)
    expect(blocked(`<img src="data:image/svg+xml,%3Csvg%3E%3C/svg%3E">`).html).toBe("")
    expect(blocked(`<img src="data:text/html,hi">`).html).toBe("")
  })

  it("drops srcset so that no remote candidate slips past the count", () => {
    expect(blocked(`<img src="cid:a" srcset="https://cdn.example/a@2x.png 2x">`)).toEqual({
      html: `<img src="cid:a" />`,
      remoteImageCount: 0
    })
  })
})

describe("sanitizeEmailHtml links", () => {
  it("opens links in a new browsing context without opener or referrer", () => {
    expect(blocked(`<a href="https://example.com/a?b=1&amp;c=2">Open</a>`).html).toBe(
      `<a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer nofollow">Open</a>`
    )
  })

  it("replaces the sender's own target and rel", () => {
    expect(blocked(`<a href="https://example.com/" target="_self" rel="opener">Open</a>`).html).toBe(
      `<a href="https://example.com/" target="_blank" rel="noopener noreferrer nofollow">Open</a>`
    )
  })

  it("keeps mailto: and tel: links", () => {
    expect(blocked(`<a href="mailto:help@example.com">Mail</a> <a href="tel:+49301234567">Call</a>`).html).toBe(
      `<a href="mailto:help@example.com" target="_blank" rel="noopener noreferrer nofollow">Mail</a> ` +
        `<a href="tel:+49301234567" target="_blank" rel="noopener noreferrer nofollow">Call</a>`
    )
  })

  it("drops relative hrefs, which would point into our own origin", () => {
    expect(blocked(`<a href="/api/messages">x</a><a href="#top" target="_top">y</a>`).html).toBe("<a>x</a><a>y</a>")
  })
})

describe("sanitizeEmailHtml layout", () => {
  it("keeps table layout and safe inline styles, and turns body into a div", () => {
    const html = `<body style="margin:0" bgcolor="#ffffff"><table width="600" cellpadding="0" align="center"><tr><td valign="top" style="color:#111;font-family:'Helvetica Neue',Arial;padding:12px 24px;position:fixed">Hi</td></tr></table></body>`
    expect(blocked(html).html).toBe(
      `<div style="margin:0" bgcolor="#ffffff"><table width="600" cellpadding="0" align="center"><tr><td valign="top" style="color:#111;font-family:'Helvetica Neue',Arial;padding:12px 24px">Hi</td></tr></table></div>`
    )
  })

  it("keeps style elements with media queries", () => {
    const css = `@media (max-width:600px){.col{width:100% !important}} a > span{color:rgb(37, 99, 235)}`
    expect(blocked(`<head><style type="text/css">${css}</style></head><p>x</p>`).html).toBe(`<style type="text/css">${css}</style><p>x</p>`)
  })

  it("drops a style element that uses CSS escapes", () => {
    expect(blocked(`<style>.a{color:\\72 ed}</style><p>x</p>`).html).toBe("<p>x</p>")
  })

  it("drops the content of head, title and comments", () => {
    expect(blocked(`<html><head><title>Secret</title><meta charset="utf-8"></head><body><!-- note --><p>x</p></body></html>`).html).toBe(
      "<div><p>x</p></div>"
    )
  })
})

describe("htmlToPlainText", () => {
  it("puts blocks on their own lines, cells side by side, and drops invisible elements", () => {
    const html = `<html><head><title>T</title><style>p{}</style></head><body>
      <h1>Welcome</h1><p>Line one<br>line   two</p>
      <table><tr><td>Qty</td><td>1</td></tr><tr><td>Total</td><td>$1,299.00</td></tr></table>
      <script>var x = 1</script><noscript>enable js</noscript><template><p>later</p></template>
      <ul><li>A &amp; B</li><li>&lt;C&gt;</li></ul></body></html>`
    expect(htmlToPlainText(checked(html))).toBe("Welcome\n\nLine one\nline two\n\nQty 1\nTotal $1,299.00\n\nA & B\n<C>")
  })

  it("joins inline elements without adding spaces", () => {
    expect(htmlToPlainText(checked(`<p>Code: <span>4</span><span>8</span><b>2</b></p>`))).toBe("Code: 482")
  })

  it("keeps line breaks inside pre", () => {
    expect(htmlToPlainText(checked(`<pre>a\n  b</pre>`))).toBe("a\nb")
  })

  it("never throws on broken markup (a stray </p> is an empty paragraph, as in a browser)", () => {
    expect(htmlToPlainText(checked(`<div><p>unclosed <b>bold <i>both</div></p></b> after`))).toBe("unclosed bold both\n\nafter")
  })
})

describe("makeSnippet", () => {
  it("collapses whitespace and trims", () => {
    expect(makeSnippet("  Hello \n\n  world\t ")).toBe("Hello world")
  })

  it("returns short text unchanged", () => {
    expect(makeSnippet("Your code is 482913", 200)).toBe("Your code is 482913")
  })

  it("cuts on a word boundary and stays within the limit", () => {
    const snippet = makeSnippet("Your verification code is 482913 and it expires soon", 30)
    expect(snippet).toBe("Your verification code is…")
    expect(snippet.length).toBeLessThanOrEqual(30)
  })

  it("cuts a single long word rather than returning nothing", () => {
    expect(makeSnippet(`https://example.com/${"a".repeat(300)}`, 20)).toBe("https://example.com…")
  })

  it("does not split a surrogate pair", () => {
    expect(makeSnippet(`${"x".repeat(8)}😀😀😀`, 10)).toBe(`${"x".repeat(8)}…`)
  })

  it("defaults to 200 characters", () => {
    expect(makeSnippet("word ".repeat(100)).length).toBeLessThanOrEqual(200)
  })
})

/** The definition of a snippet: collapse the whole text, then cut (as makeSnippet did before it read a window). */
const snippetOfWhole = (text: string, max: number) => {
  const line = text.replace(/\u00ad|\u200b|\u200d|\ufeff/g, "").replace(/\s+/g, " ").trim()
  if (line.length <= max) return line
  if (max <= 1) return line.slice(0, max)
  const room = line.slice(0, max - 1)
  const lastSpace = room.lastIndexOf(" ")
  return `${(lastSpace > (max - 1) / 2 ? room.slice(0, lastSpace) : room).trimEnd()}…`
}

describe("makeSnippet on a long text", () => {
  it("reads only the start of a long text and cuts it as it would cut the whole text", () => {
    const cases = [
      `${" \n".repeat(3000)}Your code is 482913. ${"word ".repeat(200_000)}`,
      `${"\u200b".repeat(5000)}${"a".repeat(300)} tail`,
      `Hello${" ".repeat(1019)}world ${"x".repeat(5000)}`,
      `${"short words here ".repeat(60)}${" ".repeat(10_000)}`,
      `${"é ".repeat(3000)}`
    ]
    for (const text of cases) for (const max of [1, 2, 20, 200]) expect(makeSnippet(text, max)).toBe(snippetOfWhole(text, max))
  })
})
