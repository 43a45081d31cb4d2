/**
 * Realtime: what happened to an account's mail, published once and heard by every process.
 * Publishing is a NOTIFY on one channel (inside the writer's transaction when it is a fragment of
 * the writer's statement, so it is heard at commit or never); each process keeps one LISTEN
 * connection and fans the notifications out in memory to its subscribers. Wait-for-mail, the
 * Mercure hub and the web inbox subscribe here.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Deferred, Effect, Layer, Option, Queue, Schedule, Schema, type Scope } from "effect"
import { SqlClient, type SqlError, type Statement } from "effect/sql"

export const RealtimeChannel = "burnbox_realtime"

/** A message of an account (in one of its aliases' mailboxes) reached the end of the pipeline. */
export const MailEvent = Schema.Struct({
  accountId: Schema.Int,
  aliasId: Schema.Int,
  messageId: Schema.Int,
  status: Schema.Literals(["processed", "failed"])
})
export type MailEvent = typeof MailEvent.Type

const decodeEvent = Schema.decodeUnknownOption(Schema.fromJsonString(MailEvent))

/**
 * The statement fragment that publishes one `MailEvent` per row of `rows` (a CTE or table with
 * `id`, `account_id` and `alias_id` columns): a select-list item for the writer's own statement.
 */
export const publishFragment = (sql: SqlClient.SqlClient, status: MailEvent["status"], rows: string): Statement.Fragment =>
  sql`pg_notify(${RealtimeChannel}, json_build_object('accountId', ${sql(rows)}.account_id, 'aliasId', ${sql(rows)}.alias_id, 'messageId', ${sql(rows)}.id, 'status', ${status}::text)::text)`

/**
 * What a subscriber hears when this process listens again after its LISTEN connection ended:
 * events published meanwhile were not heard, so what it shows is read again.
 */
export const EventsMissed = { missed: true } as const

/** What a subscription delivers: its events, and `EventsMissed` after a gap in listening. */
export type Heard = MailEvent | typeof EventsMissed

/** Which of its accounts' events a subscriber hears: all of them without a test. */
export type EventTest = (event: MailEvent) => boolean

const everyEvent: EventTest = () => true

interface Subscriber {
  readonly events: Queue.Queue<Heard>
  readonly wants: EventTest
}

export class Realtime extends Context.Service<Realtime, {
  /** Publishes to every process, after the surrounding transaction commits (if any). */
  readonly publish: (event: MailEvent) => Effect.Effect<void>
  /**
   * The events of one or more accounts (those `wants`, if given) from now until the scope closes,
   * and `EventsMissed` whenever the process listens again after a gap. A subscription is an entry
   * in its accounts' sets: an event costs a lookup of its account and a test per subscriber of
   * that account, whatever else subscribes.
   */
  readonly subscribe: (accounts: number | ReadonlyArray<number>, wants?: EventTest) => Effect.Effect<Queue.Dequeue<Heard>, never, Scope.Scope>
  /** How many subscriptions are open in this process. */
  readonly subscriptions: Effect.Effect<number>
}>()("burnbox/Realtime") {
  /** One LISTEN connection per process; closing the layer's scope stops it. */
  static readonly layer = Layer.effect(Realtime, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* PgClient.PgClient
    const byAccount = new Map<number, Set<Subscriber>>()
    let open = 0
    const deliver = (event: MailEvent) => {
      for (const subscriber of byAccount.get(event.accountId) ?? []) {
        if (subscriber.wants(event)) Queue.offerUnsafe(subscriber.events, event)
      }
    }
    // Listens until the connection ends, then again a second later; the layer is ready once the
    // first LISTEN holds (if it cannot, the layer fails). Events published while no LISTEN held
    // are not heard: every subscriber hears EventsMissed once listening again, and reads again.
    const listening = yield* Deferred.make<void, SqlError.SqlError>()
    const listen = Effect.scoped(Effect.gen(function*() {
      const notifications = yield* pg.listen(RealtimeChannel).pipe(Effect.tapError((error) => Deferred.fail(listening, error)))
      if (!(yield* Deferred.succeed(listening, undefined))) {
        // A subscriber of several accounts is in several sets: it hears this once.
        for (const subscriber of new Set([...byAccount.values()].flatMap((subscribers) => [...subscribers]))) {
          Queue.offerUnsafe(subscriber.events, EventsMissed)
        }
      }
      for (;;) {
        // Every notification that has arrived is delivered in one step: taken one at a time, each
        // would wait its turn behind every other fiber ready to run (a loop yields between turns),
        // and the last of a commit's notifications would be heard tens of ms after the first.
        const arrived = yield* Queue.takeAll(notifications)
        for (const notification of arrived) Option.map(decodeEvent(notification.payload), deliver)
      }
    }))
    yield* listen.pipe(
      Effect.catchCause((cause) => Effect.logError("realtime: the LISTEN connection ended; listening again in 1 s", cause)),
      Effect.repeat(Schedule.spaced("1 second")),
      Effect.forkScoped
    )
    yield* Deferred.await(listening).pipe(Effect.orDie)
    const subscribe = (accounts: number | ReadonlyArray<number>, wants: EventTest = everyEvent) =>
      Effect.flatMap(Queue.unbounded<Heard>(), (events) => {
        const subscriber: Subscriber = { events, wants }
        const ids = [...new Set(typeof accounts === "number" ? [accounts] : accounts)]
        return Effect.acquireRelease(
          Effect.sync(() => {
            for (const id of ids) {
              const set = byAccount.get(id)
              if (set === undefined) byAccount.set(id, new Set([subscriber]))
              else set.add(subscriber)
            }
            open++
            return events as Queue.Dequeue<Heard>
          }),
          () =>
            Effect.andThen(
              Effect.sync(() => {
                for (const id of ids) {
                  const set = byAccount.get(id)
                  set?.delete(subscriber)
                  if (set?.size === 0) byAccount.delete(id)
                }
                open--
              }),
              Queue.shutdown(events)
            )
        )
      })
    return Realtime.of({
      publish: (event) => sql`SELECT pg_notify(${RealtimeChannel}, ${JSON.stringify(event)})`.pipe(Effect.orDie, Effect.asVoid),
      subscribe,
      subscriptions: Effect.sync(() => open)
    })
  }))
}
