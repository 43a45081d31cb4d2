/**
 * `burnbox start`'s SMTP ingest and worker, run on a thread of their own (IngestWorkerThread.ts)
 * at a lower OS priority, beside the HTTP API on the main thread (#36 item 3). In one event loop,
 * every read waited behind the SMTP sessions', the group commits' and the pipeline's callbacks,
 * and competed with them for the CPU on equal terms; on their own thread, at nice 10, they take
 * the CPU the API leaves, and each side has its own connection pool. One process still: one pid,
 * one data dir lock, one banner, one stop.
 */
import { Worker } from "node:worker_threads"
import { DatabaseUrl, MigratedDatabase, StartupFailure } from "@burnbox/store"
import { Effect, Layer, Redacted } from "effect"

export interface IngestWorkerOptions {
  readonly databaseUrl: string
  /** the thread's nice value (Linux); its mail threads inherit it */
  readonly nice: number
  /** its connection pool */
  readonly maxConnections: number
}

export type FromIngestWorker =
  | { readonly type: "ready" }
  | { readonly type: "failed"; readonly line: string }
  | { readonly type: "stopped" }

const entry = new URL("./IngestWorkerThread.ts", import.meta.url)

/** A stop lets SMTP sessions finish (up to 5 s), then the worker and the pool close. */
const StopTimeoutMs = 20_000

const what = "the SMTP ingest and the worker"

/** Waits for the thread's `ready`; fails with its one line when it cannot start. */
const start = (options: IngestWorkerOptions) =>
  Effect.callback<Worker, StartupFailure>((resume) => {
    const worker = new Worker(entry, { name: "burnbox-ingest-worker", workerData: options })
    const refuse = (line: string) => resume(Effect.fail(new StartupFailure({ message: line })))
    worker.on("message", (message: FromIngestWorker) => {
      if (message.type === "ready") resume(Effect.succeed(worker))
      else if (message.type === "failed") refuse(message.line)
    })
    worker.once("error", (error) => refuse(`${what} failed to start: ${error.stack ?? error.message}`))
    worker.once("exit", (code) => refuse(`${what} exited (code ${code}) while starting`))
    return Effect.promise(() => worker.terminate())
  })

/**
 * After the start, a thread that ends on its own (a defect in a role) ends the program as it
 * would have in one event loop: its line on stderr, a planned stop of the rest, exit code 1.
 */
const watch = (worker: Worker, state: { stopping: boolean }) => {
  const ended = (line: string) => {
    if (state.stopping) return
    state.stopping = true
    process.stderr.write(`burnbox: ${what} stopped: ${line}\n`)
    process.exitCode = 1
    process.kill(process.pid, "SIGTERM")
  }
  worker.on("message", (message: FromIngestWorker) => {
    if (message.type === "failed") ended(message.line)
  })
  worker.on("error", (error) => ended(error.stack ?? error.message))
  worker.on("exit", (code) => ended(`the thread exited (code ${code})`))
}

/** Sends `stop` and waits for `stopped` (or the thread's end); past StopTimeoutMs the thread is terminated. */
const stop = (worker: Worker, state: { stopping: boolean }) =>
  Effect.promise(() =>
    new Promise<void>((done) => {
      state.stopping = true
      const timer = setTimeout(() => void worker.terminate().finally(done), StopTimeoutMs)
      const finish = () => {
        clearTimeout(timer)
        void worker.terminate().finally(done)
      }
      worker.on("message", (message: FromIngestWorker) => message.type === "stopped" && finish())
      worker.once("exit", finish)
      worker.postMessage("stop")
    })
  )

/** The ingest and the worker on their thread, on the main thread's migrated database, for as long as the layer's scope. */
export const IngestWorkerThread = (options: { readonly nice: number; readonly maxConnections: number }) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const url = yield* DatabaseUrl
    yield* MigratedDatabase
    const state = { stopping: false }
    yield* Effect.acquireRelease(
      start({ databaseUrl: Redacted.value(url), nice: options.nice, maxConnections: options.maxConnections }).pipe(
        Effect.tap((worker) => Effect.sync(() => watch(worker, state)))
      ),
      (worker) => stop(worker, state)
    )
  }))
