/**
 * A Server-Sent Events subscriber over fetch, as a browser's EventSource reads the Mercure hub:
 * the events in order (id and parsed JSON data), the comments (heartbeats) counted, and a wait
 * for the next event that matches.
 */
export interface SseEvent {
  readonly id: string | undefined
  readonly data: any
  /** When it arrived (performance.now()). */
  readonly at: number
}

export interface SseSubscription {
  readonly status: number
  readonly headers: Headers
  /** Every event so far, in order. */
  readonly events: ReadonlyArray<SseEvent>
  /** Comment lines (heartbeats) so far. */
  readonly comments: () => number
  /** The first event after the last one `next` answered that `test` accepts; fails after `ms`. */
  readonly next: (test?: (event: SseEvent) => boolean, ms?: number) => Promise<SseEvent>
  /** Whether the server ended the stream. */
  readonly ended: () => boolean
  readonly close: () => void
}

export const openSse = async (url: string, headers: Record<string, string> = {}): Promise<SseSubscription> => {
  const abort = new AbortController()
  const response = await fetch(url, { headers: { accept: "text/event-stream", ...headers }, signal: abort.signal })
  const events: Array<SseEvent> = []
  let comments = 0
  let ended = false
  const waiters = new Set<() => void>()
  const wake = () => {
    for (const waiter of waiters) waiter()
  }
  if (response.ok && response.body !== null) {
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
    void (async () => {
      let buffer = ""
      try {
        for (;;) {
          const { done, value } = await reader.read()
          if (done) break
          buffer += value
          for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
            const block = buffer.slice(0, end)
            buffer = buffer.slice(end + 2)
            let id: string | undefined
            const data: Array<string> = []
            for (const line of block.split("\n")) {
              if (line.startsWith(":")) comments++
              else if (line.startsWith("id: ")) id = line.slice(4)
              else if (line.startsWith("data: ")) data.push(line.slice(6))
            }
            if (data.length > 0) events.push({ id, data: JSON.parse(data.join("\n")), at: performance.now() })
          }
          wake()
        }
      } catch {
        // aborted by close()
      } finally {
        ended = true
        wake()
      }
    })()
  } else {
    await response.text()
    ended = true
  }
  let seen = 0
  return {
    status: response.status,
    headers: response.headers,
    events,
    comments: () => comments,
    ended: () => ended,
    next: (test = () => true, ms = 10_000) =>
      new Promise<SseEvent>((resolve, reject) => {
        const check = () => {
          for (; seen < events.length; seen++) {
            const event = events[seen]!
            if (test(event)) {
              seen++
              finish()
              resolve(event)
              return
            }
          }
          if (ended) {
            finish()
            reject(new Error("the event stream ended"))
          }
        }
        const timer = setTimeout(() => {
          finish()
          reject(new Error(`no matching event within ${ms} ms; heard ${JSON.stringify(events.map((e) => e.data))}`))
        }, ms)
        const finish = () => {
          clearTimeout(timer)
          waiters.delete(check)
        }
        waiters.add(check)
        check()
      }),
    close: () => abort.abort()
  }
}
