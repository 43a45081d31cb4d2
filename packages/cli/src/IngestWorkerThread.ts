/**
 * The entry of `burnbox start`'s ingest-and-worker thread (IngestWorker.ts starts it): the SMTP
 * ingest and the worker (pipeline, deliveries, scheduled jobs) on a thread of their own, with
 * their own store and connection pool, at a lower OS priority (Linux nice, per thread; the mail
 * threads it starts inherit it), so the main thread's event loop and CPU time stay with the HTTP
 * API while mail pours in (#36 item 3). It is `burnbox ingest` + `burnbox worker` on the main
 * thread's database (migrated, and its data dir held, by the main thread).
 *
 * To the main thread it says `ready` once its listener is open, `failed` with the one line a
 * failure is worded in, or `stopped` after a `stop` it was sent: its listener closed, SMTP
 * sessions finished, the worker stopped.
 */
import { readlinkSync } from "node:fs"
import { setPriority } from "node:os"
import { parentPort, workerData } from "node:worker_threads"
import { IngestLive } from "@burnbox/ingest"
import { BurnboxConfig, DatabaseUrl, MigratedDatabase, SqlLive, StoreLive } from "@burnbox/store"
import { WorkerLive } from "@burnbox/worker"
import { Effect, Exit, Fiber, Layer, Redacted } from "effect"
import { failureLine } from "./Failure.ts"
import type { FromIngestWorker, IngestWorkerOptions } from "./IngestWorker.ts"
import { withProgramLogging } from "./Logging.ts"

const port = parentPort
if (port === null) throw new Error("IngestWorkerThread.ts runs as a worker thread (new Worker), not as a program")
const options = workerData as IngestWorkerOptions
const post = (message: FromIngestWorker) => port.postMessage(message)

/** Lowers this thread's priority (Linux: the nice value of its kernel thread id); elsewhere nothing. */
const lowerPriority = (nice: number) => {
  try {
    setPriority(Number(readlinkSync("/proc/thread-self").split("/").pop()), nice)
  } catch {
    // not Linux, or not allowed: the thread runs at the process's priority
  }
}
lowerPriority(options.nice)

// Its PostgreSQL backends at the thread's priority too: the API's queries go first.
const database = SqlLive({ maxConnections: options.maxConnections, backendNice: options.nice }).pipe(
  Layer.provideMerge(Layer.succeed(DatabaseUrl, Redacted.make(options.databaseUrl))),
  // The main thread migrated the database before it started this thread.
  Layer.provideMerge(Layer.succeed(MigratedDatabase, { applied: [] }))
)

const program = Effect.scoped(Effect.gen(function*() {
  yield* Layer.build(Layer.mergeAll(IngestLive, WorkerLive).pipe(Layer.provide(StoreLive), Layer.provide(database)))
  post({ type: "ready" })
  return yield* Effect.never
})).pipe(Effect.provide(BurnboxConfig.layer), withProgramLogging)

let stopping = false
const fiber = Effect.runFork(program)
fiber.addObserver((exit) => {
  post(Exit.isFailure(exit) && !stopping ? { type: "failed", line: failureLine(exit.cause) } : { type: "stopped" })
  port.close()
})

port.on("message", (message: "stop") => {
  if (message !== "stop" || stopping) return
  stopping = true
  Effect.runFork(Fiber.interrupt(fiber))
})
