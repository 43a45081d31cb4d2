/**
 * Preloaded into a measured service (`node --import <this file>`, set by a benchmark through
 * ServiceProcess's nodeArgs): every second it appends one JSON line to BENCH_LOOP_FILE with the
 * main thread's event-loop delay over that second (p50, p99, max, ms) and its utilization (the
 * share of the second the loop was busy), so a benchmark can tell a read that waited for the
 * event loop from one that waited for the database. Diagnostics only; no effect on the service
 * beyond a 10 ms sampling timer.
 */
import { appendFileSync } from "node:fs"
import { monitorEventLoopDelay, performance } from "node:perf_hooks"
import { isMainThread } from "node:worker_threads"

const file = process.env["BENCH_LOOP_FILE"]
/** The histogram records each 10 ms timer's whole interval: the delay is what exceeds it. */
const ms = (ns: number) => Math.max(0, Math.round((ns - 1e7) / 1e4) / 100)
// Worker threads inherit the preload: only the main thread (the HTTP API) is measured.
if (file !== undefined && file !== "" && isMainThread) {
  const histogram = monitorEventLoopDelay({ resolution: 10 })
  histogram.enable()
  let utilization = performance.eventLoopUtilization()
  setInterval(() => {
    const now = performance.eventLoopUtilization()
    const busy = performance.eventLoopUtilization(now, utilization).utilization
    utilization = now
    appendFileSync(file, JSON.stringify({
      at: performance.timeOrigin + performance.now(),
      p50: ms(histogram.percentile(50)),
      p99: ms(histogram.percentile(99)),
      max: ms(histogram.max),
      busy: Math.round(busy * 1000) / 1000
    }) + "\n")
    histogram.reset()
  }, 1000).unref()
}
