/**
 * From 250 to the SSE event: for every message, the time from burnbox's SMTP 250 to the moment
 * the Mercure hub's update for it (`message.processed`) arrives at a browser-like subscriber
 * (an EventSource's request: GET /.well-known/mercure?topic=..., with the session cookie). Goal
 * (issue #32): p50 <= 30 ms, p99 <= 150 ms at 200 messages/s.
 *
 * Usage: pnpm bench:realtime
 *
 * What it does:
 * 1. starts `burnbox start` (API, hub, SMTP ingest and pipeline in one process, embedded
 *    PostgreSQL); a pro account with raised limits, REALTIME_ALIASES claimed aliases, a browser
 *    session (sign-in), and REALTIME_SUBSCRIBERS SSE subscriptions to the account's topic;
 * 2. LISTENs on `burnbox_realtime` for the reference of the same run: the pipeline's NOTIFY (sent
 *    in the transaction that marks the message processed, delivered at its commit), stamped with
 *    the same clock;
 * 3. phases: REALTIME_LOW_RATE (5) msg/s for 10 s, then REALTIME_RATE (200) msg/s for
 *    REALTIME_SECONDS (5), spread over the aliases; after each, until every subscriber heard every
 *    message (at most 30 s);
 * 4. per message: sse = the update's arrival at a subscriber minus its 250 (every subscriber's
 *    arrival counts); notify = its NOTIFY minus its 250; and sse minus notify (the hub's cost).
 *
 * Environment: REALTIME_SUBSCRIBERS (10), REALTIME_ALIASES (20), REALTIME_RATE (200),
 * REALTIME_SECONDS (5), REALTIME_LOW_RATE (5), REALTIME_CONNECTIONS (20), BENCH_LOG_DIR,
 * BENCH_BURNBOX_ROOT.
 */
import type { SseSubscription } from "@burnbox/testkit/SseClient"
import { Burnbox, Session } from "./lib/burnbox.ts"
import { distribution, type Distribution, envInt, epochMs, fmt, loadAverage, sleep, table } from "./lib/common.ts"
import { countsText, messageFactory, runSmtpLoad } from "./lib/smtp.ts"

const subscriberCount = envInt("REALTIME_SUBSCRIBERS", 10, 1)
const aliasCount = envInt("REALTIME_ALIASES", 20, 1)
const rate = envInt("REALTIME_RATE", 200, 1)
const seconds = envInt("REALTIME_SECONDS", 5, 1)
const lowRate = envInt("REALTIME_LOW_RATE", 5, 0)
const connections = envInt("REALTIME_CONNECTIONS", 20, 1)
const goalP50 = 30
const goalP99 = 150
const email = "bench-realtime@example.com"
const session = new Session("bench:realtime")
const log = session.log

const ms = (n: number) => fmt(n, 1)
const cellsOf = (d: Distribution) => [fmt(d.count), ms(d.p50), ms(d.p95), ms(d.p99), ms(d.max)]

const main = async (): Promise<number> => {
  const burnbox = await Burnbox.create(session, { logName: "bench-realtime" })
  session.afterCleanup(() => burnbox.summarizeLog())
  await burnbox.start("start")
  const token = await burnbox.setupAccount(email)
  const aliases = await burnbox.claimAliases(email, token, aliasCount)

  // Browser sessions: the hub authorizes their cookie for the account's own topic.
  const { subscribers, topic } = await burnbox.hubSubscribers(email, subscriberCount)
  log(`${aliases.length} aliases, ${subscribers.length} SSE subscribers on ${topic}`)

  const listener = await burnbox.db()
  const notified = new Map<number, number>()
  listener.on("notification", (message) => {
    const at = epochMs()
    const payload = JSON.parse(message.payload ?? "{}") as { messageId?: number }
    if (typeof payload.messageId === "number" && !notified.has(payload.messageId)) notified.set(payload.messageId, at)
  })
  await listener.query("LISTEN burnbox_realtime")
  // The subscribers' clock is performance.now(); the 250s and NOTIFYs are epochMs (timeOrigin + now).
  // Each subscriber's events indexed by message id as they are read (not scanned per message).
  const indexes = subscribers.map(() => ({ read: 0, at: new Map<number, number>() }))
  const heardAt = (sse: SseSubscription, id: number) => {
    const index = indexes[subscribers.indexOf(sse)]!
    for (; index.read < sse.events.length; index.read++) {
      const event = sse.events[index.read]!
      if (event.data.type === "message.processed" && !index.at.has(event.data.messageId)) index.at.set(event.data.messageId, performance.timeOrigin + event.at)
    }
    return index.at.get(id)
  }

  const rows: Array<Array<string>> = []
  const goals: Array<string> = []
  const phase = async (name: string, phaseRate: number, secs: number) => {
    const factory = messageFactory({ from: "sender@bench.localhost", to: (index) => aliases[index % aliases.length]!.address, size: 2_000, tag: name.replace(/\W/g, "") })
    const sent: Array<{ id: number; repliedAt: number }> = []
    log(`${name}: ${phaseRate} msg/s for ${secs} s`)
    const result = await runSmtpLoad({
      port: burnbox.smtpPort,
      connections,
      sourceAddresses: connections,
      make: factory.make,
      rate: phaseRate,
      seconds: secs,
      timeoutMs: (secs + 60) * 1000,
      onDelivery: (delivery) => {
        const match = /stored as (\d+)/.exec(delivery.reply.text)
        if (match !== null) sent.push({ id: Number(match[1]), repliedAt: delivery.repliedAt })
      }
    })
    const heardByAll = (id: number) => subscribers.every((sse) => heardAt(sse, id) !== undefined)
    const deadline = Date.now() + 30_000
    while (Date.now() < deadline && !sent.every((s) => heardByAll(s.id) && notified.has(s.id))) await sleep(100)
    burnbox.checkAlive()
    log(`${name}: ${result.accepted} accepted, rejected ${countsText(result.rejected)}, errors ${countsText(result.errors)}`)
    const seen = sent.filter((s) => notified.has(s.id))
    const arrivals = seen.flatMap((s) => subscribers.flatMap((sse) => {
      const at = heardAt(sse, s.id)
      return at === undefined ? [] : [{ s, at }]
    }))
    const sse = distribution(arrivals.map(({ s, at }) => at - s.repliedAt))
    const notify = distribution(seen.map((s) => notified.get(s.id)! - s.repliedAt))
    const hub = distribution(arrivals.map(({ s, at }) => at - notified.get(s.id)!))
    rows.push(
      [`${name}: 250 -> SSE event (each subscriber)`, ...cellsOf(sse)],
      [`${name}: 250 -> NOTIFY (reference, bench:pipeline's figure)`, ...cellsOf(notify)],
      [`${name}: NOTIFY -> SSE event`, ...cellsOf(hub)]
    )
    const missing = sent.length * subscribers.length - arrivals.length
    goals.push(`${name}: ${sent.length} messages x ${subscribers.length} subscribers, ${missing} events never heard; goal p50 <= ${goalP50} ms: ${sse.p50 <= goalP50 ? "MET" : "NOT MET"} (${ms(sse.p50)}); goal p99 <= ${goalP99} ms: ${sse.p99 <= goalP99 ? "MET" : "NOT MET"} (${ms(sse.p99)})`)
  }
  if (lowRate > 0) await phase(`${lowRate} msg/s`, lowRate, 10)
  await phase(`${rate} msg/s`, rate, seconds)
  for (const sse of subscribers) sse.close()

  const out = [
    "",
    `bench:realtime: ${subscribers.length} SSE subscribers on one account's topic, mail spread over ${aliases.length} aliases; ${(await import("node:os")).availableParallelism()} cores; load average ${loadAverage()}`,
    table(["ms, per message", "n", "p50", "p95", "p99", "max"], rows),
    ...goals.map((g) => `  ${g}`),
    "",
    "Method: the generator stamps each 250 (with its \"stored as <id>\"), each subscriber the arrival of each SSE event, and a",
    "LISTEN connection each NOTIFY on burnbox_realtime, with one clock (performance.timeOrigin + performance.now())."
  ]
  process.stdout.write(out.join("\n") + "\n")
  return 0
}

await session.run(10 * 60_000, main)
