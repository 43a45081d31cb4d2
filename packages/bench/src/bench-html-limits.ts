/**
 * The worst HTML within the limits (packages/domain/src/mail/limits.ts): how long the
 * pipeline's analysis of a message whose only body is that HTML takes in a mail thread, with
 * the pipeline's heap (256 MiB), and how long its parts take: the limit check, and the
 * sanitizing (remote images blocked) alone. The limits are right when every figure stays well
 * under the pipeline's 5 s allowance, and under one second.
 *
 * Usage: ./pnpmw bench:html-limits [shape ...]
 *
 * Each shape runs in a fresh worker thread, three times; the figures are the fastest run (the
 * machine may be busy) and the slowest. Every shape is checked to be within the limits, and just
 * one step more of it to be past them.
 */
import { availableParallelism, cpus, loadavg } from "node:os"
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads"
import {
  analyzeMessage,
  checkHtmlLimits,
  HtmlMaxAttributes,
  HtmlMaxDepth,
  HtmlMaxElementAttributes,
  HtmlMaxElements,
  HtmlMaxEndTags,
  HtmlMaxStyleChars,
  HtmlMaxTextPieces,
  type ParsedMessage,
  sanitizeEmailHtml
} from "@burnbox/domain/mail/index"

/** The message size cap: no HTML body is larger. */
const MaxBytes = 15 * 1024 * 1024
const open = (tag: string, n: number) => `<${tag}>`.repeat(n)
/** `count` copies of `unit(i)`, fewer if they would pass the size cap. */
const repeat = (count: number, unit: (i: number) => string, budget = MaxBytes - 64 * 1024) => {
  const parts: Array<string> = []
  let bytes = 0
  for (let i = 0; i < count; i++) {
    const part = unit(i)
    bytes += part.length
    if (bytes > budget) break
    parts.push(part)
  }
  return parts.join("")
}
/** Elements left once `depth` are open, and end tags left over. */
const room = (depth: number) => HtmlMaxElements - depth
const css = (i: number) => `color:#${(i % 0xffffff).toString(16).padStart(6, "0")};font-size:12px;padding:1px 2px;border:1px solid #ccc`
const longStyle = (i: number) => [0, 1, 2, 3].map((n) => css(i + n)).join(";")

/** Each shape, and the same shape one step further (which must be past a limit). */
const shapes: Record<string, (step: number) => string> = {
  "nested at full depth": (step) => `${open("b", HtmlMaxDepth + step)}deep 123456`,
  "elements at full depth": (step) => open("div", HtmlMaxDepth - 1) + repeat(room(HtmlMaxDepth - 1) + step, (i) => `<span>${i}</span>`),
  // Styles postcss cannot parse (a property without a value): it throws for each.
  "broken styles at full depth": (step) =>
    open("div", HtmlMaxDepth - 1) + repeat(room(HtmlMaxDepth - 1) + step, (i) => `<span style="color:red;padding" class="c${i}">x</span>`),
  "styled elements at full depth": (step) =>
    open("div", HtmlMaxDepth - 1) + repeat(room(HtmlMaxDepth - 1) + step, (i) => `<span style="${css(i).slice(0, 28)}" class="c${i}">x</span>`),
  "anchors at full depth": (step) =>
    open("div", HtmlMaxDepth - 1) + repeat(room(HtmlMaxDepth - 1) + step, (i) => `<a href="https://example.com/verify?token=${i}">Verify ${100000 + i}</a>`),
  "remote images at full depth": (step) =>
    open("div", HtmlMaxDepth - 1) +
    repeat(room(HtmlMaxDepth - 1) + step, (i) => `<img src="https://img.example/p${i}.gif" style="background:url(https://i.ex/${i})">`),
  "stray end tags at full depth": (step) => open("div", HtmlMaxDepth - 1) + repeat(room(HtmlMaxDepth - 1), () => "<br>") + "</x>".repeat(HtmlMaxEndTags + step),
  // Four pieces to an element: "a ", "&", " b ", "<".
  "text pieces at full depth": (step) =>
    open("div", HtmlMaxDepth - 1) + repeat(HtmlMaxTextPieces / 4, (i) => `<p>a &amp; b${i} &lt;</p>`) + "&amp;".repeat(step),
  "stray < at full depth": (step) => open("div", HtmlMaxDepth - 1) + "x < ".repeat(HtmlMaxTextPieces - 1 + step),
  "attributes, as many as allowed": (step) => {
    const names = ["style", "class", "width", "height", "align", "valign", "bgcolor", "title", "dir", "lang", "background"]
    const element = (i: number) => {
      const attributes = Array.from({ length: HtmlMaxElementAttributes }, (_, a) =>
        a < names.length ? `${names[a]}="${a === 0 ? css(i) : a === names.length - 1 ? `https://img.example/${i}` : "x"}"` : `data-a${a}="${a}"`)
      return `<td ${attributes.join(" ")}>${i}</td>`
    }
    const full = Math.floor(HtmlMaxAttributes / HtmlMaxElementAttributes)
    return `<table><tr>${repeat(full, element)}<td ${"a ".repeat(HtmlMaxAttributes - full * HtmlMaxElementAttributes + step)}>`
  },
  "15 MB of text at full depth": (step) =>
    open("div", HtmlMaxDepth - 1) + repeat(room(HtmlMaxDepth - 1) + step, (i) => `<p>${`word ${i} `.repeat(30).slice(0, 300)}</p>`, MaxBytes * (step > 0 ? 2 : 1)),
  "style attributes, as many characters as allowed, at full depth": (step) => {
    let chars = 0
    const elements: Array<string> = []
    for (let i = 0; chars + longStyle(i).length <= HtmlMaxStyleChars; i++) {
      elements.push(`<span style="${longStyle(i)}">x</span>`)
      chars += longStyle(i).length
    }
    return open("div", HtmlMaxDepth - 1) + elements.join("") + `<span style="${"x".repeat(HtmlMaxStyleChars - chars + step)}">x</span>`
  },
  "a 15 MB style sheet": (step) =>
    `<style>${repeat(1_000_000, (i) => `.c${i} { ${css(i)}; background: url(https://img.example/${i}.png) }\n`)}</style>` + "<br>".repeat(step * (HtmlMaxElements + 1)),
  "15 MB of inline images": (step) => {
    const image = `<img src="data:image/png;base64,${"iVBORw0KGgo".repeat(100_000)}" alt="inline">`
    return repeat(13 + step, () => image, MaxBytes * (step > 0 ? 2 : 1)) + (step > 0 ? "<br>".repeat(HtmlMaxElements) : "")
  },
  "svg integration point at full depth": (step) =>
    `<svg><foreignObject>${open("div", HtmlMaxDepth - 3)}` + repeat(room(HtmlMaxDepth - 1) + step, () => "<clippath></clippath>"),
  // Each <td> closes the cell before it (an implied end): the last table's cells stay at its depth.
  "nested tables": (step) => {
    const tables = Math.floor(HtmlMaxDepth / 3)
    return open("table><tr><td", tables) + repeat(room(HtmlMaxDepth), (i) => `<td>${i}</td>`) + open("b", HtmlMaxDepth - 3 * tables + step)
  }
}

const message = (html: string): ParsedMessage => ({
  headers: {},
  sender: { name: null, address: "sender@example.com" },
  to: [],
  subject: "",
  messageId: null,
  date: null,
  text: null,
  html,
  attachments: []
})

const time = <A>(f: () => A): [A, number] => {
  const started = performance.now()
  const result = f()
  return [result, performance.now() - started]
}

interface Figures {
  readonly shape: string
  readonly megabytes: number
  readonly past: string
  readonly checkMs: number
  readonly sanitizeMs: number
  readonly analyzeMs: number
  readonly heapMiB: number
}

if (!isMainThread) {
  const shape = workerData as string
  const build = shapes[shape]!
  const html = build(0)
  const past = checkHtmlLimits(build(1))
  const [checked, checkMs] = time(() => checkHtmlLimits(html))
  if (!checked.ok) throw new Error(`${shape}: within the limits, it should be; it is ${checked.detail}`)
  const [, sanitizeMs] = time(() => sanitizeEmailHtml(checked.html, { allowRemoteImages: false }))
  const [analysis, analyzeMs] = time(() => analyzeMessage(message(html)))
  if (analysis.htmlLimit !== null) throw new Error(`${shape}: analyzed as past the limits`)
  const figures: Figures = {
    shape,
    megabytes: html.length / 1e6,
    past: past.ok ? "NOT PAST A LIMIT" : past.limit,
    checkMs,
    sanitizeMs,
    analyzeMs,
    heapMiB: process.memoryUsage().heapUsed / 2 ** 20
  }
  parentPort!.postMessage(figures, [])
} else {
  const runs = 3
  const chosen = process.argv.slice(2)
  const names = chosen.length > 0 ? chosen : Object.keys(shapes)
  const inThread = (shape: string) =>
    new Promise<Figures>((resolve, reject) => {
      const worker = new Worker(new URL(import.meta.url), { workerData: shape, resourceLimits: { maxOldGenerationSizeMb: 256 } })
      worker.once("message", resolve)
      worker.once("error", reject)
    })
  console.log(
    `limits: depth ${HtmlMaxDepth}, elements ${HtmlMaxElements}, end tags ${HtmlMaxEndTags}, text pieces ${HtmlMaxTextPieces}, ` +
      `attributes ${HtmlMaxElementAttributes} per element and ${HtmlMaxAttributes} in all, style characters ${HtmlMaxStyleChars}`
  )
  console.log(`${cpus()[0]?.model ?? "?"} x${availableParallelism()}, load average ${loadavg().map((n) => n.toFixed(2)).join(" ")}; ${runs} runs each, fastest / slowest`)
  console.log("shape | MB | one step more | check ms | sanitize ms | whole analysis ms | heap MiB")
  for (const shape of names) {
    const all: Array<Figures> = []
    for (let run = 0; run < runs; run++) all.push(await inThread(shape))
    const range = (pick: (f: Figures) => number) =>
      `${Math.min(...all.map(pick)).toFixed(0)} / ${Math.max(...all.map(pick)).toFixed(0)}`
    const first = all[0]!
    console.log(
      `${shape} | ${first.megabytes.toFixed(2)} | ${first.past} | ${range((f) => f.checkMs)} | ${range((f) => f.sanitizeMs)} | ${range((f) => f.analyzeMs)} | ${range((f) => f.heapMiB)}`
    )
  }
}
