/**
 * `./pnpmw bench:queue`: why the pipeline's claims (MailQueue) are not pg-boss jobs
 * (architecture.md, "MailQueue"). From the moment work is committed to the moment a worker has
 * it in hand, at a steady rate, for:
 * - MailQueue: a message accepted by Mailstore.accept (stub row + NOTIFY in its transaction),
 *   picked up by a loop that waits on the NOTIFY (or 1 s) and claims, as the pipeline does;
 * - JobQueue (pg-boss 12): a job sent with `send`, picked up by `work` polling at pg-boss's
 *   quickest interval (0.5 s; the default is 2 s).
 * Both on one embedded PostgreSQL in a temporary directory, one after the other, printed side by
 * side. Environment: BENCH_RATE (per second, default 20), BENCH_SECONDS (default 10).
 */
import { mkdtempSync, rmSync } from "node:fs"
import { availableParallelism, tmpdir } from "node:os"
import { join } from "node:path"
import { buildTestMessage } from "@burnbox/domain/mail/index"
import { MailQueue, Mailstore, migrate, removeCluster, seed, startEmbeddedPostgres, withClient, withDatabase } from "@burnbox/store"
import { processOn, seedAlias } from "@burnbox/testkit"
import { Effect, Exit, Layer, Queue, Redacted, Scope } from "effect"
import { PgBoss } from "pg-boss"
import { distribution, envInt, epochMs, fmt, loadAverage, sleep, table } from "./lib/common.ts"

const rate = envInt("BENCH_RATE", 20, 1)
const seconds = envInt("BENCH_SECONDS", 10, 1)
const count = rate * seconds

const mailQueue = (url: Redacted.Redacted<string>) =>
  Effect.gen(function*() {
    const mailstore = yield* Mailstore
    const queue = yield* MailQueue
    const { accountId, address, aliasId } = yield* seedAlias("bench.queue.1")
    const committed = new Map<number, number>()
    const latencies: Array<number> = []
    const wakeups = yield* queue.wakeups
    // The pipeline's loop: claim until empty, then wait for a NOTIFY or a second.
    yield* Effect.gen(function*() {
      for (;;) {
        const claimed = yield* queue.claim
        const at = epochMs()
        for (const message of claimed) latencies.push(at - committed.get(message.id)!)
        if (claimed.length === 0) yield* Effect.race(Queue.take(wakeups).pipe(Effect.ignore), Effect.sleep("1 second"))
      }
    }).pipe(Effect.forkScoped)
    const raw = buildTestMessage({ from: "Bench <bench@example.com>", subject: "queue", text: "Your code is 482913" }, { to: address, date: new Date() })
    for (let i = 0; i < count; i++) {
      const [accepted] = yield* mailstore.accept({ deliveries: [{ aliasId, accountId, recipient: address }], raw, source: "test", envelopeFrom: null, clientAddress: null, clientHelo: null }).pipe(Effect.orDie)
      committed.set(accepted!.id, epochMs())
      yield* Effect.sleep(`${1000 / rate} millis`)
    }
    while (latencies.length < count) yield* Effect.sleep("50 millis")
    return latencies
  }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(MailQueue.layer, Mailstore.layer).pipe(Layer.provideMerge(processOn(url)))))

const pgBoss = async (url: Redacted.Redacted<string>) => {
  const boss = new PgBoss({ connectionString: Redacted.value(url), schema: "pgboss", max: 4 })
  boss.on("error", () => {})
  await boss.start()
  await boss.createQueue("bench")
  const latencies: Array<number> = []
  await boss.work<{ sent: number }>("bench", { pollingIntervalSeconds: 0.5, batchSize: 8 }, async (jobs) => {
    const at = epochMs()
    for (const job of jobs) latencies.push(at - job.data.sent)
  })
  for (let i = 0; i < count; i++) {
    const sent = epochMs()
    await boss.send("bench", { sent })
    await sleep(1000 / rate)
  }
  while (latencies.length < count) await sleep(50)
  await boss.stop({ graceful: false, close: true })
  return latencies
}

const main = async () => {
  const dir = mkdtempSync(join(tmpdir(), "burnbox-bench-queue-"))
  const scope = Scope.makeUnsafe()
  try {
    const cluster = await Effect.runPromise(Scope.provide(scope)(startEmbeddedPostgres(dir)))
    await Effect.runPromise(withClient(cluster.url, (client) => client.query("CREATE DATABASE bench")))
    const url = withDatabase(cluster.url, "bench")
    await Effect.runPromise(migrate(url))
    await Effect.runPromise(seed(url, [{ name: "burnbox.test", tier: "public" }]))
    console.log(`work committed -> in a worker's hands: ${count} items at ${rate}/s each (cores: ${availableParallelism()}, load ${loadAverage()})`)
    const claims = await Effect.runPromise(mailQueue(url))
    const jobs = await pgBoss(url)
    const row = (name: string, values: ReadonlyArray<number>) => {
      const d = distribution(values)
      return [name, fmt(d.p50, 1), fmt(d.p90, 1), fmt(d.p99, 1), fmt(d.max, 1)]
    }
    console.log(table(["queue", "p50 ms", "p90 ms", "p99 ms", "max ms"], [
      row("MailQueue (NOTIFY + SKIP LOCKED claim)", claims),
      row("pg-boss 12 work, polling every 0.5 s", jobs)
    ]))
    console.log(`ratio of p50 (pg-boss / MailQueue): ${fmt(distribution(jobs).p50 / distribution(claims).p50, 1)}x`)
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    removeCluster(dir)
    rmSync(dir, { recursive: true, force: true })
  }
}

await main()
