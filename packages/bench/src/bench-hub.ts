/**
 * The Mercure hub alone (issue #32): from a NOTIFY on `burnbox_realtime` to the SSE event at each
 * subscriber, without SMTP or the pipeline, and what the service process spends on it. It tells
 * the hub's own cost (Realtime's LISTEN delivery, the fan-out, formatting, the socket writes)
 * apart from the rest of bench:realtime's 250 -> SSE path.
 *
 * Usage: pnpm bench:hub
 *
 * What it does:
 * 1. starts `burnbox start` (embedded PostgreSQL), an account, a browser session (sign-in) and
 *    HUB_SUBSCRIBERS SSE subscriptions to the account's topic;
 * 2. steady: HUB_RATE (200) updates/s for HUB_SECONDS (5), one NOTIFY statement each (as the
 *    pipeline's commits publish them), paced every millisecond;
 * 3. bursts: HUB_BURSTS (5) bursts of HUB_BURST (500) updates in one statement (one commit),
 *    a second apart;
 * 4. per update and subscriber: the SSE event's arrival minus the NOTIFY's arrival at the bench's
 *    own LISTEN connection (one clock); the service process's CPU share (of one core) meanwhile.
 *
 * Environment: HUB_SUBSCRIBERS (10), HUB_RATE (200), HUB_SECONDS (5), HUB_BURST (500),
 * HUB_BURSTS (5), BENCH_LOG_DIR, BENCH_BURNBOX_ROOT (measure another tree, e.g. a snapshot of main).
 */
import { Burnbox, serviceSource, Session } from "./lib/burnbox.ts"
import { cpuShare, cpuSnapshot, distribution, type Distribution, envInt, epochMs, fmt, loadAverage, sleep, table } from "./lib/common.ts"

const subscriberCount = envInt("HUB_SUBSCRIBERS", 10, 1)
const rate = envInt("HUB_RATE", 200, 1)
const seconds = envInt("HUB_SECONDS", 5, 1)
const burst = envInt("HUB_BURST", 500, 1)
const bursts = envInt("HUB_BURSTS", 5, 0)
const email = "bench-hub@example.com"
const session = new Session("bench:hub")
const log = session.log

const ms = (n: number) => fmt(n, 1)
const cellsOf = (d: Distribution) => [fmt(d.count), ms(d.p50), ms(d.p95), ms(d.p99), ms(d.max)]

const main = async (): Promise<number> => {
  const burnbox = await Burnbox.create(session, { logName: "bench-hub" })
  session.afterCleanup(() => burnbox.summarizeLog())
  await burnbox.start("start")
  await burnbox.setupAccount(email)
  const { subscribers, topic, accountId } = await burnbox.hubSubscribers(email, subscriberCount)
  log(`${subscribers.length} SSE subscribers on ${topic}; service: ${serviceSource()}`)

  const publisher = await burnbox.db()
  const listener = await burnbox.db()
  const notified = new Map<number, number>()
  listener.on("notification", (message) => {
    const at = epochMs()
    const payload = JSON.parse(message.payload ?? "{}") as { messageId?: number }
    if (typeof payload.messageId === "number") notified.set(payload.messageId, at)
  })
  await listener.query("LISTEN burnbox_realtime")
  const indexes = subscribers.map(() => ({ read: 0, at: new Map<number, number>() }))
  const heardAt = (index: number, id: number) => {
    const sse = subscribers[index]!
    const seen = indexes[index]!
    for (; seen.read < sse.events.length; seen.read++) {
      const event = sse.events[seen.read]!
      if (event.data.type === "message.processed") seen.at.set(event.data.messageId, performance.timeOrigin + event.at)
    }
    return seen.at.get(id)
  }
  let next = 1
  const payloads = (count: number) =>
    Array.from({ length: count }, () => JSON.stringify({ accountId, aliasId: 1, messageId: next++, status: "processed", id: `urn:uuid:${crypto.randomUUID()}` }))

  const rows: Array<Array<string>> = []
  const measure = async (name: string, publish: () => Promise<ReadonlyArray<number>>) => {
    const before = cpuSnapshot(burnbox.pid)
    const ids = await publish()
    const deadline = Date.now() + 30_000
    while (Date.now() < deadline && !ids.every((id) => notified.has(id) && subscribers.every((_, i) => heardAt(i, id) !== undefined))) await sleep(50)
    const cpu = cpuShare(before, cpuSnapshot(burnbox.pid))
    const lags = ids.flatMap((id) => subscribers.flatMap((_, i) => {
      const at = heardAt(i, id)
      return at === undefined || !notified.has(id) ? [] : [at - notified.get(id)!]
    }))
    const missing = ids.length * subscribers.length - lags.length
    rows.push([`${name}: NOTIFY -> SSE event`, ...cellsOf(distribution(lags)), fmt(cpu.serverProcess), fmt(missing), loadAverage().split(" ")[0]!])
  }

  await measure(`steady ${rate}/s x ${seconds} s`, async () => {
    const ids: Array<number> = []
    // One statement after another on the connection (not awaited one by one: the pacing goes on).
    let queued: Promise<unknown> = Promise.resolve()
    const started = performance.now()
    for (let sent = 0; sent < rate * seconds;) {
      const due = Math.floor(((performance.now() - started) / 1000) * rate) - sent
      if (due > 0) {
        for (const payload of payloads(Math.min(due, rate * seconds - sent))) {
          ids.push(JSON.parse(payload).messageId)
          queued = queued.then(() => publisher.query("SELECT pg_notify('burnbox_realtime', $1)", [payload]))
          sent++
        }
      }
      await sleep(1)
    }
    await queued
    return ids
  })
  if (bursts > 0) {
    await measure(`${bursts} bursts of ${burst} in one statement`, async () => {
      const ids: Array<number> = []
      for (let b = 0; b < bursts; b++) {
        const batch = payloads(burst)
        for (const payload of batch) ids.push(JSON.parse(payload).messageId)
        await publisher.query("SELECT count(pg_notify('burnbox_realtime', p)) FROM unnest($1::text[]) AS p", [batch])
        await sleep(1000)
      }
      return ids
    })
  }
  for (const sse of subscribers) sse.close()

  const out = [
    "",
    `bench:hub: ${subscribers.length} SSE subscribers on one account's topic; ${(await import("node:os")).availableParallelism()} cores; service ${serviceSource()}`,
    table(["ms, per update and subscriber", "n", "p50", "p95", "p99", "max", "service CPU %", "never heard", "load (1 min)"], rows),
    "",
    "Method: the bench NOTIFYs burnbox_realtime itself (payloads shaped as the pipeline's) and LISTENs on it too; each",
    "subscriber stamps each SSE event's arrival, with one clock (performance.timeOrigin + performance.now()). CPU % is the",
    "service process's own (not its PostgreSQL), of one core, over the phase including the wait for the last event."
  ]
  process.stdout.write(out.join("\n") + "\n")
  return 0
}

await session.run(10 * 60_000, main)
