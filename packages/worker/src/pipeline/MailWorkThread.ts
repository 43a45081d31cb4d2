/**
 * The entry of a mail worker thread (MailWorkers.ts starts it): says it is ready, then does one
 * task at a time as the main thread hands them over, answering with the result (attachments'
 * bytes transferred, not copied). DKIM key lookups are asked of the main thread, whose cached
 * resolver answers them. Loaded by Node directly from TypeScript, like every module here.
 */
import { readlinkSync } from "node:fs"
import { setPriority } from "node:os"
import { parentPort, workerData } from "node:worker_threads"
import { doMailWork, type FromThread, type ThreadOptions, type ToThread, transferableResult } from "./MailWork.ts"

const port = parentPort
if (port === null) throw new Error("MailWorkThread.ts runs as a worker thread (new Worker), not as a program")

/**
 * On Linux each thread has its own nice value: with a higher one this thread gives the CPU to
 * the main thread (HTTP, SMTP) whenever both want it, on a machine whose cores are all busy.
 * Elsewhere (no /proc/thread-self) it keeps the process's priority.
 */
const lowerPriority = (nice: number) => {
  if (nice <= 0) return
  try {
    const tid = Number(readlinkSync("/proc/thread-self").split("/").pop())
    if (Number.isInteger(tid) && tid > 0) setPriority(tid, nice)
  } catch {
    // not Linux, or not allowed
  }
}
lowerPriority((workerData as ThreadOptions).nice)

const post = (message: FromThread, transfer: ReadonlyArray<ArrayBuffer> = []) => port.postMessage(message, [...transfer])

const lookups = new Map<number, { readonly resolve: (answer: unknown) => void; readonly reject: (error: unknown) => void }>()
let lastLookup = 0
const resolve = (name: string, rrtype: string) =>
  new Promise<unknown>((answer, fail) => {
    const id = ++lastLookup
    lookups.set(id, { resolve: answer, reject: fail })
    post({ type: "dns", id, name, rrtype })
  })

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
  doMailWork(message.task, resolve).then(
    (result) => {
      const { result: plain, transfer } = transferableResult(result)
      post({ type: "done", result: plain }, transfer)
    },
    (error: unknown) => post({ type: "crashed", message: error instanceof Error ? error.stack ?? error.message : String(error) })
  )
})

post({ type: "ready" })
