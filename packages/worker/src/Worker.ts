/**
 * The worker role: scheduled work through pg-boss on the same PostgreSQL (its own small
 * `pg` pool and schema, as pg-boss needs). Every queue's handler is idempotent, so a job that
 * runs twice, or two workers racing, change nothing twice.
 *
 * - `alias-timers`, every minute: burn aliases whose self-destruct deadline passed and emit
 *   the 24-hour `alias.expiring` notices. Also sent once at start, so a worker that was down
 *   catches up at once instead of at the next minute.
 * - `retention`, every five minutes: delete messages past their retention with their bytes.
 * - `maintenance`, hourly: forget ended candidate reservations and expired rate windows.
 */
import { Aliases, DatabaseUrl, Mailstore, RateLimiter } from "@burnbox/store"
import { DnsResolver } from "./MailAuth.ts"
import { PipelineLive } from "./Pipeline.ts"
import { DeliveryLive } from "./Delivery.ts"
import { Effect, Layer, Redacted } from "effect"
import { PgBoss } from "pg-boss"

export const Queues = { timers: "alias-timers", retention: "retention", maintenance: "maintenance" } as const

/** Deletes messages past their retention (in batches of 1000 until none is left). */
export const retention = Effect.gen(function*() {
  const mailstore = yield* Mailstore
  let purged = 0
  for (;;) {
    const batch = yield* mailstore.purgeExpired
    purged += batch
    if (batch < 1000) return purged
  }
})

export const maintenance = Effect.gen(function*() {
  const aliases = yield* Aliases
  const limiter = yield* RateLimiter
  const reservations = yield* aliases.sweepReservations
  const windows = yield* limiter.sweep
  return { reservations, windows }
})

export const timers = Effect.gen(function*() {
  const aliases = yield* Aliases
  return yield* aliases.runTimers
})

export const WorkerLive = Layer.effectDiscard(Effect.gen(function*() {
  const url = yield* DatabaseUrl
  const context = yield* Effect.context<Aliases | RateLimiter | Mailstore>()
  const run = <A>(name: string, effect: Effect.Effect<A, never, Aliases | RateLimiter | Mailstore>) => () =>
    Effect.runPromise(effect.pipe(
      Effect.tap((result) => Effect.logDebug(`${name} done`, result)),
      Effect.provideContext(context)
    ))

  let stopping = false
  const boss = yield* Effect.acquireRelease(
    Effect.promise(async () => {
      const boss = new PgBoss({ connectionString: Redacted.value(url), schema: "pgboss", max: 4, application_name: "burnbox-worker" })
      boss.on("error", (error) => {
        // While stopping, connections closing under pg-boss are expected, not news.
        if (!stopping) Effect.runFork(Effect.logError(`pg-boss: ${error.message}`).pipe(Effect.provideContext(context)))
      })
      await boss.start()
      return boss
    }),
    (boss) =>
      Effect.promise(async () => {
        stopping = true
        await boss.stop({ graceful: true, close: true, timeout: 10_000 })
      })
  )

  yield* Effect.promise(async () => {
    for (const queue of Object.values(Queues)) await boss.createQueue(queue)
    await boss.schedule(Queues.timers, "* * * * *")
    await boss.schedule(Queues.retention, "*/5 * * * *")
    await boss.schedule(Queues.maintenance, "17 * * * *")
    await boss.work(Queues.timers, run(Queues.timers, timers))
    await boss.work(Queues.retention, run(Queues.retention, retention))
    await boss.work(Queues.maintenance, run(Queues.maintenance, maintenance))
    await boss.send(Queues.timers)
  })
  yield* Effect.logInfo("worker started (message pipeline; pg-boss: alias-timers every minute, retention every 5 minutes, maintenance hourly)")
})).pipe(
  Layer.merge(PipelineLive.pipe(Layer.provide(DnsResolver.layer))),
  Layer.merge(DeliveryLive),
  Layer.provide(Layer.mergeAll(Aliases.layer, RateLimiter.layer, Mailstore.layer).pipe(Layer.provide(RateLimiter.layer)))
)

