/**
 * Mailbox exports in @burnbox/client (spec 4.7, issue #33): request one, read its state and
 * progress, wait until it is ready (or failed), and download its ZIP as a stream, from any
 * offset (a broken download resumes with a range request).
 */
import { Clock, Effect, Stream } from "effect"
import { type HttpClient, HttpClientRequest } from "effect/http"
import type * as Exports from "@burnbox/domain/exports/Export"
import { parseProgress } from "@burnbox/domain/exports/Export"
import { BurnboxProblem, problems } from "./BurnboxProblem.ts"
import type { RawClient } from "./BurnboxClient.ts"

export type QueuedExport = Exports.QueuedExport
export type ExportDetail = Exports.ExportDetail
export type ExportProgress = Exports.ExportProgress

/** An export as GET /exports/{id} answers it, with how far it is (messages done of total). */
export interface ExportState {
  readonly export: ExportDetail
  readonly progress: ExportProgress
}

export interface WaitForExportOptions {
  /** Seconds to wait in all (default 600). */
  readonly timeout?: number | undefined
  /** Seconds between reads (default 1). */
  readonly interval?: number | undefined
  /** Called with each state read, e.g. to draw a progress bar. */
  readonly onProgress?: ((state: ExportState) => void) | undefined
}

/** A download under way: the ZIP's whole size, where this response starts, and its bytes from there. */
export interface ExportDownload {
  readonly size: number
  readonly offset: number
  readonly bytes: Stream.Stream<Uint8Array, BurnboxProblem>
}

export interface ExportsShape {
  /** Queues an export of every mailbox the token reads, or of one (`alias`: id). */
  readonly create: (options?: { readonly aliasId?: number | undefined }) => Effect.Effect<QueuedExport, BurnboxProblem>
  readonly get: (id: number) => Effect.Effect<ExportState, BurnboxProblem>
  /** The export once ready; fails with code `export_failed` (its `error`) or `export_expired`, or `timeout`. */
  readonly wait: (id: number, options?: WaitForExportOptions) => Effect.Effect<ExportDetail, BurnboxProblem>
  /** The ZIP's bytes from `offset` (default 0), as a range request when not 0. */
  readonly download: (id: number, options?: { readonly offset?: number | undefined }) => Effect.Effect<ExportDownload, BurnboxProblem>
}

/** The exports conveniences over the derived client and the (token-carrying) HTTP client at `origin`. */
export const makeExports = (raw: RawClient, http: HttpClient.HttpClient, origin: string): ExportsShape => {
  const get = Effect.fn("BurnboxClient.exports.get")(function*(id: number) {
    const [detail, response] = yield* problems(raw.exports.get({ params: { id }, responseMode: "decoded-and-response" }))
    return { export: detail, progress: parseProgress(response.headers["export-progress"]) ?? { done: 0, total: null } }
  })

  const wait = Effect.fn("BurnboxClient.exports.wait")(function*(id: number, options: WaitForExportOptions = {}) {
    const deadline = (yield* Clock.currentTimeMillis) + (options.timeout ?? 600) * 1000
    for (;;) {
      const state = yield* get(id)
      options.onProgress?.(state)
      const { status, error } = state.export
      if (status === "ready") return state.export
      if (status === "failed") return yield* new BurnboxProblem({ status: 0, code: "export_failed", message: error ?? "The export failed." })
      if (status === "expired") return yield* new BurnboxProblem({ status: 0, code: "export_expired", message: `Export ${id} has expired.` })
      if ((yield* Clock.currentTimeMillis) >= deadline) return yield* BurnboxProblem.timeout(`Export ${id} was still ${status} after ${options.timeout ?? 600} s.`)
      yield* Effect.sleep((options.interval ?? 1) * 1000)
    }
  })

  const download = Effect.fn("BurnboxClient.exports.download")(function*(id: number, options: { readonly offset?: number | undefined } = {}) {
    const offset = options.offset ?? 0
    let request = HttpClientRequest.get(`${origin}/api/v1/exports/${id}/download`)
    if (offset > 0) request = HttpClientRequest.setHeader(request, "range", `bytes=${offset}-`)
    const response = yield* problems(http.execute(request))
    if (response.status !== 200 && response.status !== 206) {
      const body = yield* problems(response.json)
      const error = (body as { error?: { code?: string; message?: string } }).error
      return yield* new BurnboxProblem({ status: response.status, code: error?.code ?? "unexpected_response", message: error?.message ?? `HTTP ${response.status}` })
    }
    const range = /^bytes (\d+)-\d+\/(\d+)$/.exec(response.headers["content-range"] ?? "")
    const size = range === null ? Number(response.headers["content-length"]) : Number(range[2])
    return {
      size,
      offset: range === null ? 0 : Number(range[1]),
      bytes: Stream.catch(response.stream, (error) => Stream.fromEffect(problems(Effect.fail(error))))
    } satisfies ExportDownload
  })

  return {
    create: (options = {}) =>
      problems(raw.exports.create({ payload: options.aliasId === undefined ? {} : { aliasId: options.aliasId } })).pipe(Effect.withSpan("BurnboxClient.exports.create")),
    get,
    wait,
    download
  }
}
