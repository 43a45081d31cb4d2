/**
 * `burnbox export [--alias ADDRESS] --out FILE [--timeout S] [--json]` (issue #33): requests a
 * mailbox export through the API (BURNBOX_URL, BURNBOX_TOKEN), follows its progress (a bar on a
 * terminal, JSON lines with --json), downloads the ZIP (resuming a broken download with a range
 * request), and checks every .eml against the SHA-256 its manifest.json gives.
 */
import { createHash } from "node:crypto"
import { createWriteStream } from "node:fs"
import { rename, rm, stat } from "node:fs/promises"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import type { ReadableStream as WebReadableStream } from "node:stream/web"
import type { ExportState } from "@burnbox/client"
import { Effect } from "effect"
import yauzl from "yauzl"
import { type Args, flag } from "./Args.ts"
import { call, connect, ExitCode, positiveSeconds, RemoteFailure, usageError } from "./Remote.ts"

/** Tries of a download that breaks off, each resuming where the file ends. */
const DownloadTries = 5

interface Manifest {
  readonly counts: { readonly messages: number; readonly bytes: number }
  readonly messages: ReadonlyArray<{ readonly id: number; readonly file: string; readonly sha256: string; readonly size: number }>
}

/** Reads the ZIP at `path`: its manifest, and the SHA-256 and size of every other entry. */
const readArchive = (path: string) =>
  new Promise<{ manifest: Manifest; files: Map<string, { sha256: string; size: number }> }>((resolve, reject) => {
    yauzl.open(path, { lazyEntries: true, validateEntrySizes: true }, (error, zip) => {
      if (error) return reject(error)
      const files = new Map<string, { sha256: string; size: number }>()
      let manifest: Manifest | undefined
      zip.on("error", reject)
      zip.on("end", () => (manifest === undefined ? reject(new Error("the archive holds no manifest.json")) : resolve({ manifest, files })))
      zip.on("entry", (entry: yauzl.Entry) =>
        zip.openReadStream(entry, (openError, stream) => {
          if (openError) return reject(openError)
          const hash = createHash("sha256")
          const chunks: Array<Buffer> = []
          let size = 0
          stream.on("data", (chunk: Buffer) => {
            size += chunk.byteLength
            if (entry.fileName === "manifest.json") chunks.push(chunk)
            else hash.update(chunk)
          })
          stream.on("error", reject)
          stream.on("end", () => {
            if (entry.fileName === "manifest.json") manifest = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Manifest
            else files.set(entry.fileName, { sha256: hash.digest("hex"), size })
            zip.readEntry()
          })
        }))
      zip.readEntry()
    })
  })

/** The checks of a downloaded export: every message of the manifest present with its hash, nothing else. */
export const verifyArchive = async (path: string) => {
  const { manifest, files } = await readArchive(path)
  const problems: Array<string> = []
  for (const message of manifest.messages) {
    const file = files.get(message.file)
    if (file === undefined) problems.push(`${message.file} is missing`)
    else if (file.sha256 !== message.sha256 || file.size !== message.size) problems.push(`${message.file} does not match its SHA-256`)
  }
  if (files.size !== manifest.messages.length) problems.push(`the archive holds ${files.size} files for ${manifest.messages.length} messages`)
  return { messages: manifest.messages.length, bytes: manifest.counts.bytes, problems }
}

const bar = (state: ExportState) => {
  const { done, total } = state.progress
  const width = 30
  const filled = total === null || total === 0 ? 0 : Math.round((done / total) * width)
  return `export ${state.export.id} ${state.export.status.padEnd(10)} [${"#".repeat(filled)}${" ".repeat(width - filled)}] ${done}/${total ?? "?"} messages`
}

export const exportCommand = (args: Args) =>
  Effect.gen(function*() {
    const out = flag(args, "out")
    if (out === undefined || out === "") throw usageError("--out FILE is required, e.g. burnbox export --out mailbox.zip")
    const address = flag(args, "alias")
    const timeout = positiveSeconds(args, "timeout", 3600)
    const json = args.flags.has("json")
    const tty = !json && process.stderr.isTTY === true
    const line = (event: Record<string, unknown>) => json && process.stdout.write(`${JSON.stringify(event)}\n`)
    const client = connect()

    let aliasId: number | undefined
    if (address !== undefined) {
      const alias = yield* call(() => client.aliases.find(address))
      if (alias === undefined) throw new RemoteFailure(ExitCode.notFound, "not_found", `no alias ${address} in this account`)
      aliasId = alias.id
    }
    const queued = yield* call(() => client.exports.create({ aliasId }))
    line({ event: "queued", id: queued.id, status: queued.status, alias: queued.alias })
    let last = ""
    const ready = yield* call(() =>
      client.exports.wait(queued.id, {
        timeout,
        onProgress: (state) => {
          const now = `${state.export.status} ${state.progress.done}/${state.progress.total}`
          if (now === last) return
          last = now
          line({ event: "progress", id: state.export.id, status: state.export.status, done: state.progress.done, total: state.progress.total })
          if (tty) process.stderr.write(`\r${bar(state)}`)
        }
      })
    )
    if (tty) process.stderr.write("\n")

    // Downloaded into FILE.part, resumed from its length after a break, renamed once whole.
    const part = `${out}.part`
    yield* Effect.promise(() => rm(part, { force: true }))
    let size = 0
    for (let attempt = 1; ; attempt++) {
      const offset = yield* Effect.promise(() => stat(part).then((s) => s.size, () => 0))
      if (attempt > 1 && offset >= size) break
      const result = yield* Effect.result(call(async () => {
        const download = await client.exports.download(ready.id, { offset })
        size = download.size
        line({ event: "download", id: ready.id, offset: download.offset, size: download.size })
        await pipeline(Readable.fromWeb(download.body as WebReadableStream<Uint8Array>), createWriteStream(part, { flags: download.offset > 0 ? "a" : "w" }))
      }))
      if (result._tag === "Success") {
        const written = yield* Effect.promise(() => stat(part).then((s) => s.size))
        if (written >= size) break
      }
      if (attempt >= DownloadTries) {
        if (result._tag === "Failure") return yield* Effect.fail(result.failure)
        throw new RemoteFailure(ExitCode.api, "download_incomplete", `the download of export ${ready.id} broke off ${DownloadTries} times`)
      }
    }
    yield* Effect.promise(() => rename(part, out))

    const check = yield* Effect.promise(() => verifyArchive(out))
    if (check.problems.length > 0) {
      throw new RemoteFailure(ExitCode.corrupt, "hash_mismatch", `${out} does not match its manifest: ${check.problems.slice(0, 3).join("; ")}`)
    }
    const done = { event: "done", id: ready.id, file: out, size, messages: check.messages, verified: true }
    return json ? JSON.stringify(done) : `export ${ready.id}: ${check.messages} messages, ${size} bytes, hashes checked -> ${out}`
  })
