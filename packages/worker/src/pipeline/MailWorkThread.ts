/**
 * The entry of a mail worker thread (MailWorkers.ts starts it): says it is ready, then does the
 * tasks the main thread hands over one at a time, in order, answering each with its result
 * (attachments' bytes transferred, not copied) as soon as it is done; a task the main thread
 * has withdrawn meanwhile (handed to another thread) is not started. DKIM key lookups are asked
 * of the main thread, whose cached resolver answers them. Loaded by Node directly from
 * TypeScript, like every module here.
 */
import { readlinkSync } from "node:fs"
import { parentPort, workerData } from "node:worker_threads"
import { memoryStep } from "@burnbox/domain/platform/MemorySteps"
import { doMailWork, type FromThread, type ThreadJob, type ThreadOptions, type ToThread, transferableResult } from "./MailWork.ts"

const port = parentPort
if (port === null) throw new Error("MailWorkThread.ts runs as a worker thread (new Worker), not as a program")

/** This thread's id in the kernel (Linux), by which the main thread can change its priority alone. */
const threadId = (): number | null => {
  try {
    const tid = Number(readlinkSync("/proc/thread-self").split("/").pop())
    return Number.isInteger(tid) && tid > 0 ? tid : null
  } catch {
    return null
  }
}

const post = (message: FromThread, transfer: ReadonlyArray<ArrayBuffer> = []) => port.postMessage(message, [...transfer])

const lookups = new Map<number, { readonly resolve: (answer: unknown) => void; readonly reject: (error: unknown) => void }>()
let lastLookup = 0
const resolve = (name: string, rrtype: string) =>
  new Promise<unknown>((answer, fail) => {
    const id = ++lastLookup
    lookups.set(id, { resolve: answer, reject: fail })
    post({ type: "dns", id, name, rrtype })
  })

const withdrawn = new BigInt64Array((workerData as ThreadOptions).withdrawn)
const queue: Array<ThreadJob> = []
let working = false

/** Does the queued tasks one after the other, until none is left. */
const work = async () => {
  if (working) return
  working = true
  for (let job = queue.shift(); job !== undefined; job = queue.shift()) {
    if (BigInt(job.seq) <= Atomics.load(withdrawn, 0)) continue
    try {
      const size = job.task.inflateTo ?? job.task.raw.byteLength
      // The task's bytes are this thread's (transferred, or a copy): freed as soon as they are read.
      const { result, transfer } = transferableResult(await doMailWork(job.task, resolve, { release: true }))
      post({ type: "done", seq: job.seq, result }, transfer)
      memoryStep("thread.posted", size)
    } catch (error) {
      post({ type: "crashed", seq: job.seq, message: error instanceof Error ? error.stack ?? error.message : String(error) })
    }
  }
  working = false
}

port.on("message", (message: ToThread) => {
  if (message.type === "dns") {
    const lookup = lookups.get(message.id)
    lookups.delete(message.id)
    if (lookup === undefined) return
    // mailauth tells "no such name" from "no answer in time" by the error's code, as node:dns sets it.
    if ("error" in message) lookup.reject(Object.assign(new Error(message.error.message), message.error.code === null ? {} : { code: message.error.code }))
    else lookup.resolve(message.answer)
    return
  }
  queue.push(...message.jobs)
  void work()
})

post({ type: "ready", tid: threadId() })
