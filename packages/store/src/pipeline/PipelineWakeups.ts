/**
 * PipelineWakeups: how the pipeline's claimers hear that mail was queued (issue #36 item 4).
 *
 * An accept that committed tells this process's claimers at once, in memory, and every other
 * process with one NOTIFY on `burnbox_pipeline` sent *after* the commit, outside the accepting
 * transaction: a NOTIFY inside a transaction takes PostgreSQL's global notification-queue lock
 * from before its commit record until the commit is flushed, so every notifying transaction's
 * commit (accepts, the pipeline's stores) waited for the one before it instead of sharing its
 * WAL flush. A NOTIFY lost after a commit (the process dies in between) costs only time: every
 * claimer also claims at least once a second (`PollEvery`), and takes over what a dead process
 * held. Notifications are coalesced: while one is being sent, any number of commits ask for one
 * more. A process hears its own notification through LISTEN too; it carries the sender's tag, so
 * the process that already woke its claimers in memory does not wake them twice.
 */
import { PgClient, type PgConnection } from "@effect/sql-pg"
import { randomBytes } from "node:crypto"
import { Context, Duration, Effect, Layer, PubSub, Queue, type Scope } from "effect"
import { SqlClient, type SqlError } from "effect/sql"

export const PipelineChannel = "burnbox_pipeline"

/** A claimer that heard nothing claims anyway this often: the bound on a lost notification's cost. */
export const PollEvery = Duration.seconds(1)

export class PipelineWakeups extends Context.Service<PipelineWakeups, {
  /** Mail was committed to the queue: wakes this process's claimers now, and every other process's soon after. */
  readonly queued: Effect.Effect<void>
  /** A wake-up each time mail is queued, by this process or another, until the scope closes. */
  readonly wakeups: Effect.Effect<Queue.Dequeue<void>, never, Scope.Scope>
}>()("burnbox/PipelineWakeups") {
  static readonly layer = Layer.effect(PipelineWakeups, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* PgClient.PgClient
    const tag = randomBytes(6).toString("hex")
    const local = yield* PubSub.unbounded<void>()
    // One NOTIFY at a time; commits meanwhile ask for one more (a queue of at most one request).
    const requested = yield* Queue.sliding<void>(1)
    yield* Queue.take(requested).pipe(
      // Its own transaction commits without waiting for its flush (nothing in it needs one): the
      // notification lock it takes is held for microseconds, not through an fsync.
      Effect.andThen(sql`SELECT pg_notify(${PipelineChannel}, ${tag}) FROM set_config('synchronous_commit', 'off', true)`),
      Effect.catchCause((cause) => Effect.logWarning("pipeline: a wake-up NOTIFY failed (other processes' claimers poll)", cause)),
      Effect.forever,
      Effect.forkScoped
    )
    const queued = PubSub.publish(local, undefined).pipe(Effect.andThen(Queue.offer(requested, undefined)), Effect.asVoid)

    const wakeups = Effect.gen(function*() {
      const heard = yield* Queue.unbounded<void>()
      const mine = yield* PubSub.subscribe(local)
      yield* PubSub.take(mine).pipe(Effect.andThen(Queue.offer(heard, undefined)), Effect.forever, Effect.forkScoped)
      const hear = (notifications: Queue.Dequeue<PgConnection.Notification, SqlError.SqlError>) =>
        Queue.take(notifications).pipe(
          Effect.flatMap((notification) => notification.payload === tag ? Effect.void : Queue.offer(heard, undefined)),
          Effect.forever
        )
      // Listening before this answers, so nothing queued after it goes unheard; a LISTEN that
      // ends is opened again (meanwhile the claimers' poll is the floor).
      const first = yield* pg.listen(PipelineChannel).pipe(Effect.orDie)
      const again = Effect.scoped(Effect.flatMap(pg.listen(PipelineChannel), hear))
      yield* hear(first).pipe(
        Effect.catchCause((cause) => Effect.logWarning("pipeline: the wake-up LISTEN ended; listening again in 1 s", cause)),
        Effect.andThen(Effect.sleep(PollEvery).pipe(
          Effect.andThen(again),
          Effect.catchCause((cause) => Effect.logWarning("pipeline: the wake-up LISTEN ended; listening again in 1 s", cause)),
          Effect.forever
        )),
        Effect.forkScoped
      )
      return heard as Queue.Dequeue<void>
    })

    return PipelineWakeups.of({ queued, wakeups })
  }))
}
