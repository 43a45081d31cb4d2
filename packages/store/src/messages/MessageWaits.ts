/**
 * Waiting for mail (decisions.md, "Waiting for mail"): GET /messages?wait=S holds an empty page,
 * and GET /messages/{id}?wait=S a message still in the pipeline, until the pipeline's Realtime
 * event for it arrives or the time runs out.
 *
 * A wait subscribes first (so nothing processed before the first read is missed), reads once,
 * and then reads again only when an event that can change its answer arrives: no polling, and no
 * database connection is held between reads. The subscription lives in the request's scope: a
 * client that goes away interrupts the request and so unsubscribes. `release` (the server shutting
 * down) makes every wait answer what it last read, and any later one answer at once.
 */
import type { InvalidCursor, MessageDetail, MessageNotFound, MessagePage, SearchQueryError } from "@burnbox/domain"
import { Context, Deferred, Duration, Effect, Layer, Queue } from "effect"
import { phaseClock, phaseStampsOn, stampPhase } from "../platform/PhaseStamps.ts"
import { type EventTest, Realtime } from "../realtime/Realtime.ts"
import { MailboxAccess } from "../sharing/MailboxAccess.ts"
import { type ListPage, Messages } from "./Messages.ts"

/** Stamps the messages of an answer a wake-up brought: when the wait woke, and when its read answered. */
const stampWoken = <A>(idsOf: (answer: A) => ReadonlyArray<number>) => (answer: A, wokeAt: number) => {
  const ids = idsOf(answer)
  stampPhase("wait.woke", ids, wokeAt)
  stampPhase("wait.read", ids)
}

/** A message has left the pipeline: what a wait is for. */
const finished = (status: MessageDetail["processingStatus"]) => status === "processed" || status === "failed"

/**
 * Reads, and while `answered` says no, reads again on each wake-up (wake-ups that came together
 * are one read) until `within` has passed or `released` completes. At the deadline it reads once
 * more, so a wake-up that never came (the LISTEN connection lost, say) costs a waiter time, never
 * mail that is there; on release it answers the last read at once.
 */
export const holdUntil = <A, E, R>(options: {
  readonly read: Effect.Effect<A, E, R>
  readonly answered: (answer: A) => boolean
  readonly wakes: Queue.Dequeue<unknown>
  readonly within: Duration.Input
  readonly released: Effect.Effect<void>
  /** Told of an answer a wake-up brought, with when that wake-up came (PhaseStamps). */
  readonly woken?: ((answer: A, wokeAt: number) => void) | undefined
}): Effect.Effect<A, E, R> =>
  Effect.gen(function*() {
    let answer = yield* options.read
    if (options.answered(answer)) return answer
    const untilAnswered = Effect.gen(function*() {
      for (;;) {
        yield* Queue.take(options.wakes)
        const wokeAt = phaseClock()
        yield* Queue.clear(options.wakes)
        answer = yield* options.read
        if (options.answered(answer)) return options.woken?.(answer, wokeAt)
      }
    })
    const ended = yield* Effect.raceFirst(
      Effect.map(Effect.timeoutOption(untilAnswered, options.within), (done) => done._tag === "Some" ? "answered" as const : "deadline" as const),
      Effect.as(options.released, "released" as const)
    )
    return ended === "deadline" ? yield* options.read : answer
  })

export class MessageWaits extends Context.Service<MessageWaits, {
  /** GET /messages?wait: the page, held while no message of it has left the pipeline. */
  readonly list: (accountId: number, page: ListPage, wait: Duration.Input) => Effect.Effect<MessagePage, InvalidCursor | SearchQueryError>
  /** GET /messages/{id}?wait: the detail, held while the message is `stub` or `processing`. */
  readonly detail: (accountId: number, id: number, baseUrl: string, wait: Duration.Input) => Effect.Effect<MessageDetail, MessageNotFound>
  /** Every wait answers now with what it has, and any later one at once (shutdown). */
  readonly release: Effect.Effect<void>
}>()("burnbox/MessageWaits") {
  /** Needs Messages, Realtime and MailboxAccess. */
  static readonly layerNoDeps = Layer.effect(MessageWaits, Effect.gen(function*() {
    const messages = yield* Messages
    const realtime = yield* Realtime
    const access = yield* MailboxAccess
    const released = yield* Deferred.make<void>()
    yield* Effect.addFinalizer(() => Deferred.succeed(released, undefined))

    const hold = <A, E>(
      accountId: number,
      wants: EventTest,
      read: Effect.Effect<A, E>,
      answered: (a: A) => boolean,
      within: Duration.Input,
      woken?: (a: A, wokeAt: number) => void
    ) =>
      Effect.gen(function*() {
        // Events name the mailbox's owner: every account whose mail the reader reads can wake it.
        const wakes = yield* realtime.subscribe(yield* access.accountsReadBy(accountId), wants)
        return yield* holdUntil({ read, answered, wakes, within, released: Deferred.await(released), woken })
      }).pipe(Effect.scoped)

    const list = Effect.fn("MessageWaits.list")(function*(accountId: number, page: ListPage, wait: Duration.Input) {
      const tail = (page.sort ?? "newest") === "oldest"
      const alias = page.alias
      return yield* hold(
        accountId,
        (event) => alias === undefined || event.aliasId === alias,
        messages.list(accountId, { ...page, tail }),
        (answer) => answer.items.some((item) => finished(item.processingStatus)),
        wait,
        phaseStampsOn ? stampWoken((answer) => answer.items.filter((item) => finished(item.processingStatus)).map((item) => item.id)) : undefined
      )
    })

    const detail = Effect.fn("MessageWaits.detail")(function*(accountId: number, id: number, baseUrl: string, wait: Duration.Input) {
      return yield* hold(
        accountId,
        (event) => event.messageId === id,
        messages.detail(accountId, id, baseUrl),
        // A message the caller may not read fails the read at once: nothing to wait for.
        (answer) => finished(answer.processingStatus),
        wait,
        phaseStampsOn ? stampWoken((answer) => [answer.id]) : undefined
      )
    })

    return MessageWaits.of({ list, detail, release: Deferred.succeed(released, undefined).pipe(Effect.asVoid) })
  }))
}
