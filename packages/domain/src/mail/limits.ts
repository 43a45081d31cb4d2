/**
 * Limits on the HTML of received mail (issue #15): how deep it nests, how many elements and
 * attributes it holds. Real mail stays far below them; past them the sanitizer's parser is no
 * longer cheap. htmlparser2 keeps its open elements in an array it `unshift`s onto, so every
 * element costs as much as the nesting around it: 10,000 nested `<b>` took 0.6 s to sanitize,
 * 300,000 took 61 s, 1,000,000 unclosed tags never finished. HTML past a limit is never walked
 * with the parser: its rendering and text are made without one (sanitize.ts, `readerText` and
 * `textAsHtml`).
 *
 * The check runs the same parser, with the options sanitize-html gives it, so it counts
 * exactly what the sanitizer will meet (implied closes, void elements, foreign content), and
 * stops at the first limit passed: until then the nesting is bounded, so each element costs at
 * most `HtmlMaxDepth` steps and the whole check stays linear in the input.
 *
 * The limits are chosen so that the worst HTML within them stays cheap: `bench:html-limits`
 * builds the costliest shapes just within each limit (50,000 elements 511 deep, each with a
 * style postcss cannot parse, or a remote image, or a link; 2 MB of styles; 15 MB of text)
 * and times them in a mail thread. On 2 cores busy with other benchmarks: sanitizing took at
 * most 0.65 s, the whole analysis at most 0.8 s, the check itself at most 0.15 s, the heap at
 * most 185 MiB of the thread's 256.
 */
import { Parser } from "htmlparser2"

/** Open elements at once. Real mail nests 20 to 40 deep; layout tables of old templates ~100. */
export const HtmlMaxDepth = 512
/** Start tags in all (void elements included). A long newsletter holds 2,000 to 10,000. */
export const HtmlMaxElements = 50_000
/**
 * End tags in all, matched or not: the parser looks for each one among the open elements, so
 * stray ones at full depth cost as much as elements (3.5 million `</x>` inside 511 open
 * elements took 1.5 s).
 */
export const HtmlMaxEndTags = 50_000
/**
 * Pieces of text the parser hands over: a run between two tags, each character reference
 * (`&amp;`, `&#1087;`) and each `<` that starts no tag. Each costs the walks and the sanitizer
 * a callback, and millions of them more than linear time (4,000,000 `<` took 7 s to walk).
 */
export const HtmlMaxTextPieces = 100_000
/** Attributes of one element, repeated names included (the sanitizer copies an element's attributes several times). */
export const HtmlMaxElementAttributes = 256
/** Attributes in all. */
export const HtmlMaxAttributes = 100_000
/**
 * Characters of `style` attributes in all: the sanitizer parses each one as CSS, the costliest
 * work per character it does (14 MB of them took 0.8 s). Real mail inlines 10 to 100 KB.
 */
export const HtmlMaxStyleChars = 2_000_000

/**
 * HTML a request may still read on the main thread, at most, in characters: rows stored before
 * the pipeline's threads made everything a request serves (migration 0018) have only their
 * original HTML. A walk over 64 KiB within the limits takes milliseconds.
 */
export const RequestTimeHtmlMaxChars = 64 * 1024

/** The limit an HTML passed. */
export type HtmlLimit = "depth" | "elements" | "end_tags" | "text_pieces" | "element_attributes" | "attributes" | "style_chars"

declare const withinLimits: unique symbol
/** HTML that `checkHtmlLimits` found within the limits: the only HTML the sanitizer and the walks over it take. */
export type CheckedHtml = string & { readonly [withinLimits]: true }

export type HtmlLimitCheck =
  | { readonly ok: true; readonly html: CheckedHtml }
  | {
    readonly ok: false
    readonly html: string
    readonly limit: HtmlLimit
    /** For people: which limit, e.g. "nested deeper than 512 elements". */
    readonly detail: string
  }

const details: Readonly<Record<HtmlLimit, string>> = {
  depth: `nested deeper than ${HtmlMaxDepth} elements`,
  elements: `more than ${HtmlMaxElements} elements`,
  end_tags: `more than ${HtmlMaxEndTags} end tags`,
  text_pieces: `text in more than ${HtmlMaxTextPieces} pieces`,
  element_attributes: `an element with more than ${HtmlMaxElementAttributes} attributes`,
  attributes: `more than ${HtmlMaxAttributes} attributes`,
  style_chars: `more than ${HtmlMaxStyleChars} characters of style attributes`
}

/** Thrown from the parser's callbacks to stop it at the first limit passed. */
class LimitPassed {
  readonly limit: HtmlLimit
  constructor(limit: HtmlLimit) {
    this.limit = limit
  }
}

const pass = (limit: HtmlLimit): never => {
  throw new LimitPassed(limit)
}

/**
 * The parser, counting as it reads. It reports only the tags that open or close something (not
 * a second `<form>`, not a stray end tag) but looks each one up among the open elements, so
 * tags and text are counted as read; the nesting is counted from what it reports: every
 * element it opens is closed again (a void one at once, implied and unclosed ones when they end).
 */
class CountingParser extends Parser {
  private startTags = 0
  private endTags = 0
  private textPieces = 0
  private depth = 0
  private attributes = 0
  private elementAttributes = 0
  private styleChars = 0

  constructor() {
    super({
      onopentagname: (name) => {
        if (!this.isVoidElement(name) && ++this.depth > HtmlMaxDepth) pass("depth")
      },
      onclosetag: (name) => {
        if (!this.isVoidElement(name)) this.depth--
      },
      onattribute: (name, value) => {
        if (++this.elementAttributes > HtmlMaxElementAttributes) pass("element_attributes")
        if (++this.attributes > HtmlMaxAttributes) pass("attributes")
        if (name === "style" && (this.styleChars += value.length) > HtmlMaxStyleChars) pass("style_chars")
      }
      // sanitize-html's options for the parser.
    }, { decodeEntities: true })
  }

  override onopentagname(start: number, endIndex: number): void {
    if (++this.startTags > HtmlMaxElements) pass("elements")
    this.elementAttributes = 0
    super.onopentagname(start, endIndex)
  }

  override onclosetag(start: number, endIndex: number): void {
    if (++this.endTags > HtmlMaxEndTags) pass("end_tags")
    super.onclosetag(start, endIndex)
  }

  override ontext(start: number, endIndex: number): void {
    if (++this.textPieces > HtmlMaxTextPieces) pass("text_pieces")
    super.ontext(start, endIndex)
  }

  override ontextentity(codePoint: number, endIndex: number): void {
    if (++this.textPieces > HtmlMaxTextPieces) pass("text_pieces")
    super.ontextentity(codePoint, endIndex)
  }
}

/** Whether `html` is within every limit; linear in its length, whatever it holds. */
export const checkHtmlLimits = (html: string): HtmlLimitCheck => {
  try {
    new CountingParser().end(html)
  } catch (error) {
    if (error instanceof LimitPassed) return { ok: false, html, limit: error.limit, detail: details[error.limit] }
    throw error
  }
  return { ok: true, html: html as CheckedHtml }
}

/** `html` when a request may read it on the main thread: small (RequestTimeHtmlMaxChars) and within the limits. */
export const smallCheckedHtml = (html: string): CheckedHtml | undefined => {
  if (html.length > RequestTimeHtmlMaxChars) return undefined
  const checked = checkHtmlLimits(html)
  return checked.ok ? checked.html : undefined
}
