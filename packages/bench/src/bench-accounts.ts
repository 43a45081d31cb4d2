/**
 * One alias against 100 aliases over 10 accounts (#36 item 2): the same closed-loop SMTP load
 * (the node generator, 50 connections, 5 KB) on `burnbox start`, alternating the two targets
 * BENCH_ROUNDS times, with the load average, PostgreSQL's waits and deadlocks beside each figure.
 *
 * Usage: ./pnpmw bench:accounts (BENCH_SECONDS 8, BENCH_ROUNDS 3, BENCH_CONNECTIONS 50;
 * BENCH_BURNBOX_ROOT runs another tree, e.g. the one before a change, for alternating runs)
 */
import { Burnbox, sampleWaits, Session, waitsByStatementText, waitsText } from "./lib/burnbox.ts"
import { envInt, fmt, loadAverage, median } from "./lib/common.ts"
import { countsText, messageFactory, runSmtpLoad } from "./lib/smtp.ts"

const seconds = envInt("BENCH_SECONDS", 8, 1)
const rounds = envInt("BENCH_ROUNDS", 3, 1)
const connections = envInt("BENCH_CONNECTIONS", 50, 1)
const size = envInt("BENCH_SIZE", 5_150, 200)
const session = new Session("bench:accounts")
const log = session.log
/** A subaddress of `address` per run, so each run's mail is told apart. */
const sub = (address: string, run: string) => address.replace("@", `+${run}@`)

const main = async (): Promise<number> => {
  const burnbox = await Burnbox.create(session, { logName: "bench-accounts" })
  session.afterCleanup(() => burnbox.summarizeLog())
  await burnbox.start("start")
  const oneToken = await burnbox.setupAccount("bench-one@example.com")
  const one = await burnbox.claimAlias(oneToken)
  const spread: Array<string> = []
  for (let i = 0; i < 10; i++) {
    const email = `bench-spread-${i}@example.com`
    const token = await burnbox.setupAccount(email)
    for (const a of await burnbox.claimAliases(email, token, 10)) spread.push(a.address)
  }
  log(`one alias ${one.address}; ${spread.length} aliases over 10 accounts`)
  const db = await burnbox.db()
  const targets = {
    "one alias": (run: string) => () => sub(one.address, run),
    "100 aliases / 10 accounts": (run: string) => (index: number) => sub(spread[index % spread.length]!, run)
  }
  const rates = new Map<string, Array<number>>()
  const lines: Array<string> = []
  for (let round = 0; round < rounds; round++) {
    const order = Object.entries(targets)
    if (round % 2 === 1) order.reverse()
    for (const [name, to] of order) {
      session.checkInterrupted()
      const run = `r${round}${name.length}`
      const deadlocksBefore = (await db.query<{ n: string }>("SELECT deadlocks::text AS n FROM pg_stat_database WHERE datname = current_database()")).rows[0]!.n
      const load = loadAverage()
      const sampler = sampleWaits(db)
      const result = await runSmtpLoad({
        port: burnbox.smtpPort,
        connections,
        sourceAddresses: connections,
        make: messageFactory({ from: "sender@bench.localhost", to: to(run), size, tag: run }).make,
        messages: Number.MAX_SAFE_INTEGER,
        durationSeconds: seconds,
        timeoutMs: (seconds + 60) * 1000
      })
      const waits = await sampler.stop()
      const deadlocksAfter = (await db.query<{ n: string }>("SELECT deadlocks::text AS n FROM pg_stat_database WHERE datname = current_database()")).rows[0]!.n
      burnbox.checkAlive()
      const list = rates.get(name) ?? []
      list.push(result.acceptedPerSecond)
      rates.set(name, list)
      const line = `round ${round + 1} ${name}: ${fmt(result.acceptedPerSecond)} msg/s (load ${load}); rejected ${countsText(result.rejected)}; errors ${countsText(result.errors)}; deadlocks ${Number(deadlocksAfter) - Number(deadlocksBefore)}; pg waits ${waitsText(waits)}; by statement ${waitsByStatementText(waits, 3)}`
      log(line)
      lines.push(line)
    }
  }
  // The accounts' storage counters against the bytes stored (with the deltas not folded yet, where they exist).
  const deltas = (await db.query<{ has: boolean }>("SELECT to_regclass('mail_count_deltas') IS NOT NULL AS has")).rows[0]!.has
  const stored = (await db.query<{ n: string; bytes: string; counted: string }>(
    `SELECT count(*)::text AS n, sum(size_bytes)::text AS bytes,
            ((SELECT sum(storage_used_bytes) FROM accounts)
             ${deltas ? "+ coalesce((SELECT sum(bytes) FROM mail_count_deltas), 0)" : ""})::text AS counted FROM messages`
  )).rows[0]!
  lines.push(`stored ${stored.n} messages, ${stored.bytes} bytes; the accounts' storage counters sum to ${stored.counted}`)
  for (const [name, list] of rates) lines.push(`median ${name}: ${fmt(median(list))} msg/s over ${list.length} runs`)
  process.stdout.write(lines.join("\n") + "\n")
  return 0
}

await session.run(30 * 60_000, main)
