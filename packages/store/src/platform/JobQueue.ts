/**
 * JobQueue: durable background and scheduled work with retries, on pg-boss in the same
 * PostgreSQL (its own `pgboss` schema and small `pg` pool: pg-boss cannot run over the Effect
 * PgClient, its setup SQL is multi-statement). Timers, retention and maintenance today; exports,
 * browser push and plan-change effects next. Every handler must be idempotent: a job may run
 * twice, and several workers share the queues. pg-boss polls (half a second at its quickest), so
 * latency-critical mail work stays on MailQueue (architecture.md).
 */
import { Context, Effect, Layer, Redacted } from "effect"
import pg from "pg"
import { PgBoss } from "pg-boss"
import { DatabaseUrl } from "./Database.ts"

/** The advisory lock key pg-boss's start is taken under (the migrations' is 727272). */
const PgBossStartLock = 727273

/**
 * Runs `start` under a session advisory lock: pg-boss creates its schema at its first start, and
 * two workers starting together on a fresh database would both try (`type "job_state" already
 * exists`); one at a time, the second finds it made.
 */
const startSerialized = async (connectionString: string, start: () => Promise<unknown>) => {
  const client = new pg.Client({ connectionString, application_name: "burnbox-worker" })
  await client.connect()
  try {
    await client.query("SELECT pg_advisory_lock($1)", [PgBossStartLock])
    await start()
  } finally {
    await client.end()
  }
}

export class JobQueue extends Context.Service<JobQueue, {
  /** Creates the queue (once) and runs `handler` for each of its jobs in this process. */
  readonly work: <A, R>(name: string, handler: Effect.Effect<A, never, R>) => Effect.Effect<void, never, R>
  /** Sends a job to `name` on a cron schedule (UTC); pg-boss sends each tick once across every process. */
  readonly schedule: (name: string, cron: string) => Effect.Effect<void>
  /** Sends one job to `name` now. */
  readonly send: (name: string) => Effect.Effect<void>
}>()("burnbox/JobQueue") {
  /** pg-boss started on the database, stopped gracefully when the layer's scope closes. */
  static readonly layer = Layer.effect(JobQueue, Effect.gen(function*() {
    const url = yield* DatabaseUrl
    const context = yield* Effect.context<never>()
    let stopping = false
    const boss = yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const boss = new PgBoss({ connectionString: Redacted.value(url), schema: "pgboss", max: 4, application_name: "burnbox-worker" })
        boss.on("error", (error) => {
          // While stopping, connections closing under pg-boss are expected, not news.
          if (!stopping) Effect.runFork(Effect.logError(`pg-boss: ${error.message}`).pipe(Effect.provideContext(context)))
        })
        await startSerialized(Redacted.value(url), () => boss.start())
        return boss
      }),
      (started) =>
        Effect.promise(async () => {
          stopping = true
          await started.stop({ graceful: true, close: true, timeout: 10_000 })
        })
    )
    const created = new Set<string>()
    const ensure = (name: string) =>
      Effect.promise(async () => {
        if (created.has(name)) return
        await boss.createQueue(name)
        created.add(name)
      })
    return JobQueue.of({
      work: <A, R>(name: string, handler: Effect.Effect<A, never, R>) =>
        Effect.gen(function*() {
          yield* ensure(name)
          const services = yield* Effect.context<R>()
          yield* Effect.promise(() =>
            boss.work(name, () =>
              Effect.runPromise(handler.pipe(
                Effect.tap((result) => Effect.logDebug(`${name} done`, result)),
                Effect.withSpan(`JobQueue.${name}`),
                Effect.provideContext(services)
              ))
            )
          )
        }),
      schedule: (name, cron) => Effect.andThen(ensure(name), Effect.promise(() => boss.schedule(name, cron))),
      send: (name) => Effect.andThen(ensure(name), Effect.promise(() => boss.send(name)).pipe(Effect.asVoid))
    })
  }))
}
