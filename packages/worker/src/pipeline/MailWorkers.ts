/**
 * MailWorkers: the pipeline's CPU-heavy work (MailWork.ts: parsing, analysis, the DKIM
 * verifier's reading) in a pool of worker threads, so no message, however built, holds the event
 * loop that answers HTTP and SMTP (issue #15: one 900 KB mail of nested `<b>` held it for 56 s).
 *
 * - **Sized to the cores**: `threads` tasks run at once. A task that has run `longAfterMs`
 *   (far longer than ordinary mail takes) steps aside onto one of `spareThreads` extra threads,
 *   when one is free, so a few slow messages do not hold up the ordinary ones behind them.
 * - **An allowance per message**: `timeoutMs` of wall time in its thread (from the moment the
 *   thread has it, not counting the wait for a thread) and a heap of `heapMb` per thread
 *   (`resourceLimits`). Past either the thread is ended and replaced, and the task fails with
 *   `MailTooComplex` ("took longer than 5 s", "out of memory"): the pipeline marks the message
 *   failed with that reason, its raw bytes kept.
 * - **Second to the main thread**: on Linux the threads run at a higher nice value, so on a
 *   machine whose cores are all busy the main thread (HTTP, SMTP) gets the CPU first.
 * - **Plain data across**: the raw bytes are transferred into the thread (copied once first
 *   only when they share their buffer), results come back as plain objects with the
 *   attachments' bytes transferred back; the DKIM verifier's key lookups are answered here from
 *   the `DnsResolver`.
 *
 * All `threads + spareThreads` threads are started with the layer (ready before it is built),
 * kept started (a thread ended for its allowance is replaced at once, in the background), and
 * ended when the layer's scope closes. Configured by BURNBOX_MAIL_WORK_TIMEOUT (a duration,
 * "5 seconds"), BURNBOX_MAIL_WORK_HEAP_MB, BURNBOX_MAIL_WORK_THREADS,
 * BURNBOX_MAIL_WORK_SPARE_THREADS and BURNBOX_MAIL_WORK_NICE.
 */
import { availableParallelism } from "node:os"
import { Worker } from "node:worker_threads"
import { Config, Context, Deferred, Duration, Effect, Exit, Layer, Option, Schema, Semaphore } from "effect"
import { DnsResolver } from "./MailAuth.ts"
import { type FromThread, type MailTask, type MailWorkResult, ownedBytes, type ThreadOptions, type ToThread } from "./MailWork.ts"

export interface MailWorkLimits {
  /** Tasks that run at once (one thread each): the cores. */
  readonly threads: number
  /** Extra threads for tasks that have run longer than `longAfterMs`, so they do not hold a core's place. */
  readonly spareThreads: number
  /** Wall time one message may take in its thread. */
  readonly timeoutMs: number
  /** V8 old-generation heap of one thread, MiB. */
  readonly heapMb: number
  /** After this long a task gives its place to the next one, onto a spare thread if one is free. */
  readonly longAfterMs: number
  /**
   * The threads' nice value (Linux: per thread; 0 keeps the process's): on a machine whose cores
   * are all busy the main thread, which answers HTTP and SMTP, gets the CPU first.
   */
  readonly nice: number
}

/**
 * 5 s is ~1000 times what ordinary mail takes in a thread (a few ms) and several times a 15 MB
 * message with attachments. 256 MiB of heap holds the largest accepted message several times
 * over (bench:bigmail: ~100 MiB for one 15 MB message in all); every hostile message of the tests
 * that needs more also needs far more than 5 s. With every thread full the heaps are bounded by
 * (threads + spareThreads) x heapMb.
 */
export const defaultMailWorkLimits = (): MailWorkLimits => ({
  threads: Math.max(2, availableParallelism()),
  spareThreads: 2,
  timeoutMs: 5_000,
  heapMb: 256,
  longAfterMs: 250,
  nice: 10
})

/** A message whose work went past its allowance; `reason` reads after "too_complex: ". */
export class MailTooComplex extends Schema.TaggedError<MailTooComplex>()("MailTooComplex", {
  reason: Schema.String
}) {}

const entry = new URL("./MailWorkThread.ts", import.meta.url)

const durationText = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`)

interface Thread {
  readonly worker: Worker
  /** The answer of the task it works on, settled by the thread's reply or by its end. */
  answer: Deferred.Deferred<MailWorkResult, MailTooComplex> | undefined
  /** It replied to its last task (with a result or an error): it can take another. */
  replied: boolean
  ended: boolean
}

const make = (limits: MailWorkLimits) =>
  Effect.gen(function*() {
    const resolve = yield* DnsResolver
    const scope = yield* Effect.scope
    const live = new Set<Thread>()
    const idle: Array<Thread> = []
    /** Set when the layer's scope closes: no thread is started any more. */
    let closing = false

    /** Starts a thread and waits until it has loaded its modules. */
    const spawn = Effect.callback<Thread>((resume) => {
      const options: ThreadOptions = { nice: limits.nice }
      const worker = new Worker(entry, { name: "burnbox-mail", workerData: options, resourceLimits: { maxOldGenerationSizeMb: limits.heapMb } })
      const thread: Thread = { worker, answer: undefined, replied: false, ended: false }
      live.add(thread)
      let ready = false
      let error: (Error & { code?: unknown }) | undefined
      const settle = (outcome: Effect.Effect<MailWorkResult, MailTooComplex>) => {
        const answer = thread.answer
        thread.answer = undefined
        if (answer !== undefined) Deferred.doneUnsafe(answer, outcome)
      }
      worker.on("message", (message: FromThread) => {
        switch (message.type) {
          case "ready":
            ready = true
            return resume(Effect.succeed(thread))
          case "done":
            thread.replied = true
            return settle(Effect.succeed(message.result))
          case "crashed":
            thread.replied = true
            return settle(Effect.die(new Error(`mail worker thread: ${message.message}`)))
          case "dns": {
            const reply = (answer: ToThread) => {
              if (!thread.ended) worker.postMessage(answer, [])
            }
            resolve(message.name, message.rrtype).then(
              (answer) => reply({ type: "dns", id: message.id, answer }),
              (failure: unknown) => {
                const code = (failure as { code?: unknown }).code
                reply({
                  type: "dns",
                  id: message.id,
                  error: { message: failure instanceof Error ? failure.message : String(failure), code: typeof code === "string" ? code : null }
                })
              }
            )
          }
        }
      })
      worker.on("error", (cause: Error) => {
        error = cause
      })
      worker.on("exit", () => {
        thread.ended = true
        thread.replied = false
        live.delete(thread)
        if (!ready) return resume(Effect.die(new Error(`mail worker thread did not start: ${error?.message ?? "it exited"}`)))
        settle(
          error?.code === "ERR_WORKER_OUT_OF_MEMORY"
            ? Effect.fail(new MailTooComplex({ reason: "out of memory" }))
            : Effect.die(new Error(`mail worker thread ended: ${error?.message ?? "it exited"}`))
        )
      })
      return Effect.promise(() => worker.terminate())
    })

    const end = (thread: Thread) =>
      thread.ended ? Effect.void : Effect.promise(() => thread.worker.terminate()).pipe(Effect.andThen(Effect.sync(() => live.delete(thread))), Effect.asVoid)

    // Every thread the pool may use is kept started, so no task waits for a thread to start
    // (~150 ms, longer on a busy machine) unless one is being replaced right then.
    const size = limits.threads + limits.spareThreads

    /** Back to the idle threads; ended if one too many was started while another was being replaced. */
    const giveBack = (thread: Thread) => {
      if (thread.ended) return Effect.void
      if (live.size > size) return end(thread)
      idle.push(thread)
      return Effect.void
    }

    /** Ends a thread that went past its allowance (or died of it), and starts its replacement in the background. */
    const replace = (thread: Thread) =>
      end(thread).pipe(
        Effect.andThen(Effect.suspend(() =>
          closing || live.size >= size ? Effect.void : Effect.forkIn(spawn.pipe(Effect.flatMap(giveBack)), scope)
        )),
        Effect.asVoid
      )

    /** An idle thread (one that died while idle is dropped), else a new one. */
    const acquire = Effect.suspend(() => {
      for (let thread = idle.pop(); thread !== undefined; thread = idle.pop()) if (!thread.ended) return Effect.succeed(thread)
      return spawn
    })

    const lanes = yield* Semaphore.make(limits.threads)
    const spares = yield* Semaphore.make(limits.spareThreads)

    const process = Effect.fn("MailWorkers.process")(function*(task: MailTask) {
      // The place this task holds: a lane (one per core) or, once it has run long, a spare.
      let place: "lane" | "spare" = "lane"
      const release = Effect.suspend(() => (place === "lane" ? lanes.release(1) : spares.release(1)))
      const body = Effect.gen(function*() {
        const thread = yield* acquire
        const answer = Deferred.makeUnsafe<MailWorkResult, MailTooComplex>()
        const handOver = Effect.sync(() => {
          thread.answer = answer
          thread.replied = false
          const raw = ownedBytes(task.raw)
          const message: ToThread = { type: "work", task: { ...task, raw } }
          thread.worker.postMessage(message, [raw.buffer])
        })
        const work = Effect.gen(function*() {
          yield* handOver
          const soon = yield* Deferred.await(answer).pipe(Effect.timeoutOption(limits.longAfterMs))
          if (Option.isSome(soon)) return soon.value
          // Running long: let the next task have this place, if a spare thread can take this one.
          if (yield* spares.takeIfAvailable(1)) {
            yield* lanes.release(1)
            place = "spare"
          }
          const late = yield* Deferred.await(answer).pipe(Effect.timeoutOption(limits.timeoutMs - limits.longAfterMs))
          if (Option.isSome(late)) return late.value
          return yield* new MailTooComplex({ reason: `took longer than ${durationText(limits.timeoutMs)}` })
        })
        return yield* work.pipe(
          Effect.onExit((exit) =>
            // A thread that answered is ready for more; one that went past its allowance (or was
            // interrupted mid-task) cannot be stopped otherwise than by ending it.
            Exit.isSuccess(exit) || (thread.replied && !thread.ended) ? giveBack(thread) : replace(thread)
          )
        )
      })
      // As Semaphore.withPermits takes and gives back, but the place given back may have changed.
      return yield* Effect.uninterruptibleMask((restore) =>
        restore(lanes.take(1)).pipe(Effect.andThen(restore(body).pipe(Effect.ensuring(release))))
      )
    })

    // Ready before the layer is: the first message does not wait for a thread to start.
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        closing = true
        return Effect.forEach([...live], end, { concurrency: "unbounded", discard: true })
      })
    )
    idle.push(...yield* Effect.all(Array.from({ length: size }, () => spawn), { concurrency: "unbounded" }))

    return MailWorkers.of({ process, limits })
  })

export class MailWorkers extends Context.Service<MailWorkers, {
  /**
   * Parses, analyzes and DKIM-reads one message in a worker thread, within the allowance. The
   * raw bytes are handed over: `task.raw` may be empty (transferred) afterwards.
   */
  readonly process: (task: MailTask) => Effect.Effect<MailWorkResult, MailTooComplex>
  readonly limits: MailWorkLimits
}>()("burnbox/MailWorkers") {
  /** With these limits (the defaults for the rest); needs the DnsResolver for DKIM key lookups. */
  static readonly layerWith = (limits: Partial<MailWorkLimits> = {}) =>
    Layer.effect(MailWorkers, make({ ...defaultMailWorkLimits(), ...limits }))

  /** With the limits of the environment (BURNBOX_MAIL_WORK_TIMEOUT, _HEAP_MB, _THREADS, _SPARE_THREADS, _NICE), else the defaults. */
  static readonly layer = Layer.effect(
    MailWorkers,
    Effect.gen(function*() {
      const defaults = defaultMailWorkLimits()
      const timeout = yield* Config.Duration("BURNBOX_MAIL_WORK_TIMEOUT").pipe(Config.withDefault(Duration.millis(defaults.timeoutMs)))
      const heapMb = yield* Config.Int("BURNBOX_MAIL_WORK_HEAP_MB").pipe(Config.withDefault(defaults.heapMb))
      const threads = yield* Config.Int("BURNBOX_MAIL_WORK_THREADS").pipe(Config.withDefault(defaults.threads))
      const spareThreads = yield* Config.Int("BURNBOX_MAIL_WORK_SPARE_THREADS").pipe(Config.withDefault(defaults.spareThreads))
      const nice = yield* Config.Int("BURNBOX_MAIL_WORK_NICE").pipe(Config.withDefault(defaults.nice))
      return yield* make({ ...defaults, timeoutMs: Duration.toMillis(timeout), heapMb, threads, spareThreads, nice })
    }).pipe(Effect.orDie)
  )
}

export type { MailTask, MailWorkResult } from "./MailWork.ts"
