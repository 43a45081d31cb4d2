/**
 * Preloaded into a measured service (`node --import <this file>`, set by a benchmark through
 * ServiceProcess's nodeArgs): every second it appends one JSON line to BENCH_LOOP_FILE with the
 * main thread's event-loop delay over that second (p50, p99, max, ms) and its utilization (the
 * share of the second the loop was busy), so a benchmark can tell a read that waited for the
 * event loop from one that waited for the database. Diagnostics only; no effect on the service
 * beyond a 10 ms sampling timer.
 *
 * Worker threads inherit the preload: BENCH_LOOP_THREADS (a comma list of thread names, e.g.
 * `burnbox-ingest-worker`, the thread `burnbox start` runs the ingest and the worker on) measures
 * those threads too, their lines carrying a `thread` field with the name (the main thread's have none).
 */
import { appendFileSync } from "node:fs"
import { monitorEventLoopDelay, performance } from "node:perf_hooks"
import { isMainThread, threadName } from "node:worker_threads"

const file = process.env["BENCH_LOOP_FILE"]
const threads = (process.env["BENCH_LOOP_THREADS"] ?? "").split(",").filter((name) => name !== "")
/** The histogram records each 10 ms timer's whole interval: the delay is what exceeds it. */
const ms = (ns: number) => Math.max(0, Math.round((ns - 1e7) / 1e4) / 100)
const measured = isMainThread || (threadName !== null && threads.includes(threadName))
if (file !== undefined && file !== "" && measured) {
  const thread = isMainThread ? {} : { thread: threadName }
  const histogram = monitorEventLoopDelay({ resolution: 10 })
  histogram.enable()
  let utilization = performance.eventLoopUtilization()
  setInterval(() => {
    const now = performance.eventLoopUtilization()
    const busy = performance.eventLoopUtilization(now, utilization).utilization
    utilization = now
    appendFileSync(file, JSON.stringify({
      ...thread,
      at: performance.timeOrigin + performance.now(),
      p50: ms(histogram.percentile(50)),
      p99: ms(histogram.percentile(99)),
      max: ms(histogram.max),
      busy: Math.round(busy * 1000) / 1000
    }) + "\n")
    histogram.reset()
  }, 1000).unref()
}
