/**
 * A reader of the API during a load: GET `path` with a bearer token at a steady `perSecond`
 * (open loop: each request leaves at its time whether or not the previous one has answered, so
 * a slow answer shows as latency, not as fewer requests), each timed from its send to the end
 * of its body. One small function, so benchmarks that read during a load share it.
 */
import { distribution, type Distribution } from "./common.ts"

export interface ReadLatency {
  readonly path: string
  readonly perSecond: number
  /** requests sent */
  readonly sent: number
  /** ms from the send to the body's end, of the 2xx answers */
  readonly ms: Distribution
  /** answers other than 2xx and failed requests, by status or error */
  readonly failures: ReadonlyMap<string, number>
}

/** Starts reading `baseUrl + path` at `perSecond`; `stop()` waits for the requests in flight and answers their latencies. */
export const readDuringLoad = (options: { readonly baseUrl: string; readonly path: string; readonly token: string; readonly perSecond: number }) => {
  const times: Array<number> = []
  const failures = new Map<string, number>()
  const inFlight = new Set<Promise<void>>()
  let sent = 0
  const read = async () => {
    const started = performance.now()
    try {
      const response = await fetch(`${options.baseUrl}${options.path}`, {
        headers: { authorization: `Bearer ${options.token}` },
        signal: AbortSignal.timeout(30_000)
      })
      await response.arrayBuffer()
      if (response.status >= 200 && response.status < 300) times.push(performance.now() - started)
      else failures.set(String(response.status), (failures.get(String(response.status)) ?? 0) + 1)
    } catch (error) {
      const key = error instanceof Error ? error.message.slice(0, 60) : String(error)
      failures.set(key, (failures.get(key) ?? 0) + 1)
    }
  }
  const startedAt = performance.now()
  const interval = 1000 / options.perSecond
  let timer: NodeJS.Timeout | undefined
  const tick = () => {
    // Every request due by now leaves now (a late timer does not lower the rate).
    while (startedAt + sent * interval <= performance.now()) {
      sent++
      const request = read()
      inFlight.add(request)
      void request.finally(() => inFlight.delete(request))
    }
    timer = setTimeout(tick, Math.max(0, startedAt + sent * interval - performance.now()))
  }
  if (options.perSecond > 0) tick()
  return {
    stop: async (): Promise<ReadLatency> => {
      clearTimeout(timer)
      await Promise.all(inFlight)
      return { path: options.path, perSecond: options.perSecond, sent, ms: distribution(times), failures }
    }
  }
}
