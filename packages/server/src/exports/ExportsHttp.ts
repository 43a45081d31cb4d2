import { BurnboxApi, CurrentPrincipal, ExportProgressHeader, formatProgress } from "@burnbox/domain"
import { BlobStore, BurnboxConfig, Exports } from "@burnbox/store"
import { Effect, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { addResponseHeaders } from "../platform/Authentication.ts"
import { withProblems } from "../platform/ProblemMapping.ts"

/** A download is read from the BlobStore and sent in pieces of this size. */
const DownloadPieceBytes = 1024 * 1024

/**
 * The part of `size` bytes a `Range` header asks for (RFC 9110 14.1.2): one range, `bytes=a-b`,
 * `bytes=a-` or `bytes=-n`. Undefined for no header or one this server does not take (several
 * ranges, another unit: the whole body is sent); "unsatisfiable" for a range outside the body.
 */
export const byteRange = (header: string | undefined, size: number): { readonly start: number; readonly end: number } | "unsatisfiable" | undefined => {
  const match = /^bytes=(\d*)-(\d*)$/.exec(header?.trim() ?? "")
  if (match === null) return undefined
  const [, first = "", last = ""] = match
  if (first === "" && last === "") return undefined
  if (first === "") {
    const suffix = Number(last)
    if (suffix === 0 || size === 0) return "unsatisfiable"
    return { start: Math.max(0, size - suffix), end: size - 1 }
  }
  const start = Number(first)
  if (start >= size) return "unsatisfiable"
  const end = last === "" ? size - 1 : Math.min(Number(last), size - 1)
  return end < start ? undefined : { start, end }
}

/** Spec 4.7: exports (Pro only). */
export const ExportsHttp = HttpApiBuilder.group(BurnboxApi, "exports", Effect.fn(function*(handlers) {
  const exports = yield* Exports
  const blobs = yield* BlobStore
  const config = yield* BurnboxConfig

  /** The bytes `start..end` (inclusive) of an archive, read a piece at a time as the client takes them. */
  const bytesOf = (oid: number, start: number, end: number) =>
    Stream.unfold(start, (offset) =>
      offset > end
        ? Effect.succeed(undefined)
        : Effect.map(blobs.readArchive(oid, offset, Math.min(DownloadPieceBytes, end - offset + 1)), (piece) => [piece, offset + piece.byteLength] as const))

  return handlers
    .handle("list", () => withProblems(Effect.flatMap(CurrentPrincipal, (p) => Effect.map(exports.list(p.accountId), (items) => ({ items })))))
    .handle("create", ({ payload }) =>
      withProblems(Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const queued = yield* exports.create(principal.accountId, payload?.aliasId ?? null)
        yield* addResponseHeaders({ location: `${config.baseUrl}/exports/${queued.id}` })
        return queued
      })))
    .handle("get", ({ params }) =>
      withProblems(Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const { detail, progress } = yield* exports.detail(principal.accountId, params.id, config.baseUrl)
        yield* addResponseHeaders({ [ExportProgressHeader]: formatProgress(progress), "cache-control": "no-store" })
        return detail
      })))
    .handle("download", ({ params }) =>
      withProblems(Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const archive = yield* exports.archive(principal.accountId, params.id)
        const request = yield* HttpServerRequest.HttpServerRequest
        const etag = `"${archive.sha256}"`
        const ifRange = request.headers["if-range"]
        const range = ifRange === undefined || ifRange === etag ? byteRange(request.headers["range"], archive.size) : undefined
        const headers = {
          "accept-ranges": "bytes",
          etag,
          "content-disposition": `attachment; filename="${archive.fileName}"`,
          "cache-control": "private, no-store",
          "x-content-type-options": "nosniff"
        }
        if (range === "unsatisfiable") {
          return HttpServerResponse.empty({ status: 416, headers: { ...headers, "content-range": `bytes */${archive.size}` } })
        }
        const { start, end } = range ?? { start: 0, end: archive.size - 1 }
        return HttpServerResponse.stream(bytesOf(archive.oid, start, end), {
          status: range === undefined ? 200 : 206,
          contentType: "application/zip",
          contentLength: end - start + 1,
          headers: range === undefined ? headers : { ...headers, "content-range": `bytes ${start}-${end}/${archive.size}` }
        })
      })))
}))
