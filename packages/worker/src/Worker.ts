/**
 * The worker role (`WorkerLive`): the message pipeline and webhook delivery (MailQueue claims),
 * and scheduled work through the JobQueue (pg-boss). Every queue's handler is idempotent, so a job that
 * runs twice, or two workers racing, change nothing twice.
 *
 * - `alias-timers`, every minute: burn aliases whose self-destruct deadline passed and emit
 *   the 24-hour `alias.expiring` notices, and fold the rules step's unread corrections into the
 *   aliases rows. Also sent once at start, so a worker that was down
 *   catches up at once instead of at the next minute.
 * - `retention`, every five minutes: delete messages past their retention with their bytes, and
 *   protected-desk Sent records older than 90 days.
 * - `maintenance`, hourly: forget ended candidate reservations and expired rate windows.
 * - `exports`, sent by each POST /exports: build every export due (exports/ExportBuilder.ts).
 * - `exports-sweep`, every minute: expire exports past their 24 hours (bytes deleted), and build
 *   what is due (a lost wake-up, an export whose worker died: its lease lapsed).
 * - `push` (push/PushJobs.ts), every minute and whenever a push is queued: send the due browser pushes.
 *
 * With an external Mercure hub configured, `MercurePublisherLive` publishes every realtime update to it.
 */
import { Aliases, Desks, ExportsQueue, ExportsSweepQueue, JobQueue, Mailstore, RateLimiter } from "@burnbox/store"
import { buildExports, sweepExports } from "./exports/ExportBuilder.ts"
import { DnsResolver } from "./pipeline/MailAuth.ts"
import { MailWorkers } from "./pipeline/MailWorkers.ts"
import { PipelineLive } from "./pipeline/Pipeline.ts"
import { DeliveryLive } from "./webhooks/Delivery.ts"
import { PushJobsLive } from "./push/PushJobs.ts"
import { MercurePublisherLive } from "./realtime/MercurePublisher.ts"
import { Effect, Layer } from "effect"

export const Queues = { timers: "alias-timers", retention: "retention", maintenance: "maintenance" } as const

/** Deletes messages past their retention (in batches of 1000 until none is left), then desk Sent records past 90 days. */
export const retention = Effect.gen(function*() {
  const mailstore = yield* Mailstore
  const desks = yield* Desks
  let purged = 0
  for (;;) {
    const batch = yield* mailstore.purgeExpired
    purged += batch
    if (batch < 1000) break
  }
  yield* desks.purgeSent
  return purged
})

export const maintenance = Effect.gen(function*() {
  const aliases = yield* Aliases
  const limiter = yield* RateLimiter
  const reservations = yield* aliases.sweepReservations
  const windows = yield* limiter.sweep
  return { reservations, windows }
})

/**
 * Alias timers, then the mail counters' deltas folded into their rows (messages/MailCounts.ts):
 * what ingest's own fold left, and the rules step's unread corrections.
 */
export const timers = Effect.gen(function*() {
  const aliases = yield* Aliases
  const mailstore = yield* Mailstore
  const fired = yield* aliases.runTimers
  const countsFolded = yield* mailstore.foldCounts
  return { ...fired, countsFolded }
})

/** The scheduled work: the queues' handlers in this process, and their schedules (once across every process). */
export const ScheduledJobsLive = Layer.effectDiscard(Effect.gen(function*() {
  const jobs = yield* JobQueue
  yield* jobs.work(Queues.timers, timers)
  yield* jobs.work(Queues.retention, retention)
  yield* jobs.work(Queues.maintenance, maintenance)
  yield* jobs.schedule(Queues.timers, "* * * * *")
  yield* jobs.schedule(Queues.retention, "*/5 * * * *")
  yield* jobs.schedule(Queues.maintenance, "17 * * * *")
  yield* jobs.work(ExportsQueue, buildExports)
  yield* jobs.work(ExportsSweepQueue, sweepExports)
  yield* jobs.schedule(ExportsSweepQueue, "* * * * *")
  yield* jobs.send(ExportsSweepQueue)
  // A worker that was down catches up on timers at once instead of at the next minute.
  yield* jobs.send(Queues.timers)
  yield* Effect.logInfo("worker started (message pipeline; pg-boss: alias-timers every minute, retention every 5 minutes, maintenance hourly, exports on request and swept every minute)")
}))

/**
 * The worker role: pipeline (its mail worker threads configured from the environment), webhook
 * delivery and scheduled work, on the store's services and the real DNS.
 */
export const WorkerLive = Layer.mergeAll(PipelineLive.pipe(Layer.provide(MailWorkers.layer)), DeliveryLive, ScheduledJobsLive, PushJobsLive, MercurePublisherLive).pipe(
  Layer.provide(DnsResolver.layer)
)
