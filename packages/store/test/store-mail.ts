/**
 * Mail for the store tests: accepted through Mailstore as ingest accepts it, then processed the
 * way the worker's pipeline does (claim, parse, analyse, the batched store of MailQueue).
 */
import { analyzeMessage, buildTestMessage, parseMessage, type TestMessageRequest, workedMail } from "@burnbox/domain/mail/index"
import { MailQueue, Mailstore, type ProcessedMessage } from "@burnbox/store"
import { Clock, Effect } from "effect"

/** An account with one alias (StoreTesting.seedAlias). */
export interface Mailbox {
  readonly accountId: number
  readonly aliasId: number
  readonly address: string
}

/** Accepts `raw` for the mailbox as it arrived (one array, or the pieces in order); answers the message id. */
export const acceptRaw = (to: Mailbox, raw: Uint8Array | ReadonlyArray<Uint8Array>) =>
  Effect.gen(function*() {
    const mailstore = yield* Mailstore
    const [accepted] = yield* mailstore.accept({
      deliveries: [{ aliasId: to.aliasId, accountId: to.accountId, recipient: to.address }],
      raw,
      source: "smtp",
      envelopeFrom: "bounce@example.com",
      clientAddress: "192.0.2.1",
      clientHelo: "mx.example.com"
    })
    return accepted!.id
  }).pipe(Effect.orDie)

/** Builds a test message for the mailbox (sent now, by the test clock) and accepts it. */
export const acceptMail = (to: Mailbox, message: Omit<TestMessageRequest, "from"> & { readonly from?: string }) =>
  Effect.gen(function*() {
    const date = new Date(yield* Clock.currentTimeMillis)
    return yield* acceptRaw(to, buildTestMessage({ from: "Shop <shop@example.com>", ...message }, { to: to.address, date }))
  })

/** Processes every accepted message (claims until none is left); answers the ids it stored. */
export const processAll = Effect.gen(function*() {
  const queue = yield* MailQueue
  const done: Array<number> = []
  for (;;) {
    const claimed = yield* queue.claim
    if (claimed.length === 0) return done
    const batch: Array<ProcessedMessage> = []
    for (const message of claimed) {
      const raw = message.raw ?? (yield* queue.readRaw(message.id))
      const result = yield* Effect.promise(() => parseMessage(raw!))
      // Raw bytes that are no mail fail, as the pipeline fails them.
      if (!result.ok) {
        yield* queue.fail(message.id, `unparsable: ${result.reason}`)
        continue
      }
      batch.push({ message, mail: workedMail(result.message, analyzeMessage(result.message)), auth: { spf: null, dkim: null, dmarc: null }, events: [] })
    }
    if (batch.length > 0) yield* queue.store(batch)
    done.push(...batch.map((ready) => ready.message.id))
  }
})

/** Accepts and processes one message; answers its id. */
export const deliverMail = (to: Mailbox, message: Omit<TestMessageRequest, "from"> & { readonly from?: string }) =>
  Effect.gen(function*() {
    const id = yield* acceptMail(to, message)
    yield* processAll
    return id
  })
