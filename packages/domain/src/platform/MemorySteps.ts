/**
 * Memory steps: the process's memory at each step of a big message's work, for finding where
 * its peak comes from (issue #36 item 6, `bench:bigmail`). Off unless `BURNBOX_MEMORY_STEPS`
 * names a file; then each step appends one JSON line to it at once: epoch ms, the thread ("main",
 * else its `threadId`: `burnbox start` runs the pipeline on a thread of its own, and each mail
 * thread is one), the step (`main.*` where the pipeline runs, `thread.*` in a mail thread), the
 * message's size, and `process.memoryUsage()`
 * (RSS is the process's; heap, external and array buffers are the calling thread's isolate).
 * Only messages of at least `BURNBOX_MEMORY_STEPS_BYTES` (default 1 MiB) are stepped. Off, a
 * step costs one test.
 *
 * No Effect here: mail worker threads load it.
 */
import { appendFileSync } from "node:fs"
import { isMainThread, threadId } from "node:worker_threads"

const file = process.env["BURNBOX_MEMORY_STEPS"]
const on = file !== undefined && file !== ""
const fromBytes = Number(process.env["BURNBOX_MEMORY_STEPS_BYTES"] ?? 1024 * 1024)
const mib = (n: number) => Math.round(n / 1024 / 1024 * 10) / 10

/** Notes the memory at `step` of the work on a message of `size` bytes (nothing unless BURNBOX_MEMORY_STEPS is set). */
export const memoryStep = (step: string, size: number): void => {
  if (!on || size < fromBytes) return
  const m = process.memoryUsage()
  appendFileSync(file!, JSON.stringify({
    at: Math.round(performance.timeOrigin + performance.now()),
    thread: isMainThread ? "main" : `thread-${threadId}`,
    step,
    size,
    rss: mib(m.rss),
    heapUsed: mib(m.heapUsed),
    heapTotal: mib(m.heapTotal),
    external: mib(m.external),
    arrayBuffers: mib(m.arrayBuffers)
  }) + "\n")
}
