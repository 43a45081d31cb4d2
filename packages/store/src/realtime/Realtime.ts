/**
 * Realtime: what happened to an account's mail, published once and heard by every process.
 * Publishing is a NOTIFY on one channel (inside the writer's transaction when it is a fragment of
 * the writer's statement, so it is heard at commit or never); each process keeps one LISTEN
 * connection and fans the notifications out in memory to its subscribers. Wait-for-mail, the
 * Mercure hub and the web inbox subscribe here.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, PubSub, Queue, Schema, type Scope } from "effect"
import { SqlClient, type Statement } from "effect/sql"

export const RealtimeChannel = "burnbox_realtime"

/** A message of an account reached the end of the pipeline. */
export const MailEvent = Schema.Struct({
  accountId: Schema.Int,
  messageId: Schema.Int,
  status: Schema.Literals(["processed", "failed"])
})
export type MailEvent = typeof MailEvent.Type

const decodeEvent = Schema.decodeUnknownOption(Schema.fromJsonString(MailEvent))

/**
 * The statement fragment that publishes one `MailEvent` per row of `rows` (a CTE or table with
 * `id` and `account_id` columns): a select-list item for the writer's own statement.
 */
export const publishFragment = (sql: SqlClient.SqlClient, status: MailEvent["status"], rows: string): Statement.Fragment =>
  sql`pg_notify(${RealtimeChannel}, json_build_object('accountId', ${sql(rows)}.account_id, 'messageId', ${sql(rows)}.id, 'status', ${status}::text)::text)`

export class Realtime extends Context.Service<Realtime, {
  /** Publishes to every process, after the surrounding transaction commits (if any). */
  readonly publish: (event: MailEvent) => Effect.Effect<void>
  /** The events of one account from now until the scope closes. */
  readonly subscribe: (accountId: number) => Effect.Effect<Queue.Dequeue<MailEvent>, never, Scope.Scope>
}>()("burnbox/Realtime") {
  /** One LISTEN connection per process; closing the layer's scope stops it. */
  static readonly layer = Layer.effect(Realtime, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* PgClient.PgClient
    const hub = yield* PubSub.unbounded<MailEvent>()
    const notifications = yield* pg.listen(RealtimeChannel).pipe(Effect.orDie)
    yield* Queue.take(notifications).pipe(
      Effect.flatMap((notification) => Option.match(decodeEvent(notification.payload), {
        onNone: () => Effect.void,
        onSome: (event) => PubSub.publish(hub, event)
      })),
      Effect.forever,
      Effect.catchCause((cause) => Effect.logError("realtime: the LISTEN connection ended", cause)),
      Effect.forkScoped
    )
    return Realtime.of({
      publish: (event) => sql`SELECT pg_notify(${RealtimeChannel}, ${JSON.stringify(event)})`.pipe(Effect.orDie, Effect.asVoid),
      subscribe: (accountId) =>
        Effect.gen(function*() {
          const all = yield* PubSub.subscribe(hub)
          const mine = yield* Queue.unbounded<MailEvent>()
          yield* PubSub.take(all).pipe(
            Effect.flatMap((event) => event.accountId === accountId ? Queue.offer(mine, event) : Effect.void),
            Effect.forever,
            Effect.forkScoped
          )
          return mine
        })
    })
  }))
}
