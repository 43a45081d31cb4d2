/**
 * HTML of received mail: the sanitized rendering served by `GET /messages/{id}/html`, and the
 * plain text read from it for snippets, one-time codes and links.
 *
 * Both go through sanitize-html's parser (htmlparser2), so the text we scan is cut from the
 * same tree that the sanitizer judges; but only HTML within the limits (limits.ts), the only
 * kind `walkHtml`, `htmlToPlainText` and `sanitizeEmailHtml` take. HTML past them is read
 * without a parser, in one linear pass (`htmlTextWithoutParser`), and rendered as that text
 * (`textAsHtml`).
 */
import sanitizeHtml from "sanitize-html"
import { payloadTextBody, TextBodyMaxChars } from "../webhooks/textBody.ts"
import { type CheckedHtml, checkHtmlLimits, type HtmlLimitCheck } from "./limits.ts"

// ---------------------------------------------------------------------------------------------
// Reading HTML
// ---------------------------------------------------------------------------------------------

/** Callbacks for a walk over HTML: elements in document order, text already entity-decoded. */
export interface HtmlVisitor {
  readonly open?: (tag: string, attributes: Readonly<Record<string, string>>) => void
  readonly text?: (text: string) => void
  readonly close?: (tag: string) => void
}

/** Elements whose content a reader never sees; the walk skips them with everything inside. */
const INVISIBLE_TAGS: ReadonlyArray<string> = [
  "head", "title", "script", "style", "template", "noscript", "noembed", "noframes", "iframe",
  "object", "textarea", "option", "select", "xmp", "svg", "math"
]
const INVISIBLE = new Set(INVISIBLE_TAGS)

// sanitize-html hands text to `textFilter` escaped with exactly these three entities.
const unescapeSanitizerText = (text: string): string =>
  text.replace(/&(amp|lt|gt);/g, (_, name: string) => (name === "amp" ? "&" : name === "lt" ? "<" : ">"))

/**
 * Walks `html` with sanitize-html's parser, which never throws on malformed markup. Every opened
 * element is closed again (htmlparser2 closes implied and void elements), so a visitor can keep a
 * stack.
 */
export const walkHtml = (html: CheckedHtml, visitor: HtmlVisitor): void => {
  // Depth inside an invisible element: sanitize-html drops their text but still reports tags.
  let hiddenDepth = 0
  sanitizeHtml(html, {
    allowedTags: [],
    allowedAttributes: {},
    nonTextTags: [...INVISIBLE_TAGS],
    onOpenTag: (tag, attributes) => {
      if (hiddenDepth > 0 || INVISIBLE.has(tag)) hiddenDepth++
      else visitor.open?.(tag, attributes)
    },
    onCloseTag: (tag) => {
      if (hiddenDepth > 0) hiddenDepth--
      else visitor.close?.(tag)
    },
    textFilter: (text) => {
      if (hiddenDepth === 0) visitor.text?.(unescapeSanitizerText(text))
      return ""
    }
  })
}

// ---------------------------------------------------------------------------------------------
// Plain text
// ---------------------------------------------------------------------------------------------

/** Elements set off by a blank line in a rendered mail. */
const PARAGRAPH_TAGS = new Set([
  "blockquote", "dl", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "ol", "p", "pre", "table", "ul"
])
/** Elements that start a new line. */
const LINE_TAGS = new Set([
  "address", "article", "aside", "body", "caption", "center", "dd", "details", "div", "dt",
  "fieldset", "figcaption", "footer", "form", "header", "html", "li", "main", "nav", "section",
  "summary", "tbody", "tfoot", "thead", "tr"
])
const breakBefore = (tag: string): number => (PARAGRAPH_TAGS.has(tag) ? 2 : LINE_TAGS.has(tag) ? 1 : 0)
/** Table cells sit side by side: a space, not a line, between them. */
const CELL_TAGS = new Set(["td", "th"])

// Zero-width and formatting characters: mail templates pad preheaders with them and sometimes
// put them between the digits of a code; a reader sees nothing there.
// (Joiners and combining characters stand outside the class: inside one they would read as
// joined to their neighbours.)
const INVISIBLE_CHARACTERS =
  /[\u00ad\u061c\u180e\u200b\u200c\u200e\u200f\u202a-\u202e\u2060-\u2064\u206a-\u206f\ufeff]|\u034f|\u115f|\u1160|\u17b4|\u17b5|\u200d/g

/** Removes characters that take no room on screen (zero-width spaces, soft hyphens, ...). */
export const removeInvisibleCharacters = (text: string): string => text.replace(INVISIBLE_CHARACTERS, "")

/** Collapses spaces inside each line and keeps at most one blank line in a row. */
const tidyLines = (text: string): string =>
  removeInvisibleCharacters(text)
    .split("\n")
    .map((line) => line.replace(/[^\S\n]+/g, " ").trim())
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim()

/**
 * The text a reader of the HTML sees: scripts, styles and other invisible elements dropped,
 * entities decoded, block elements on their own lines, table cells separated by a space.
 * Inline elements join their text, so `<span>4</span><span>8</span>` reads "48".
 * CSS is not evaluated: text hidden with `display:none` (a preheader) still counts.
 */
export const htmlToPlainText = (html: CheckedHtml): string => {
  const parts: Array<string> = []
  // Block edges that meet with no text between them make one break, not one each:
  // `</tr><tr>` is a single line break, `</p><p>` a single blank line.
  let pendingNewlines = 0
  const blockEdge = (tag: string) => {
    pendingNewlines = Math.max(pendingNewlines, breakBefore(tag))
  }
  const write = (text: string) => {
    if (pendingNewlines > 0 && text.trim() === "") return
    parts.push("\n".repeat(pendingNewlines), text)
    pendingNewlines = 0
  }
  let preDepth = 0
  walkHtml(html, {
    open: (tag) => {
      if (tag === "pre") preDepth++
      if (tag === "br") write("\n")
      else if (CELL_TAGS.has(tag)) write(" ")
      else blockEdge(tag)
    },
    close: (tag) => {
      if (tag === "pre") preDepth = Math.max(0, preDepth - 1)
      if (CELL_TAGS.has(tag)) write(" ")
      else blockEdge(tag)
    },
    // Outside <pre>, source line breaks are only spaces, as in a browser.
    text: (text) => write(preDepth > 0 ? text : text.replace(/\s+/g, " "))
  })
  return tidyLines(parts.join(""))
}

// ---------------------------------------------------------------------------------------------
// Plain text of HTML past the limits
// ---------------------------------------------------------------------------------------------

/** Elements whose content is text up to their end tag, and which a reader never sees. */
const RAW_TEXT_END: ReadonlyMap<string, RegExp> = new Map(
  ["script", "style", "title", "textarea", "xmp", "iframe", "noembed", "noframes"].map((tag) => [tag, new RegExp(`</${tag}`, "gi")])
)
const TAG_NAME = /^[a-z][a-z0-9]*/i
/** After a `<`: a letter, `/`, `!` or `?` starts markup (a tag, an end tag, a comment or declaration). */
const startsMarkup = (code: number): boolean =>
  ((code | 0x20) >= 0x61 && (code | 0x20) <= 0x7a) || code === 0x2f || code === 0x21 || code === 0x3f
const TEXT_ENTITY = /&(?:#([0-9]{1,7})|#[xX]([0-9a-fA-F]{1,6})|(amp|lt|gt|quot|apos|nbsp));/g
const NAMED_ENTITIES: Readonly<Record<string, string>> = { amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'", nbsp: "\u00a0" }

const fromCodePoint = (codePoint: number): string =>
  codePoint === 0 || codePoint > 0x10ffff || (codePoint >= 0xd800 && codePoint <= 0xdfff) ? "\ufffd" : String.fromCodePoint(codePoint)

/** Numeric entities and the few named ones mail text uses; any other stays as written. */
const decodeTextEntities = (text: string): string =>
  text.replace(TEXT_ENTITY, (_entity, decimal?: string, hex?: string, name?: string) =>
    decimal !== undefined ? fromCodePoint(Number(decimal)) : hex !== undefined ? fromCodePoint(parseInt(hex, 16)) : NAMED_ENTITIES[name ?? ""] ?? "")

/**
 * The visible text of HTML read without a parser, for HTML past the limits: in one pass, each
 * search starting where the last one ended, so the work is linear whatever the markup. Tags
 * go, block elements break lines as in `htmlToPlainText`, comments and the content of script,
 * style and the like go, a few entities are decoded. An approximation: a `>` inside a quoted
 * attribute value ends the tag early, and containers such as svg keep their text.
 */
export const htmlTextWithoutParser = (html: string): string => {
  const parts: Array<string> = []
  // Block edges that meet with no text between them make one break, as in htmlToPlainText.
  let pendingNewlines = 0
  const write = (text: string) => {
    if (pendingNewlines > 0 && text.trim() === "") return
    parts.push("\n".repeat(pendingNewlines), text)
    pendingNewlines = 0
  }
  /** Where the text not yet written starts. */
  let text = 0
  const writeTo = (end: number) => {
    if (end > text) write(html.slice(text, end).replace(/\s+/g, " "))
  }
  let at = 0
  while (at < html.length) {
    const open = html.indexOf("<", at)
    if (open === -1) break
    if (!startsMarkup(html.charCodeAt(open + 1))) {
      // A `<` of the text, which goes on.
      at = open + 1
      continue
    }
    writeTo(open)
    const closing = html.charAt(open + 1) === "/"
    const name = TAG_NAME.exec(html.slice(open + (closing ? 2 : 1), open + 18))?.[0].toLowerCase()
    if (html.startsWith("!--", open + 1)) {
      // An unclosed comment runs to the end, as in a browser.
      const end = html.indexOf("-->", open + 4)
      text = at = end === -1 ? html.length : end + 3
      continue
    }
    const end = html.indexOf(">", open + 1)
    text = at = end === -1 ? html.length : end + 1
    if (name === undefined) continue
    if (name === "br") write("\n")
    else if (CELL_TAGS.has(name)) write(" ")
    else pendingNewlines = Math.max(pendingNewlines, breakBefore(name))
    const rawTextEnd = closing ? undefined : RAW_TEXT_END.get(name)
    if (rawTextEnd !== undefined) {
      rawTextEnd.lastIndex = at
      const endTag = rawTextEnd.exec(html)
      // Without its end tag, the element holds the rest.
      text = at = endTag === null ? html.length : endTag.index
    }
  }
  writeTo(html.length)
  return tidyLines(decodeTextEntities(parts.join("")))
}

// ---------------------------------------------------------------------------------------------
// The text of a message
// ---------------------------------------------------------------------------------------------

/** A text part holding only whitespace counts as missing (some senders attach an empty one next to the HTML). */
export const hasTextPart = (text: string | null): text is string => text !== null && text.trim() !== ""

/**
 * `messageText` for HTML checked already: the text part, else the HTML's visible text, read
 * with the parser within the limits and without one past them.
 */
export const readerText = (text: string | null, html: HtmlLimitCheck | null): string => {
  if (hasTextPart(text)) return text
  if (html === null) return ""
  return html.ok ? htmlToPlainText(html.html) : htmlTextWithoutParser(html.html)
}

/**
 * The text of a message as a reader meets it: the text part, or the visible text of the HTML part
 * when there is no text part. Safe on any HTML: past the limits it is read without a parser.
 */
export const messageText = (text: string | null, html: string | null): string =>
  hasTextPart(text) ? text : readerText(null, html === null ? null : checkHtmlLimits(html))

/**
 * A text part up to this many characters makes its webhook `text_body` on read (on the main
 * thread at dispatch: ~0.3 ms); a longer one has it stored, made in the pipeline's thread.
 */
export const TextPartPayloadMaxChars = 4 * TextBodyMaxChars

/**
 * A webhook's `text_body` (spec 6.3) as the stored text part alone makes it (`textBody` as the
 * message row holds it, at most TextPartPayloadMaxChars): cheap, so the pipeline stores no copy
 * of it (webhook_text_body is NULL) when it is the one the pipeline made. Null without a text
 * part: then the text comes from the HTML, which needs the parser and is made in the pipeline's
 * threads.
 */
export const textPartPayload = (textBody: string | null): string | null =>
  hasTextPart(textBody) ? payloadTextBody(textBody) : null

/**
 * A one-line preview: whitespace collapsed, cut on a word boundary with "…" when longer than `max`
 * characters (the ellipsis included).
 */
export const makeSnippet = (text: string, max = 200): string => {
  const line = snippetLine(text, max)
  if (line.length <= max) return line
  if (max <= 1) return line.slice(0, Math.max(0, max))
  const room = line.slice(0, max - 1)
  const lastSpace = room.lastIndexOf(" ")
  // A word longer than half the room (a URL, a token) is cut rather than dropped entirely.
  const cut = lastSpace > (max - 1) / 2 ? room.slice(0, lastSpace) : room
  return `${dropLoneHighSurrogate(cut).trimEnd()}…`
}

/** Invisible characters dropped, whitespace runs collapsed to one space, leading space trimmed. */
const collapseSpaces = (text: string): string => removeInvisibleCharacters(text).replace(/\s+/g, " ").trimStart()

/**
 * The start of the collapsed text, long enough to cut a snippet of `max` from: a growing window
 * of the text is read until it gives more than `max + 1` characters (collapsing is the same on a
 * prefix, up to its last character), so a 15 MB body is not rewritten whole to keep 200
 * characters of it. The whole text, trimmed at both ends, when it is shorter than that.
 */
const snippetLine = (text: string, max: number): string => {
  for (let window = Math.max(1024, max * 4); window < text.length; window *= 4) {
    const head = collapseSpaces(text.slice(0, window))
    if (head.length > max + 1) return head
  }
  return collapseSpaces(text).trimEnd()
}

const dropLoneHighSurrogate = (text: string): string => (/[\ud800-\udbff]$/.test(text) ? text.slice(0, -1) : text)

// ---------------------------------------------------------------------------------------------
// Sanitized HTML
// ---------------------------------------------------------------------------------------------

export interface SanitizeEmailOptions {
  readonly allowRemoteImages: boolean
  /** `src` given to a blocked remote image; without it, the image is removed. */
  readonly blockedImagePlaceholder?: string
}

export interface SanitizedEmail {
  readonly html: string
  /**
   * Remote (http/https) image references met: `<img src>`, `background` attributes and CSS
   * `url()`s, counted whether they were blocked or allowed.
   */
  readonly remoteImageCount: number
}

/**
 * Tags a mail may keep. Everything else is removed with its content kept (sanitize-html's
 * "discard"), except the invisible elements, which go with their content. Not here on purpose:
 * script, iframe/frame/object/embed/applet, form and its controls, meta, base, link, svg, math,
 * template, audio/video/picture/source (remote loads we do not count), map/area.
 */
const ALLOWED_TAGS: ReadonlyArray<string> = [
  ...sanitizeHtml.defaults.allowedTags,
  "img", "font", "center", "big", "tt", "strike", "del", "ins", "style"
]
const ALLOWED_TAG_SET = new Set(ALLOWED_TAGS)

const PRESENTATION_ATTRIBUTES = [
  "style", "class", "dir", "lang", "title", "align", "valign", "width", "height", "bgcolor",
  "border", "cellpadding", "cellspacing", "colspan", "rowspan", "nowrap"
]

const ALLOWED_ATTRIBUTES: Record<string, Array<string>> = {
  "*": PRESENTATION_ATTRIBUTES,
  a: ["href", "name", "target", "rel"],
  img: ["src", "alt", "hspace", "vspace"],
  font: ["color", "face", "size"],
  table: ["background"],
  tr: ["background"],
  td: ["background", "headers", "scope"],
  th: ["background", "headers", "scope"],
  ol: ["start", "type", "reversed"],
  ul: ["type"],
  li: ["value"],
  col: ["span"],
  colgroup: ["span"],
  time: ["datetime"],
  style: ["media", "type"]
}

/** CSS functions a style may call: colours, gradients and arithmetic, none of which loads. */
const CSS_FUNCTIONS = "rgba?|hsla?|calc|min|max|clamp|(?:repeating-)?(?:linear|radial)-gradient"
/** The only `url()` form let through, and only as written by `rewriteCssUrls`. */
const EMITTED_CSS_URL = String.raw`url\("(?:https?:|cid:|data:image/(?:png|gif|jpeg|webp)[;,])[^"\\()<>\s]*"\)`
/**
 * A declaration value: plain tokens, quoted strings, allowed functions and our own `url()`. No
 * backslash (CSS escapes can spell `url(` or `expression(`), no `<>{}`.
 */
const SAFE_CSS_VALUE = new RegExp(
  String.raw`^(?:[^\\<>{}()"']|(?<![\w-])(?:${CSS_FUNCTIONS})\(|\)|${EMITTED_CSS_URL}|"[^"\\<>]*"|'[^'\\<>]*')*$`,
  "i"
)

const sides = (property: string): Array<string> =>
  [property, ...["top", "right", "bottom", "left"].map((side) => `${property}-${side}`)]

/** Properties a style attribute may set: layout and typography. No `position` (overlays), no
 *  `behavior`/`-moz-binding` (script), no `content`. */
const ALLOWED_STYLE_PROPERTIES = [
  "color", "background", "background-color", "background-image", "background-position",
  "background-repeat", "background-size", ...sides("margin"), ...sides("padding"),
  ...sides("border"), ...["color", "style", "width"].flatMap((part) => [
    `border-${part}`, ...["top", "right", "bottom", "left"].map((side) => `border-${side}-${part}`)
  ]),
  "border-radius", "border-collapse", "border-spacing", "font", "font-family", "font-size",
  "font-style", "font-weight", "font-variant", "line-height", "letter-spacing", "word-spacing",
  "text-align", "text-decoration", "text-transform", "text-indent", "text-shadow",
  "vertical-align", "white-space", "word-break", "word-wrap", "overflow-wrap", "width", "height",
  "min-width", "max-width", "min-height", "max-height", "display", "float", "clear", "overflow",
  "overflow-x", "overflow-y", "opacity", "visibility", "list-style", "list-style-type",
  "list-style-position", "table-layout", "direction", "box-sizing", "box-shadow", "mso-hide"
]
const ALLOWED_STYLES: Record<string, Array<RegExp>> = Object.fromEntries(
  ALLOWED_STYLE_PROPERTIES.map((property) => [property, [SAFE_CSS_VALUE]])
)

// Where an image comes from decides whether loading it can tell the sender that the mail was
// opened: embedded parts (`cid:`) and inline raster data cannot; http(s) can.
type ImageSource =
  | { readonly kind: "embedded"; readonly url: string }
  | { readonly kind: "remote"; readonly url: string }
  | { readonly kind: "refused" }

const SAFE_DATA_IMAGE = /^data:image\/(?:png|gif|jpeg|webp)[;,]/i

const parseAbsoluteUrl = (value: string): URL | undefined => {
  try {
    return new URL(value)
  } catch {
    return undefined
  }
}

const classifyImageSource = (raw: string): ImageSource => {
  const value = raw.trim()
  // A protocol-relative image would load over the page's own scheme: a remote image all the same.
  const url = parseAbsoluteUrl(value.startsWith("//") ? `https:${value}` : value)
  if (url === undefined) return { kind: "refused" }
  if (url.protocol === "http:" || url.protocol === "https:") return { kind: "remote", url: url.href }
  if (url.protocol === "cid:") return { kind: "embedded", url: url.href }
  if (url.protocol === "data:" && SAFE_DATA_IMAGE.test(url.href)) return { kind: "embedded", url: url.href }
  return { kind: "refused" }
}

/** Decides every image reference of one sanitizing run and counts the remote ones. */
const makeImagePolicy = (options: SanitizeEmailOptions) => {
  let remoteCount = 0
  /** The URL to keep, or undefined to drop the reference. */
  const resolve = (raw: string, placeholder: string | undefined): string | undefined => {
    const source = classifyImageSource(raw)
    if (source.kind === "refused") return undefined
    if (source.kind === "embedded") return source.url
    remoteCount++
    return options.allowRemoteImages ? source.url : placeholder
  }
  return {
    imageSource: (raw: string) => resolve(raw, options.blockedImagePlaceholder),
    // A placeholder image as a background would only tile across the layout: drop it instead.
    backgroundSource: (raw: string) => resolve(raw, undefined),
    remoteCount: () => remoteCount
  }
}
type ImagePolicy = ReturnType<typeof makeImagePolicy>

// Characters that would end or confuse `url("…")` are percent-encoded, which keeps the URL.
const cssQuotedUrl = (url: string): string =>
  `url("${url.replace(/["'()\\<>\s]/g, (character) => encodeURIComponent(character))}")`

// No bracket inside the URL: each failed attempt then stops at the next bracket, which keeps a
// sheet full of unclosed `url(` linear. A URL that holds one is left unread, so the CSS is dropped.
const CSS_URL = /url\(\s*(?:"([^"()]*)"|'([^'()]*)'|([^()"'\s]*))\s*\)/gi

/**
 * Replaces every `url()` with our quoted form, or with `none` when the image is refused or
 * blocked. Undefined when a `url(` is left that we could not read: then we keep none of the CSS.
 */
const rewriteCssUrls = (css: string, images: ImagePolicy): string | undefined => {
  const rewritten = css.replace(CSS_URL, (_match, doubleQuoted?: string, singleQuoted?: string, bare?: string) => {
    const url = images.backgroundSource(doubleQuoted ?? singleQuoted ?? bare ?? "")
    return url === undefined ? "none" : cssQuotedUrl(url)
  })
  const leftover = rewritten.replace(new RegExp(EMITTED_CSS_URL, "gi"), "")
  return /url\s*\(/i.test(leftover) ? undefined : rewritten
}

/** Constructs that run script, load other resources than images, or may hide either. */
const UNSAFE_CSS = /expression\s*\(|javascript:|vbscript:|behavior|-moz-binding|(?<![\w-])(?:-webkit-)?(?:image-set|image|cross-fade|element)\s*\(|@import/i

/**
 * Sanitizes CSS text (a `<style>` element or a `style` attribute), or gives undefined to drop it.
 * A backslash or `<` drops it whole: escapes could spell any keyword, and `<` has no place in CSS.
 */
const sanitizeCss = (css: string, images: ImagePolicy): string | undefined => {
  if (/[\\<]/.test(css)) return undefined
  const withoutComments = css.replace(/\/\*[\s\S]*?\*\//g, " ")
  if (withoutComments.includes("/*")) return undefined
  // External stylesheets are never fetched; the rest of the sheet stays.
  const withoutImports = withoutComments.replace(/@import[^;]*;?/gi, "")
  if (UNSAFE_CSS.test(withoutImports)) return undefined
  return rewriteCssUrls(withoutImports, images)
}

const withoutAttribute = (attributes: sanitizeHtml.Attributes, name: string): sanitizeHtml.Attributes => {
  const { [name]: _dropped, ...rest } = attributes
  return rest
}

const withAttribute = (
  attributes: sanitizeHtml.Attributes,
  name: string,
  value: string | undefined
): sanitizeHtml.Attributes => (value === undefined ? withoutAttribute(attributes, name) : { ...attributes, [name]: value })

const LINK_PROTOCOLS = new Set(["http:", "https:", "mailto:", "tel:"])

/**
 * Absolute http(s), mailto and tel links only. Parsed like a browser does (which also removes
 * tabs and newlines from `java\tscript:`); relative links would point into our own origin.
 */
const safeLinkHref = (raw: string | undefined): string | undefined => {
  const url = raw === undefined ? undefined : parseAbsoluteUrl(raw.trim())
  return url !== undefined && LINK_PROTOCOLS.has(url.protocol) ? url.href : undefined
}

/** Links open outside the mail's sandboxed frame, tell the target nothing and pass no rank. */
const secureLink: sanitizeHtml.Transformer = (_tag, attributes) => {
  const href = safeLinkHref(attributes.href)
  const rest = withoutAttribute(withoutAttribute(withoutAttribute(attributes, "href"), "target"), "rel")
  return {
    tagName: "a",
    attribs: href === undefined ? rest : { ...rest, href, target: "_blank", rel: "noopener noreferrer nofollow" }
  }
}

/**
 * An image left without a source (refused, or blocked with no placeholder) loses all its
 * attributes and is serialized as exactly this, then removed from the output (where text never
 * holds a literal `<`). Not `exclusiveFilter`, which cuts each removed element out of the output
 * built so far: quadratic in a mail with thousands of tracking pixels. Not a rename to a
 * disallowed tag either: sanitize-html then closes the next sibling with the new name.
 */
const REMOVED_IMAGE = "<img />"

const sanitizerOptions = (images: ImagePolicy): sanitizeHtml.IOptions => ({
  allowedTags: [...ALLOWED_TAGS],
  allowedAttributes: ALLOWED_ATTRIBUTES,
  allowedStyles: { "*": ALLOWED_STYLES },
  allowedSchemes: ["http", "https", "mailto", "tel"],
  allowedSchemesByTag: { img: ["http", "https", "cid", "data"] },
  allowProtocolRelative: false,
  // <style> is allowed because its text is sanitized afterwards (sanitizeStyleElements).
  allowVulnerableTags: true,
  // <head> is unwrapped rather than dropped: its <style> elements are kept (the rest of its
  // content is invisible or disallowed anyway).
  nonTextTags: INVISIBLE_TAGS.filter((tag) => tag !== "style" && tag !== "head"),
  transformTags: {
    body: "div",
    a: secureLink,
    img: (tag, attributes) => {
      const src = images.imageSource(attributes.src ?? "")
      return src === undefined
        ? { tagName: tag, attribs: {} } // becomes REMOVED_IMAGE, cut out afterwards
        : { tagName: tag, attribs: withoutAttribute({ ...attributes, src }, "srcset") }
    },
    // Styles and background images of any kept element.
    "*": (tag, attributes) => ({
      tagName: tag,
      attribs: ALLOWED_TAG_SET.has(tag) ? sanitizeElementImages(tag, attributes, images) : attributes
    })
  }
})

const sanitizeElementImages = (
  tag: string,
  attributes: sanitizeHtml.Attributes,
  images: ImagePolicy
): sanitizeHtml.Attributes => {
  let result = attributes
  // Only where the attribute is kept, so that the count matches what the output would load.
  if (attributes.background !== undefined && ALLOWED_ATTRIBUTES[tag]?.includes("background")) {
    result = withAttribute(result, "background", images.backgroundSource(attributes.background))
  }
  if (attributes.style !== undefined) {
    result = withAttribute(result, "style", sanitizeCss(attributes.style, images))
  }
  return result
}

/**
 * sanitize-html copies the text of an allowed <style> verbatim; here we sanitize it. In its
 * output a literal `<style` can only be a tag (text and attribute values have `<` escaped), and
 * the element's text cannot contain `</style`, so the pattern finds exactly the elements.
 */
const sanitizeStyleElements = (html: string, images: ImagePolicy): string =>
  html.replace(/<style\b([^>]*)>([\s\S]*?)<\/style>/gi, (_element, attributes: string, css: string) => {
    const safe = sanitizeCss(css, images)
    return safe === undefined || safe.trim() === "" ? "" : `<style${attributes}>${safe}</style>`
  })

// Text content, not an attribute value: quotes need no escape.
const escapeText = (text: string): string => text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;")

/**
 * The rendering of a mail whose HTML is past the limits: `text` (its text part, or what
 * `htmlTextWithoutParser` read) as preformatted text, nothing of the HTML itself. Safe as it
 * stands: every character of the text is escaped.
 */
export const textAsHtml = (text: string): string =>
  `<pre style="white-space: pre-wrap; overflow-wrap: anywhere; font-family: inherit">${escapeText(text)}</pre>`

/**
 * sanitize-html drops a style attribute that postcss cannot parse, which postcss tells by
 * throwing; it catches the error and never reads its stack. Capturing one for each broken style
 * doubled the time of a mail made of them (49,000: 0.9 s, 0.45 s without). The price: an error
 * of our own thrown while sanitizing comes without a stack.
 */
const withoutStackTraces = <A>(f: () => A): A => {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    return f()
  } finally {
    Error.stackTraceLimit = limit
  }
}

/**
 * Sanitized HTML of a mail, meant to be served in its own sandboxed document with a restrictive
 * CSP (defence in depth: this output is safe on its own).
 */
export const sanitizeEmailHtml = (html: CheckedHtml, options: SanitizeEmailOptions): SanitizedEmail => {
  const images = makeImagePolicy(options)
  const body = withoutStackTraces(() => sanitizeHtml(html, sanitizerOptions(images))).replaceAll(REMOVED_IMAGE, "")
  return { html: sanitizeStyleElements(body, images), remoteImageCount: images.remoteCount() }
}
