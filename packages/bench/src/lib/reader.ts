/**
 * A reader of the API at a steady rate, as a client polling its inbox does while mail pours in
 * (#36 item 3): each target (e.g. GET /messages, GET /me) is requested `perSecond` times a
 * second on a fixed schedule (open loop: a slow answer does not delay the next request, so a
 * stall shows as latency, not as fewer samples), over keep-alive connections.
 *
 * It runs in a worker thread of its own: a load generator on the benchmark's main thread (the
 * node SMTP client) would otherwise delay the reader's timers and responses and count its own
 * event loop's delays as the service's latency.
 */
import { Worker } from "node:worker_threads"
import { distribution, type Distribution } from "./common.ts"

export interface ReadTarget {
  /** e.g. "GET /messages" */
  readonly name: string
  readonly url: string
  readonly headers: Record<string, string>
}

export interface ReadResult {
  readonly name: string
  /** ms from the request's scheduled start to the last byte of its body */
  readonly latency: Distribution
  /** answers other than 2xx, and failures (by status or message) */
  readonly failures: ReadonlyMap<string, number>
  /** the reader's own lag behind its schedule, max ms (large means the reader, not the service, was late) */
  readonly maxLagMs: number
  /** the same lag per request: the part of each latency that is the client's own event loop (this machine's CPU), not the service */
  readonly lag: Distribution
}

export interface Reader {
  /** Stops issuing, waits for the requests in flight, answers each target's figures. */
  readonly stop: () => Promise<ReadonlyArray<ReadResult>>
}

// The worker's code (plain JavaScript, so the thread needs no TypeScript loader): one schedule per
// target, each request timed from its due time to its body's end.
const workerSource = `
const { parentPort, workerData } = require("node:worker_threads")
const { targets, perSecond, timeoutMs } = workerData
const results = targets.map(() => ({ samples: [], lags: [], failures: {}, maxLagMs: 0 }))
const inFlight = new Set()
let stopped = false
const interval = 1000 / perSecond
const started = performance.now()
const fire = async (t, due) => {
  const target = targets[t]
  const result = results[t]
  const lag = performance.now() - due
  result.maxLagMs = Math.max(result.maxLagMs, lag)
  result.lags.push(lag)
  try {
    const response = await fetch(target.url, { headers: target.headers, signal: AbortSignal.timeout(timeoutMs) })
    await response.arrayBuffer()
    const ms = performance.now() - due
    if (response.status >= 200 && response.status < 300) result.samples.push(ms)
    else result.failures[String(response.status)] = (result.failures[String(response.status)] || 0) + 1
  } catch (error) {
    const key = error && error.message ? error.message : String(error)
    result.failures[key] = (result.failures[key] || 0) + 1
  }
}
const schedule = (t, i) => {
  if (stopped) return
  // Targets are staggered within the interval, so their requests do not all leave at once.
  const due = started + (i + t / targets.length) * interval
  setTimeout(() => {
    if (stopped) return
    const p = fire(t, due)
    inFlight.add(p)
    p.finally(() => inFlight.delete(p))
    schedule(t, i + 1)
  }, Math.max(0, due - performance.now()))
}
targets.forEach((_, t) => schedule(t, 0))
parentPort.on("message", async () => {
  stopped = true
  await Promise.all([...inFlight])
  parentPort.postMessage(results)
})
`

/** Starts reading `targets`, each `perSecond` times a second, until `stop`. */
export const startReader = (options: { readonly targets: ReadonlyArray<ReadTarget>; readonly perSecond: number; readonly timeoutMs?: number }): Reader => {
  const worker = new Worker(workerSource, {
    eval: true,
    workerData: { targets: options.targets, perSecond: options.perSecond, timeoutMs: options.timeoutMs ?? 30_000 }
  })
  const failed = new Promise<never>((_, fail) => worker.once("error", fail))
  return {
    stop: async () => {
      const answer = new Promise<Array<{ samples: Array<number>; lags: Array<number>; failures: Record<string, number>; maxLagMs: number }>>((ok) => worker.once("message", ok))
      worker.postMessage("stop")
      const results = await Promise.race([answer, failed])
      await worker.terminate()
      return results.map((r, i) => ({
        name: options.targets[i]!.name,
        latency: distribution(r.samples),
        failures: new Map(Object.entries(r.failures)),
        maxLagMs: r.maxLagMs,
        lag: distribution(r.lags)
      }))
    }
  }
}
