/**
 * MailWorkers: the pipeline's CPU-heavy work (MailWork.ts: parsing, analysis, the DKIM
 * verifier's reading) in a pool of worker threads, so no message, however built, holds the event
 * loop that answers HTTP and SMTP (issue #15: one 900 KB mail of nested `<b>` held it for 56 s).
 *
 * - **Sized to the cores**: `threads` lanes (one per core but the main thread's) work at once,
 *   each on one message at a time. A message that has worked `longAfterMs` (far longer than
 *   ordinary mail takes) gives its lane to the next and goes on in one of `spareThreads` extra
 *   places, when one is free, so slow messages do not hold up the ordinary ones behind them: with
 *   one hostile message a second, each running up to its 5 s, about five run at once
 *   (bench:hostile). Only when every spare place is taken does a long message keep its lane.
 * - **An allowance per message**: `timeoutMs` of its thread's CPU time on Linux (at most three
 *   times that in wall time; wall time elsewhere), from the moment the thread starts it, not
 *   counting the wait before; and a heap of `heapMb` per thread (`resourceLimits`). Past either the thread is ended and replaced, and the message fails with
 *   `MailTooComplex` ("took longer than 5 s", "out of memory"): the pipeline marks it failed with
 *   that reason, its raw bytes kept.
 * - **Slow work yields**: on Linux a thread whose message runs long gets a higher nice value, so
 *   on a machine whose cores are all busy the main thread (HTTP, SMTP) and ordinary mail get the
 *   CPU first; ordinary mail itself runs at the process's priority.
 * - **Small plain mail stays**: a message within `InlineLimits` (8 KB of plain text without the
 *   word "html", 32 `<`, 400 lines of at most 1000 bytes, 8 MIME boundary lines; one linear pass
 *   decides) is worked on the calling thread: whatever its bytes, its work is bounded to about a
 *   millisecond (bench:hop measures the worst such message), while a hop to a thread costs
 *   ordinary mail more than the work itself (bench:hop: 0.07 ms in place, 0.19 ms and twice the
 *   CPU through a thread). Such messages take turns: one message's parsing and analysis at a
 *   time, in slices of the event loop's turns of a few milliseconds, so a batch of them is done
 *   one after the other (the first goes on to its store while the next is worked) with the loop's
 *   I/O between slices, rather than all interleaved and all done at the end of the batch
 *   (bench:wait at 200 msg/s: the work of a 2 KB message took the whole batch's time, 25-75 ms p50).
 * - **Cheap for ordinary mail**: each hand-over wakes a thread, and waking threads is most of
 *   what a thread hop costs (bench:pipeline). A message goes to a free lane at once; while the
 *   lanes are busy, messages wait, and a thread that answers is handed several of the small ones
 *   at once and answers each as soon as it is done; messages queued behind one
 *   that turns out slow are withdrawn (a shared counter tells the thread not to start them) and
 *   handed to another thread at once.
 * - **Plain data across**: the raw bytes are transferred into the thread (a small message's
 *   are copied first, and the copy kept to hand it over again; a big one's may come as stored,
 *   zstd-compressed, and are inflated there, `MailTask.inflateTo`), results come back as plain
 *   objects with the attachments' bytes transferred; the DKIM verifier's key lookups are answered
 *   here from the `DnsResolver`.
 *
 * A thread per lane and one more are started with the layer (ready before it is built) and kept
 * idle between messages, so a lane a long message leaves gets a thread at once; threads for the
 * spare places are started as long messages need them (one is always being started ahead, but
 * while a big message, over 256 KB, works on a spare place: a thread is ~34 MiB of RSS that
 * would add to the big message's own peak, bench:bigmail) and
 * ended once more than those are idle; a thread ended for an allowance is replaced at once, in
 * the background. All are ended when the layer's scope closes. Memory is bounded by
 * (threads + spareThreads) x heapMb. Configured by BURNBOX_MAIL_WORK_TIMEOUT (a duration,
 * "5 seconds"), BURNBOX_MAIL_WORK_HEAP_MB, BURNBOX_MAIL_WORK_THREADS,
 * BURNBOX_MAIL_WORK_SPARE_THREADS and BURNBOX_MAIL_WORK_NICE.
 */
import { readFileSync } from "node:fs"
import { availableParallelism, getPriority, setPriority } from "node:os"
import { Worker } from "node:worker_threads"
import { Config, Context, Duration, Effect, Layer, Schema } from "effect"
import { DnsResolver } from "./MailAuth.ts"
import {
  doMailWork,
  type FromThread,
  type MailTask,
  type MailWorkResult,
  ownedBytes,
  type ThreadJob,
  type ThreadOptions,
  type ToThread,
  type WorkTurn,
  workableInline
} from "./MailWork.ts"

export interface MailWorkLimits {
  /** Threads that work at once on ordinary mail: the cores but one (the main thread's), at least one. */
  readonly threads: number
  /** Extra places for messages that have run longer than `longAfterMs`, so they do not hold a core's place. */
  readonly spareThreads: number
  /** Wall time one message may take in its thread. */
  readonly timeoutMs: number
  /** V8 old-generation heap of one thread, MiB. */
  readonly heapMb: number
  /**
   * V8 young generation of one thread, MiB: its new objects' room, which V8 otherwise grows to
   * ~16 MiB on allocation-heavy work (a 15 MB message's lines) and keeps resident.
   */
  readonly youngMb: number
  /** After this long a message gives its place to the next one, onto a spare place if one is free. */
  readonly longAfterMs: number
  /**
   * The nice value (Linux, per thread) of a thread while its message runs long: on a machine
   * whose cores are all busy, the main thread (HTTP, SMTP) and ordinary mail get the CPU first.
   * 0 leaves every thread at the process's priority.
   */
  readonly nice: number
  /** Small plain mail (InlineLimits) worked on the calling thread; false sends every message to a thread. */
  readonly inline: boolean
}

/**
 * One thread per core but the main thread's: it serves HTTP and SMTP and drives the pipeline,
 * and PostgreSQL wants its share; on 2 cores a second mail thread made ordinary mail slower, not
 * faster (bench:pipeline), since ordinary mail takes well under 1 ms in a thread and a slow
 * message steps aside to a spare. 5 s is ~1000 times what ordinary mail takes and several times a
 * 15 MB message with attachments. 256 MiB of heap holds the largest accepted message several
 * times over (bench:bigmail: 70-90 MiB of RSS for one 15 MB message in all); every hostile message of the
 * tests that needs more also needs far more than 5 s. With every thread full the heaps are
 * bounded by (threads + spareThreads) x heapMb. A young generation of 8 MiB instead of the ~16 V8
 * grows it to: 7 MiB less for a 15 MB message, text or attachment (a thread working one alone).
 */
export const defaultMailWorkLimits = (): MailWorkLimits => ({
  threads: Math.max(1, availableParallelism() - 1),
  spareThreads: 8,
  timeoutMs: 5_000,
  heapMb: 256,
  youngMb: 8,
  longAfterMs: 40,
  nice: 10,
  inline: true
})

/** A message whose work went past its allowance; `reason` reads after "too_complex: ". */
/** The pool's places in use: lanes and spare places held by a message, and messages waiting for a lane. */
export interface MailWorkBusy {
  readonly lanes: number
  readonly spares: number
  readonly waiting: number
  /** Threads started (ready or not), idle or not. */
  readonly threads: number
}

export class MailTooComplex extends Schema.TaggedError<MailTooComplex>()("MailTooComplex", {
  reason: Schema.String
}) {}

const entry = new URL("./MailWorkThread.ts", import.meta.url)

/** Messages this small may be handed over several at once (a copy of each is kept meanwhile). */
const SmallBytes = 256 * 1024
/** At most this many messages in one hand-over. */
const MaxBatch = 8
/** Small mail worked in place is worked for at most this long (ms) in one turn of the event loop. */
const InlineSliceMs = 4

/** A message's wall time is bounded at this many times its allowance of CPU time. */
const WallTimeFactor = 3

/** CPU time (user + system) a thread has used, ms, from /proc (Linux); null where it cannot be read. */
/** A thread's nice value (0 where it cannot be read). */
const niceOf = (tid: number | null): number => {
  if (tid === null) return 0
  try {
    return getPriority(tid)
  } catch {
    return 0
  }
}

const threadCpuMs = (tid: number | null): number | null => {
  if (tid === null) return null
  try {
    // Fields after the command's closing parenthesis: state is the 3rd field, utime the 14th, stime the 15th.
    const fields = readFileSync(`/proc/self/task/${tid}/stat`, "latin1").split(") ")[1]?.split(" ")
    const ticks = Number(fields?.[11]) + Number(fields?.[12])
    return Number.isFinite(ticks) ? ticks * (1000 / ClockTicksPerSecond) : null
  } catch {
    return null
  }
}
/** USER_HZ: the unit of /proc's CPU times, 100 on every Linux platform Node runs on. */
const ClockTicksPerSecond = 100

const durationText = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`)

type Outcome = Effect.Effect<MailWorkResult, MailTooComplex>

interface Job {
  /** A small message's bytes stay the caller's: the thread gets a copy. */
  readonly task: MailTask
  readonly small: boolean
  readonly resume: (outcome: Outcome) => void
  settled: boolean
  /** Its number on the thread that has it. */
  seq: number
}

interface Thread {
  readonly worker: Worker
  /** Shared with the thread: it does not start a job whose seq is at most this. */
  readonly withdrawn: BigInt64Array
  /** Its kernel thread id (Linux), to change its priority alone; null elsewhere. */
  tid: number | null
  /** Running at `nice` for a long message. */
  lowered: boolean
  /** The nice value it started with, inherited from the thread that started it (`burnbox start`'s ingest-and-worker thread runs at 10). */
  baseNice: number
  ready: boolean
  /** Ended, or being ended: it takes nothing more. */
  retired: boolean
  lastSeq: number
  /** Handed over and not answered, in order: the first is the one it works on. */
  readonly jobs: Array<Job>
  /** The place it holds while it has jobs. */
  place: "lane" | "spare" | null
  longTimer: ReturnType<typeof setTimeout> | undefined
  deadline: ReturnType<typeof setTimeout> | undefined
}

const make = (limits: MailWorkLimits) =>
  Effect.gen(function*() {
    const resolve = yield* DnsResolver
    // Every thread the pool may use is kept started, so a message waits for a thread to start
    // (~150 ms, longer on a busy machine) only while one is being replaced.
    const size = limits.threads + limits.spareThreads
    const threads = new Set<Thread>()
    const idle: Array<Thread> = []
    /** Threads started and not yet ready. */
    let starting = 0
    /** Idle threads kept: one per lane, and one for the lane a long message leaves. */
    const keptIdle = limits.threads + 1
    const waiting: Array<Job> = []
    let freeLanes = limits.threads
    let freeSpares = limits.spareThreads
    let closing = false

    const settle = (job: Job, outcome: Outcome) => {
      if (job.settled) return
      job.settled = true
      job.resume(outcome)
    }

    /** Sets a thread's nice value; false when that is not possible (not Linux, or not allowed). */
    const renice = (thread: Thread, nice: number) => {
      if (thread.tid === null || thread.retired) return false
      try {
        setPriority(thread.tid, nice)
        return true
      } catch {
        return false
      }
    }

    const clearTimers = (thread: Thread) => {
      clearTimeout(thread.longTimer)
      clearTimeout(thread.deadline)
      thread.longTimer = undefined
      thread.deadline = undefined
    }

    const givePlaceBack = (thread: Thread) => {
      if (thread.place === "lane") freeLanes++
      else if (thread.place === "spare") freeSpares++
      thread.place = null
    }

    /** Starts a thread; it joins the idle ones when ready. Answers once it is ready (or why it is not). */
    const start = () =>
      new Promise<void>((ready, failed) => {
        const withdrawn = new BigInt64Array(new SharedArrayBuffer(BigInt64Array.BYTES_PER_ELEMENT))
        const options: ThreadOptions = { withdrawn: withdrawn.buffer as SharedArrayBuffer }
        const worker = new Worker(entry, { name: "burnbox-mail", workerData: options, resourceLimits: { maxOldGenerationSizeMb: limits.heapMb, maxYoungGenerationSizeMb: limits.youngMb } })
        const thread: Thread = {
          worker,
          withdrawn,
          tid: null,
          lowered: false,
          baseNice: 0,
          ready: false,
          retired: false,
          lastSeq: 0,
          jobs: [],
          place: null,
          longTimer: undefined,
          deadline: undefined
        }
        threads.add(thread)
        starting++
        let error: (Error & { code?: unknown }) | undefined
        worker.on("message", (message: FromThread) => {
          switch (message.type) {
            case "ready":
              starting--
              thread.ready = true
              thread.tid = message.tid
              thread.baseNice = niceOf(message.tid)
              ready()
              return idleAgain(thread)
            case "done":
              return answered(thread, message.seq, Effect.succeed(message.result))
            case "crashed":
              return answered(thread, message.seq, Effect.die(new Error(`mail worker thread: ${message.message}`)))
            case "dns":
              return lookUp(thread, message.id, message.name, message.rrtype)
          }
        })
        worker.on("error", (cause: Error) => {
          error = cause
        })
        worker.on("exit", () => {
          threads.delete(thread)
          if (!thread.ready) {
            starting--
            failed(new Error(`mail worker thread did not start: ${error?.message ?? "it exited"}`))
            return
          }
          retire(
            thread,
            error?.code === "ERR_WORKER_OUT_OF_MEMORY"
              ? Effect.fail(new MailTooComplex({ reason: "out of memory" }))
              : Effect.die(new Error(`mail worker thread ended: ${error?.message ?? "it exited"}`))
          )
        })
      })

    /**
     * Threads started in the background until one is idle (or starting) for every free lane and
     * one more, within the pool's size: a lane that frees up, or a long message's lane, gets a
     * thread at once. If none can start, what waits fails rather than waiting for ever.
     */
    const replace = () => {
      // While a big message holds a spare place, its lane's idle thread is the one more: a thread
      // costs ~34 MiB of RSS, which a big message (whose work runs long because it is big, its own
      // memory several times its size) would add to its peak (bench:bigmail). The next long
      // message to step aside starts one.
      const wanted = freeLanes + (bigOnSpare() ? 0 : 1)
      // Bounded by the size, should a thread fail before it counts as starting.
      for (let i = 0; i < size && !closing && threads.size < size && idle.length + starting < wanted; i++) {
        start().catch((error: unknown) => {
          if (threads.size > 0) return
          for (const job of waiting.splice(0)) settle(job, Effect.die(error))
        })
      }
    }

    /** Whether a big message (over SmallBytes) works in a spare place. */
    const bigOnSpare = () => {
      for (const thread of threads) if (thread.place === "spare" && thread.jobs[0]?.small === false) return true
      return false
    }

    const lookUp = (thread: Thread, id: number, name: string, rrtype: string) => {
      const reply = (answer: ToThread) => {
        if (!thread.retired) thread.worker.postMessage(answer, [])
      }
      resolve(name, rrtype).then(
        (answer) => reply({ type: "dns", id, answer }),
        (failure: unknown) => {
          const code = (failure as { code?: unknown }).code
          reply({
            type: "dns",
            id,
            error: { message: failure instanceof Error ? failure.message : String(failure), code: typeof code === "string" ? code : null }
          })
        }
      )
    }

    /** A thread with nothing to do: back among the idle ones (at the priority it started with), and the next messages handed over. */
    const idleAgain = (thread: Thread) => {
      givePlaceBack(thread)
      // A process may not be allowed to raise a thread's priority again (CAP_SYS_NICE): then the
      // thread is replaced instead.
      // Spare threads started for long messages are ended again once enough are idle.
      if ((thread.lowered && !renice(thread, thread.baseNice)) || idle.length >= keptIdle) end(thread)
      else {
        thread.lowered = false
        idle.push(thread)
      }
      pump()
    }

    /** The thread works on its first job from now: its allowance starts. */
    const startFirst = (thread: Thread) => {
      clearTimers(thread)
      const job = thread.jobs[0]
      if (job === undefined) return
      thread.longTimer = setTimeout(() => runningLong(thread, job), limits.longAfterMs)
      const startedAt = performance.now()
      const cpuAtStart = threadCpuMs(thread.tid)
      const tooLong = () => retire(thread, Effect.fail(new MailTooComplex({ reason: `took longer than ${durationText(limits.timeoutMs)}` })))
      // The allowance is the thread's CPU time where the system tells it (Linux), so a message is
      // not failed for the time it waited for a core on a busy machine; wall time bounds it at
      // WallTimeFactor times the allowance all the same. Elsewhere it is wall time.
      const check = () => {
        const cpuNow = threadCpuMs(thread.tid)
        const wall = performance.now() - startedAt
        if (cpuAtStart === null || cpuNow === null) return tooLong()
        const left = limits.timeoutMs - (cpuNow - cpuAtStart)
        const wallLeft = limits.timeoutMs * WallTimeFactor - wall
        if (left <= 0 || wallLeft <= 0) return tooLong()
        thread.deadline = setTimeout(check, Math.max(20, Math.min(left, wallLeft)))
      }
      thread.deadline = setTimeout(check, limits.timeoutMs)
    }

    const answered = (thread: Thread, seq: number, outcome: Outcome) => {
      const job = thread.jobs[0]
      if (job === undefined || job.seq !== seq) return
      thread.jobs.shift()
      settle(job, outcome)
      if (thread.jobs.length > 0) return startFirst(thread)
      clearTimers(thread)
      idleAgain(thread)
    }

    /**
     * Its first job has run long: the jobs queued behind it go to other threads, it moves to a
     * spare place if one is free (its lane goes to the next message), and it yields the CPU.
     */
    const runningLong = (thread: Thread, job: Job) => {
      thread.longTimer = undefined
      if (thread.jobs[0] !== job) return
      const behind = thread.jobs.splice(1)
      if (behind.length > 0) {
        Atomics.store(thread.withdrawn, 0, BigInt(behind.at(-1)!.seq))
        waiting.unshift(...behind)
      }
      if (thread.place === "lane" && freeSpares > 0) {
        freeSpares--
        freeLanes++
        thread.place = "spare"
      }
      if (limits.nice > thread.baseNice && renice(thread, limits.nice)) thread.lowered = true
      pump()
    }

    /** Ends a thread and starts its replacement. */
    const end = (thread: Thread) => {
      thread.retired = true
      clearTimers(thread)
      const index = idle.indexOf(thread)
      if (index >= 0) idle.splice(index, 1)
      threads.delete(thread)
      void thread.worker.terminate()
      replace()
    }

    /** Ends a thread (past an allowance, dead, or interrupted): its first job gets `first`, the others go to other threads. */
    const retire = (thread: Thread, first: Outcome) => {
      if (thread.retired && thread.jobs.length === 0) return
      const [job, ...behind] = thread.jobs.splice(0)
      if (job !== undefined) settle(job, first)
      waiting.unshift(...behind)
      givePlaceBack(thread)
      end(thread)
      pump()
    }

    /** Hands waiting messages to idle threads while there are lanes free. */
    const pump = () => {
      while (waiting.length > 0 && freeLanes > 0) {
        const thread = idle.pop()
        if (thread === undefined) return replace()
        if (thread.retired) continue
        freeLanes--
        thread.place = "lane"
        const first = waiting.shift()!
        const batch = [first]
        if (first.small) {
          // Shared out among the free lanes, so every free thread gets some.
          const share = Math.min(MaxBatch, Math.ceil((waiting.length + 1) / (freeLanes + 1)))
          while (batch.length < share && waiting[0]?.small === true) batch.push(waiting.shift()!)
        }
        handOver(thread, batch)
      }
      replace()
    }

    const handOver = (thread: Thread, batch: ReadonlyArray<Job>) => {
      const transfer: Array<ArrayBuffer> = []
      const jobs = batch.map((job): ThreadJob => {
        job.seq = ++thread.lastSeq
        // A small message is copied (its bytes stay here, to hand it over again if it must
        // wait behind a slow one); a large one goes alone and is handed over.
        const raw = job.small ? new Uint8Array(job.task.raw) : ownedBytes(job.task.raw)
        transfer.push(raw.buffer)
        return { seq: job.seq, task: { ...job.task, raw } }
      })
      thread.jobs.push(...batch)
      const message: ToThread = { type: "work", jobs }
      thread.worker.postMessage(message, transfer)
      startFirst(thread)
    }

    /** A fiber stopped waiting for its job: forget it, or end the thread that works on it. */
    const withdraw = (job: Job) => {
      if (job.settled) return
      job.settled = true
      const index = waiting.indexOf(job)
      if (index >= 0) return void waiting.splice(index, 1)
      for (const thread of threads) {
        // A job queued behind another is left to run; its answer is dropped.
        if (thread.jobs[0] === job) return retire(thread, Effect.interrupt)
      }
    }

    /**
     * The inline work's turns (above): queued works run one after the other, in slices of the
     * event loop's turns of at most InlineSliceMs (then the loop's I/O runs, and the next slice),
     * so the loop is never held for a whole batch and its turns never limit how many are worked.
     */
    const inlineQueue: Array<() => Promise<void>> = []
    let slicing = false
    const slice = async () => {
      const until = performance.now() + InlineSliceMs
      while (inlineQueue.length > 0 && performance.now() < until) await inlineQueue.shift()!()
      if (inlineQueue.length > 0) setImmediate(slice)
      else slicing = false
    }
    const inTurn: WorkTurn = (work) =>
      new Promise((done, failed) => {
        inlineQueue.push(() => work().then(done, failed))
        if (!slicing) {
          slicing = true
          setImmediate(slice)
        }
      })

    // A new message goes to a free lane at once; while every lane is busy, messages wait and the
    // next thread to answer takes several of them in one hand-over (one wake-up). Handing over at
    // the end of the event loop's turn instead cost ordinary mail a turn of a busy loop each.
    const processTask = Effect.fn("MailWorkers.process")(function*(task: MailTask) {
      // Small plain mail is worked here: bounded, and cheaper than the hop (InlineLimits).
      if (limits.inline && task.inflateTo === undefined && workableInline(task.raw)) {
        // Its work is bounded; what may wait is DKIM's key lookup, held to the same allowance.
        return yield* Effect.promise(() => doMailWork(task, resolve, { turn: inTurn })).pipe(
          Effect.timeoutOrElse({
            duration: Duration.millis(limits.timeoutMs),
            orElse: () => Effect.fail(new MailTooComplex({ reason: `took longer than ${durationText(limits.timeoutMs)}` }))
          })
        )
      }
      return yield* Effect.callback<MailWorkResult, MailTooComplex>((resume) => {
        const job: Job = { task, small: (task.inflateTo ?? task.raw.byteLength) <= SmallBytes, resume, settled: false, seq: 0 }
        waiting.push(job)
        if (freeLanes > 0) pump()
        return Effect.sync(() => withdraw(job))
      })
    })

    yield* Effect.addFinalizer(() =>
      Effect.promise(() => {
        closing = true
        for (const job of waiting.splice(0)) settle(job, Effect.interrupt)
        return Promise.all([...threads].map((thread) => {
          clearTimers(thread)
          thread.retired = true
          return thread.worker.terminate()
        }))
      })
    )
    // Ready before the layer is: the first message does not wait for a thread to start.
    yield* Effect.tryPromise(() => Promise.all(Array.from({ length: Math.min(size, keptIdle) }, start))).pipe(Effect.orDie)

    const busy = Effect.sync((): MailWorkBusy => ({ lanes: limits.threads - freeLanes, spares: limits.spareThreads - freeSpares, waiting: waiting.length, threads: threads.size }))

    return MailWorkers.of({ process: processTask, limits, busy })
  })

export class MailWorkers extends Context.Service<MailWorkers, {
  /**
   * Parses, analyzes and DKIM-reads one message in a worker thread, within the allowance. A large
   * message's raw bytes are handed over: `task.raw` may be empty (transferred) afterwards.
   */
  readonly process: (task: MailTask) => Effect.Effect<MailWorkResult, MailTooComplex>
  readonly limits: MailWorkLimits
  /** The places taken now and the messages waiting for one: what tests (and diagnostics) read instead of a stopwatch. */
  readonly busy: Effect.Effect<MailWorkBusy>
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
