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
import { stampPhase } from "../platform/PhaseStamps.ts"

export const RealtimeChannel = "burnbox_realtime"

/** A message of an account (in one of its aliases' mailboxes) reached the end of the pipeline. */
export const MailEvent = Schema.Struct({
  accountId: Schema.Int,
  aliasId: Schema.Int,
  messageId: Schema.Int,
  status: Schema.Literals(["processed", "failed"])
})
export type MailEvent = typeof MailEvent.Type

/**
 * Other changes the Mercure hub tells an account's browsers about (issue #32): what changed and
 * its ids, never a body. `message.changed` is one reader's own state of messages (read, starred,
 * tags, trash...): only that reader's topic hears it, never the guests of its mailboxes.
 */
export const ChangeType = Schema.Literals([
  "message.changed",
  "alias.claimed",
  "alias.paused",
  "alias.resumed",
  "alias.burned",
  "share.started",
  "share.stopped"
])
export type ChangeType = typeof ChangeType.Type

export const ChangeEvent = Schema.Struct({
  /** Whose topic hears it (an alias's owner; the reader, for `message.changed`; the guest, for a share). */
  accountId: Schema.Int,
  type: ChangeType,
  /** The mailbox, when the change is of one mailbox. */
  aliasId: Schema.optionalKey(Schema.Int),
  messageIds: Schema.optionalKey(Schema.Array(Schema.Int))
})
export type ChangeEvent = typeof ChangeEvent.Type

/**
 * One update as the hub keeps and sends it: a mail event (`message.processed`/`message.failed`)
 * or a change, with an id every process gives it alike (it travels in the notification), so a
 * subscriber may resume from it on any process that heard it.
 */
export interface Update {
  readonly id: string
  readonly accountId: number
  readonly type: `message.${MailEvent["status"]}` | ChangeType
  readonly aliasId?: number
  readonly messageId?: number
  readonly messageIds?: ReadonlyArray<number>
}

const Wire = Schema.Struct({ id: Schema.optionalKey(Schema.String) })
const decodeWire = Schema.decodeUnknownOption(Schema.fromJsonString(Schema.Union([
  Schema.Struct({ ...MailEvent.fields, ...Wire.fields }),
  Schema.Struct({ ...ChangeEvent.fields, ...Wire.fields })
])))

/** How many updates a process keeps for subscribers that come back with `Last-Event-ID`. */
export const HistorySize = 2000

/**
 * How many updates a hub subscription holds for a subscriber that does not take them (a slow
 * reader: its socket full). One more and they are dropped for one `EventsMissed` (what it shows
 * is read again), so a slow subscriber costs bounded memory: as far behind as the history goes.
 */
export const PendingLimit = HistorySize

const newId = () => `urn:uuid:${crypto.randomUUID()}`

/**
 * The statement fragment that publishes one `MailEvent` per row of `rows` (a CTE or table with
 * `id`, `account_id` and `alias_id` columns): a select-list item for the writer's own statement.
 */
export const publishFragment = (sql: SqlClient.SqlClient, status: MailEvent["status"], rows: string): Statement.Fragment =>
  sql`pg_notify(${RealtimeChannel}, json_build_object('accountId', ${sql(rows)}.account_id, 'aliasId', ${sql(rows)}.alias_id, 'messageId', ${sql(rows)}.id, 'status', ${status}::text, 'id', 'urn:uuid:' || gen_random_uuid())::text)`

/**
 * The select-list item that publishes `changes` from the writer's own statement (at commit;
 * nothing when its transaction rolls back), those `where` keeps (a condition on the statement's
 * own steps: nothing is published when it is false).
 */
export const changesFragment = (sql: SqlClient.SqlClient, changes: ReadonlyArray<ChangeEvent>, where: Statement.Fragment = sql`true`): Statement.Fragment =>
  sql`(SELECT count(*) FROM json_array_elements(${JSON.stringify(changes.map((change) => ({ ...change, id: newId() })))}::json) AS c
       CROSS JOIN LATERAL pg_notify(${RealtimeChannel}, c::text) AS n WHERE ${where})`

/**
 * The statement that publishes `changes` (at commit, when inside a transaction): for writers
 * that have no Realtime service at hand (the alias, message and share repositories).
 */
export const notifyChanges = (sql: SqlClient.SqlClient, changes: ReadonlyArray<ChangeEvent>): Effect.Effect<void> =>
  changes.length === 0 ? Effect.void : sql`SELECT ${changesFragment(sql, changes)} AS notified`.pipe(Effect.orDie, Effect.asVoid)

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

/** Which of its accounts' updates a hub subscriber hears. */
export type UpdateTest = (update: Update) => boolean

/** What a hub subscription delivers: updates, and `EventsMissed` when some cannot be replayed. */
export type HeardUpdate = Update | typeof EventsMissed

interface Subscriber {
  readonly hear: (update: Update, event: MailEvent | undefined) => void
  readonly missed: () => void
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
  /** Publishes a change to every process's hub subscribers, after the surrounding transaction commits (if any). */
  readonly publishChange: (change: ChangeEvent) => Effect.Effect<void>
  /**
   * The hub's subscription: the updates of one or more accounts (those `wants`) from now until the
   * scope closes; with `lastEventId`, first those this process kept after it (`EventsMissed`
   * first when it no longer has that id: what was missed must be read again). It holds at most
   * PendingLimit updates not taken: past that they give way to one `EventsMissed`.
   */
  readonly updates: (
    accounts: ReadonlyArray<number>,
    wants: UpdateTest,
    lastEventId?: string
  ) => Effect.Effect<Queue.Dequeue<HeardUpdate>, never, Scope.Scope>
  /** Every account's updates from now until the scope closes (the external hub's publisher). */
  readonly everyUpdate: Effect.Effect<Queue.Dequeue<HeardUpdate>, never, Scope.Scope>
  /** The id of the last update this process kept, if any (the hub's `Last-Event-ID` answer header). */
  readonly lastEventId: Effect.Effect<string | undefined>
  /** How many subscriptions are open in this process. */
  readonly subscriptions: Effect.Effect<number>
}>()("burnbox/Realtime") {
  /** One LISTEN connection per process; closing the layer's scope stops it. */
  static readonly layer = Layer.effect(Realtime, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const pg = yield* PgClient.PgClient
    const byAccount = new Map<number, Set<Subscriber>>()
    const everything = new Set<Subscriber>()
    let open = 0
    // The last HistorySize updates heard, oldest first (a ring: `start` is the oldest).
    const history: Array<Update> = []
    let start = 0
    const keep = (update: Update) => {
      if (history.length < HistorySize) history.push(update)
      else {
        history[start] = update
        start = (start + 1) % HistorySize
      }
    }
    /** The kept updates after the one with `id`, oldest first; undefined when it is not kept. */
    const keptAfter = (id: string): ReadonlyArray<Update> | undefined => {
      const ordered = [...history.slice(start), ...history.slice(0, start)]
      for (let i = ordered.length - 1; i >= 0; i--) {
        if (ordered[i]!.id === id) return ordered.slice(i + 1)
      }
      return undefined
    }
    const deliver = (payload: MailEvent | ChangeEvent, id: string) => {
      const event = "status" in payload ? payload : undefined
      const update: Update = "status" in payload
        ? { id, accountId: payload.accountId, type: `message.${payload.status}`, aliasId: payload.aliasId, messageId: payload.messageId }
        : { id, ...payload }
      keep(update)
      if (event !== undefined) stampPhase("realtime.heard", event.messageId)
      for (const subscriber of byAccount.get(update.accountId) ?? []) subscriber.hear(update, event)
      for (const subscriber of everything) subscriber.hear(update, event)
    }
    // Listens until the connection ends, then again a second later; the layer is ready once the
    // first LISTEN holds (if it cannot, the layer fails). Events published while no LISTEN held
    // are not heard: every subscriber hears EventsMissed once listening again, and reads again.
    const listening = yield* Deferred.make<void, SqlError.SqlError>()
    const listen = Effect.scoped(Effect.gen(function*() {
      const notifications = yield* pg.listen(RealtimeChannel).pipe(Effect.tapError((error) => Deferred.fail(listening, error)))
      if (!(yield* Deferred.succeed(listening, undefined))) {
        // A subscriber of several accounts is in several sets: it hears this once.
        for (const subscriber of new Set([...everything, ...[...byAccount.values()].flatMap((subscribers) => [...subscribers])])) {
          subscriber.missed()
        }
      }
      for (;;) {
        // Every notification that has arrived is delivered in one step: taken one at a time, each
        // would wait its turn behind every other fiber ready to run (a loop yields between turns),
        // and the last of a commit's notifications would be heard tens of ms after the first.
        const arrived = yield* Queue.takeAll(notifications)
        for (const notification of arrived) {
          Option.map(decodeWire(notification.payload), ({ id, ...payload }) => deliver(payload, id ?? newId()))
        }
      }
    }))
    yield* listen.pipe(
      Effect.catchCause((cause) => Effect.logError("realtime: the LISTEN connection ended; listening again in 1 s", cause)),
      Effect.repeat(Schedule.spaced("1 second")),
      Effect.forkScoped
    )
    yield* Deferred.await(listening).pipe(Effect.orDie)
    /** Enters `subscriber` in its accounts' sets for the scope; `first` runs in the same step (no update between). */
    const enter = <A>(accounts: number | ReadonlyArray<number>, subscriber: Subscriber, events: Queue.Queue<A>, first: () => void = () => {}) => {
        const ids = [...new Set(typeof accounts === "number" ? [accounts] : accounts)]
        return Effect.acquireRelease(
          Effect.sync(() => {
            first()
            for (const id of ids) {
              const set = byAccount.get(id)
              if (set === undefined) byAccount.set(id, new Set([subscriber]))
              else set.add(subscriber)
            }
            open++
            return events as Queue.Dequeue<A>
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
    }
    const subscribe = (accounts: number | ReadonlyArray<number>, wants: EventTest = everyEvent) =>
      Effect.flatMap(Queue.unbounded<Heard>(), (events) =>
        enter(accounts, {
          hear: (_update, event) => {
            if (event !== undefined && wants(event)) Queue.offerUnsafe(events, event)
          },
          missed: () => Queue.offerUnsafe(events, EventsMissed)
        }, events))
    const updates = (accounts: ReadonlyArray<number>, wants: UpdateTest, lastEventId?: string) =>
      Effect.flatMap(Queue.unbounded<HeardUpdate>(), (events) =>
        enter(accounts, {
          hear: (update) => {
            if (!wants(update)) return
            if (Queue.sizeUnsafe(events) < PendingLimit) Queue.offerUnsafe(events, update)
            else {
              while (Queue.takeUnsafe(events) !== undefined) {}
              Queue.offerUnsafe(events, EventsMissed)
            }
          },
          missed: () => Queue.offerUnsafe(events, EventsMissed)
        }, events, () => {
          if (lastEventId === undefined) return
          const kept = keptAfter(lastEventId)
          if (kept === undefined) Queue.offerUnsafe(events, EventsMissed)
          else for (const update of kept) if (accounts.includes(update.accountId) && wants(update)) Queue.offerUnsafe(events, update)
        }))
    const everyUpdate = Effect.flatMap(Queue.unbounded<HeardUpdate>(), (events) => {
      const subscriber: Subscriber = {
        hear: (update) => Queue.offerUnsafe(events, update),
        missed: () => Queue.offerUnsafe(events, EventsMissed)
      }
      return Effect.acquireRelease(
        Effect.sync(() => {
          everything.add(subscriber)
          return events as Queue.Dequeue<HeardUpdate>
        }),
        () => Effect.andThen(Effect.sync(() => everything.delete(subscriber)), Queue.shutdown(events))
      )
    })
    const notify = (payload: object) =>
      sql`SELECT pg_notify(${RealtimeChannel}, ${JSON.stringify({ ...payload, id: newId() })})`.pipe(Effect.orDie, Effect.asVoid)
    return Realtime.of({
      publish: notify,
      publishChange: notify,
      subscribe,
      updates,
      everyUpdate,
      lastEventId: Effect.sync(() => history.length === 0 ? undefined : history[(start + history.length - 1) % HistorySize]?.id),
      subscriptions: Effect.sync(() => open)
    })
  }))
}
