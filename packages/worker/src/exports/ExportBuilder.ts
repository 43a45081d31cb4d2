/**
 * The export engine (issue #33): builds each export due into a ZIP of its messages' raw `.eml`
 * files and `manifest.json`, streamed into the BlobStore, with flat memory: messages are read a
 * page at a time (at most `PageBytes` of mail), each written into the ZIP (zip-stream, STORE:
 * mail is mostly text already transfer-encoded, and the bytes stay the originals) and its output
 * taken at once, and the ZIP goes to the BlobStore a piece (`PieceBytes`) at a time.
 *
 * Restart-safe: the export is held by a lease renewed with each page's progress; a worker that
 * stops gives it back (pending), one that dies lets the lease lapse, and the next claim starts it
 * again from scratch (the earlier attempt's bytes deleted). After `ExportAttempts` tries it fails.
 */
import { createHash } from "node:crypto"
import { emlFileName, type ExportManifest, type ManifestMessage } from "@burnbox/domain"
import { BlobStore, type ClaimedExport, Exports } from "@burnbox/store"
import { Cause, Effect, Exit, Fiber, Option } from "effect"
import ZipStream from "zip-stream"

/** Messages read per page, and the most mail bytes a page holds (a bigger message comes alone). */
const PageMessages = 500
const PageBytes = 8 * 1024 * 1024
/** The ZIP goes to the BlobStore in pieces of this size. */
const PieceBytes = 4 * 1024 * 1024

/** How one export went. */
export type BuildOutcome = "ready" | "failed" | "released"

/**
 * A ZIP written synchronously: zip-stream writes a stored entry into its output during `entry`,
 * and everything written is taken at once (`take`), so nothing piles up inside it.
 */
const openZip = () => {
  // A readable buffer above the largest entry, so zip-stream never defers a write behind it.
  const zip = new ZipStream({ store: true, highWaterMark: 64 * 1024 * 1024 })
  let failure: Error | undefined
  zip.on("error", (error: Error) => {
    failure = error
  })
  const take = (): Array<Buffer> => {
    const out: Array<Buffer> = []
    for (let chunk: Buffer | null; (chunk = zip.read() as Buffer | null) !== null;) out.push(chunk)
    if (failure !== undefined) throw failure
    return out
  }
  const add = (name: string, bytes: Buffer, date: Date) => {
    let written = false
    zip.entry(bytes, { name, date, store: true }, (error) => {
      if (error) failure = error
      written = true
    })
    if (!written && failure === undefined) failure = new Error(`zip entry ${name} was not written at once`)
    return take()
  }
  const finish = () =>
    Effect.callback<Array<Buffer>, Error>((resume) => {
      const out: Array<Buffer> = []
      zip.on("data", (chunk: Buffer) => out.push(chunk))
      zip.on("end", () => resume(failure === undefined ? Effect.succeed(out) : Effect.fail(failure)))
      zip.on("error", (error: Error) => resume(Effect.fail(error)))
      out.push(...take())
      zip.finalize()
    })
  return { add, take, finish }
}

/** Builds one claimed export. */
const buildOne = (claimed: ClaimedExport) =>
  Effect.gen(function*() {
    const exports = yield* Exports
    const blobs = yield* BlobStore
    if (claimed.staleArchive !== null) yield* blobs.removeArchive(claimed.staleArchive)
    const archive = yield* blobs.createArchive
    const { total, upTo } = yield* exports.begin(claimed, archive)

    const hash = createHash("sha256")
    let written = 0
    let pending: Array<Buffer> = []
    let pendingBytes = 0
    // One piece is stored while the next is made (reading mail and storing the ZIP overlap in
    // the database); at most one write is in flight, so pieces land in order.
    let writing: Fiber.Fiber<void> | undefined
    const settle = Effect.suspend(() => (writing === undefined ? Effect.void : Fiber.join(writing)))
    const flush = Effect.gen(function*() {
      if (pendingBytes === 0) return
      const piece = pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingBytes)
      const at = written
      written += pendingBytes
      pending = []
      pendingBytes = 0
      yield* settle
      writing = yield* Effect.forkChild(blobs.writeArchive(archive, at, piece))
    })
    const output = (chunks: ReadonlyArray<Buffer>) =>
      Effect.gen(function*() {
        for (const chunk of chunks) {
          hash.update(chunk)
          pending.push(chunk)
          pendingBytes += chunk.byteLength
        }
        if (pendingBytes >= PieceBytes) yield* flush
      })

    const zip = openZip()
    const manifest: Array<ManifestMessage> = []
    let bytes = 0
    let after = 0
    for (;;) {
      const page = yield* exports.messages(claimed, after, upTo, PageMessages)
      if (page.length === 0) break
      // Bytes in slices of at most PageBytes, so a page of big mail is never held at once.
      for (let i = 0; i < page.length;) {
        const slice = [page[i]!]
        let sliceBytes = page[i]!.size
        for (i++; i < page.length && sliceBytes + page[i]!.size <= PageBytes; i++) {
          slice.push(page[i]!)
          sliceBytes += page[i]!.size
        }
        const raws = yield* blobs.readRaws(slice.map((m) => m.id))
        for (const message of slice) {
          const raw = raws.get(message.id)
          // Destroyed since the page was read: left out.
          if (raw === undefined) continue
          const eml = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength)
          const file = emlFileName(message.id)
          yield* output(zip.add(file, eml, message.receivedAt))
          bytes += eml.byteLength
          manifest.push({
            id: message.id,
            alias: message.alias,
            from: message.from,
            subject: message.subject,
            receivedAt: message.receivedAt.toISOString(),
            size: eml.byteLength,
            sha256: createHash("sha256").update(eml).digest("hex"),
            file
          })
        }
        // Progress renews the lease; a false answer means the export is not ours to finish (the plan held it, or it lapsed).
        if (!(yield* exports.progress(claimed, manifest.length))) return "released" as const
      }
      after = page[page.length - 1]!.id
    }
    const exportedAt = yield* Effect.map(Effect.clockWith((clock) => clock.currentTimeMillis), (ms) => new Date(ms))
    const document: ExportManifest = {
      exportId: claimed.id,
      alias: claimed.alias,
      exportedAt: exportedAt.toISOString(),
      counts: { messages: manifest.length, bytes },
      messages: manifest
    }
    yield* output(zip.add("manifest.json", Buffer.from(JSON.stringify(document, null, 2)), exportedAt))
    yield* output(yield* zip.finish())
    yield* flush
    yield* settle
    yield* Effect.logDebug(`export ${claimed.id}: ${manifest.length} of ${total} messages, ${written} bytes`)
    yield* exports.finish(claimed, { size: written, sha256: hash.digest("hex") })
    return "ready" as const
  })

/**
 * Builds every export due, one after another (each job of the `exports` queue). A build that
 * cannot finish fails with a readable error; one interrupted (the worker stopping) is given back.
 */
export const buildExports = Effect.gen(function*() {
  const exports = yield* Exports
  const outcomes: Array<BuildOutcome> = []
  for (;;) {
    const next = yield* exports.claim
    if (Option.isNone(next)) return outcomes
    const claimed = next.value
    const exit = yield* Effect.exit(Effect.onInterrupt(buildOne(claimed), () => exports.release(claimed)))
    if (Exit.isSuccess(exit)) {
      if (exit.value === "released") yield* exports.release(claimed)
      outcomes.push(exit.value)
    } else if (Cause.hasInterruptsOnly(exit.cause)) {
      return yield* Effect.interrupt
    } else {
      yield* Effect.logError(`export ${claimed.id} failed`, exit.cause)
      yield* exports.fail(claimed, "The export could not be built; request a new one.")
      outcomes.push("failed")
    }
  }
}).pipe(Effect.withSpan("ExportBuilder.buildExports"))

/** The `exports-sweep` job: expire past their window, fail the exhausted, and build what is due (a lost wake-up, a lapsed lease). */
export const sweepExports = Effect.gen(function*() {
  const exports = yield* Exports
  const swept = yield* exports.sweep
  const built = swept.due > 0 ? yield* buildExports : []
  return { ...swept, built: built.length }
})
