/**
 * The message pipeline: parse -> index -> realtime -> webhook, then `processed` (the contract's
 * rules step, between parse and index, comes with mail rules: there are none yet).
 * Each worker process keeps up to `InFlight` messages in work at once (claimed and not yet
 * stored), processed concurrently so DNS waits overlap. It claims `stub` rows (and `processing`
 * rows whose worker vanished) with FOR UPDATE SKIP LOCKED, `ClaimBatchSize` at a time, as soon as
 * that many places are free, woken after the accepting commit (PipelineWakeups: in memory when
 * this process accepted it, by LISTEN/NOTIFY when another did) and by a one-second poll as a
 * floor, which bounds what a lost wake-up costs. Each message frees its place the moment it is stored, so a new
 * message waits for a free place, not for the slowest message claimed with it (which is what
 * fixed loops of batches did: bench:pipeline at 500 msg/s queued there). Four claimers claim
 * side by side, each taking its batch's room before its round trip. The claim returns what
 * the work needs (alias, envelope, and the raw bytes of all but large messages).
 *
 * All of one message's results, its events and its status are written in one transaction, so
 * a crash mid-way repeats nothing twice: the message is simply claimed again. Results that are
 * ready together share that transaction (group commit: while one store commits, the next
 * results queue up and are written by one set of statements), which saves most of the
 * per-message round trips; a batch that fails is retried one message at a time, so one bad
 * message cannot hold back the others. Mail that cannot be parsed becomes `failed` with its
 * raw bytes kept.
 *
 * The CPU-heavy work of a message (parsing, analysis, DKIM's reading) runs in a worker thread
 * (MailWorkers), within an allowance of time and memory: mail past it becomes `failed`
 * (`too_complex: ...`) at once, raw bytes kept, and the loops go on with the next message.
 */
import { type EventAlias } from "@burnbox/domain"
import { memoryStep } from "@burnbox/domain/platform/MemorySteps"
import {
  BurnboxConfig,
  type ClaimedMessage,
  ClaimBatchSize,
  MailQueue,
  type NewEvent,
  now,
  PipelineHandoff,
  phaseClock,
  PollEvery,
  type ProcessedMessage,
  stampPhase
} from "@burnbox/store"
import { Deferred, Effect, FiberSet, Layer, Queue, Semaphore } from "effect"
import { type DkimOutcome } from "./Dkim.ts"
import { authenticateBeside, noAuth } from "./MailAuth.ts"
import { freeBytes } from "./MailWork.ts"
import { MailWorkers } from "./MailWorkers.ts"

export { ClaimTimeoutMs } from "@burnbox/store"

/** What authentication makes of a message that was not parsed (it is failed, not stored). */
const unread: DkimOutcome = { ok: false, failed: "not parsed" }

/** After this many claims a message that keeps killing its worker is marked failed. */
export const MaxAttempts = 3
/**
 * Messages in work at once in one worker process: enough that DNS waits and group commits
 * overlap, few enough that a burst waits in the table rather than in memory.
 */
export const InFlight = 64
/** Claims in flight at once: a claim is a round trip, and under load one claimer at a time fell behind (bench:pipeline). */
const Claimers = 4
/**
 * Raw bytes being worked on at once, at most, in KiB: a message costs several times its size
 * while it is parsed and until its results are stored, so a burst of big messages waits for
 * room instead of piling up: four 15 MB messages at a time, where the 32 that four loops of 8 can
 * claim would hold about 5 GB (bench:bigmail: 70-90 MiB for one). Small mail never waits for it; a message larger than the
 * whole budget takes all of it.
 */
export const WorkBudgetKiB = 64 * 1024
/** The permits a message of `sizeBytes` takes from a budget of `budgetKiB`. */
export const workPermits = (sizeBytes: number, budgetKiB: number = WorkBudgetKiB) =>
  Math.min(budgetKiB, Math.max(1, Math.ceil(sizeBytes / 1024)))
/** A store transaction takes at most this many messages, and this many raw bytes' worth of them. */
const StoreBatchMessages = 64
const StoreBatchBytes = 4 * 1024 * 1024
/**
 * Stores in flight at once: a result that comes while one store commits is sent beside it rather
 * than waiting for it (bench:wait: at 200 msg/s, waiting for the one store in flight was a fifth of
 * a message's way to `processed`). Concurrent stores touch different messages; the rare rows they
 * share (an account's mailbox counts, when rules trash or archive) can deadlock them, and a
 * batch that fails is stored again message by message.
 */
const StoreWriters = 2
/** A message larger than this is stored in a transaction of its own, not queued for the group commit. */
const StoreAloneBytes = 256 * 1024

/** The events of one stored message (spec 6.3): message.received, and message.otp_extracted with a code. */
const eventsOf = (
  baseUrl: string,
  { auth, mail: { attachments, digest }, message }: Omit<ProcessedMessage, "events">,
  at: Date
): Array<NewEvent> => {
  const alias: EventAlias = message.alias
  const otp = { code: digest.otpCodes[0] ?? null, links: digest.verificationLinks }
  const common = {
    alias,
    message_id: message.id,
    otp,
    source: message.source,
    received_at: message.receivedAt.toISOString(),
    url: `${baseUrl}/messages/${message.id}`
  }
  const received: NewEvent = {
    accountId: message.accountId,
    alias,
    type: "message.received",
    time: at,
    data: {
      ...common,
      from: { address: digest.sender.address, name: digest.sender.name },
      subject: digest.subject,
      snippet: digest.snippet,
      auth,
      spam_score: null,
      size: message.sizeBytes,
      has_attachments: attachments.length > 0
    }
  }
  return otp.code === null
    ? [received]
    : [received, { accountId: message.accountId, alias, type: "message.otp_extracted", time: at, data: common }]
}

export class Pipeline {
  static readonly make = Effect.gen(function*() {
    const queue = yield* MailQueue
    const config = yield* BurnboxConfig

    // -- group commit ---------------------------------------------------------------------------
    // Whoever brings a result while fewer than StoreWriters stores run writes it, and then
    // whatever queued meanwhile.
    const queued: Array<{ readonly ready: ProcessedMessage; readonly done: Deferred.Deferred<void> }> = []
    let writers = 0
    const takeBatch = () => {
      let bytes = 0
      let n = 0
      while (n < queued.length && n < StoreBatchMessages) {
        bytes += queued[n]!.ready.message.sizeBytes
        if (n > 0 && bytes > StoreBatchBytes) break
        n++
      }
      return queued.splice(0, n)
    }
    const writeQueued = Effect.gen(function*() {
      for (;;) {
        // Checked and released in one step, so nothing can be queued unseen in between.
        if (queued.length === 0) {
          writers--
          return
        }
        const batch = takeBatch()
        const exit = yield* Effect.exit(queue.store(batch.map((item) => item.ready)))
        if (exit._tag === "Success" || batch.length === 1) {
          for (const item of batch) Deferred.doneUnsafe(item.done, exit)
          continue
        }
        // One of them broke the batch: each on its own, so only that one fails.
        for (const item of batch) Deferred.doneUnsafe(item.done, yield* Effect.exit(queue.store([item.ready])))
      }
    })
    const store = (ready: ProcessedMessage) =>
      // A large message is written on its own, beside the group commit: its statement takes long
      // enough (megabytes of text, a large search document) that ordinary mail queued behind it
      // would wait for it, filling the pipeline's places (bench:hostile).
      ready.message.sizeBytes > StoreAloneBytes ? queue.store([ready]) : Effect.gen(function*() {
        const done = yield* Deferred.make<void>()
        queued.push({ ready, done })
        if (writers < StoreWriters) {
          writers++
          // If the writer is interrupted, the next result to arrive writes what is left.
          yield* writeQueued.pipe(Effect.onInterrupt(() => Effect.sync(() => {
            writers--
          })))
        }
        yield* Deferred.await(done)
      })

    const budget = yield* Semaphore.make(WorkBudgetKiB)
    const workers = yield* MailWorkers
    const processOne = (claimed: ClaimedMessage) =>
      Effect.gen(function*() {
        stampPhase("work.started", claimed.id)
        if (claimed.attempts > MaxAttempts) return yield* queue.fail(claimed.id, "gave_up_after_repeated_worker_failures")
        if (!claimed.hasRaw) return yield* queue.fail(claimed.id, "raw_missing")
        memoryStep("main.started", claimed.sizeBytes)
        // A big message's bytes as stored: the mail thread inflates them (MailTask.inflateTo).
        const stored = claimed.raw !== null
          ? { bytes: claimed.raw, zstd: false }
          : claimed.rawZstd !== null
          ? { bytes: claimed.rawZstd, zstd: true }
          : yield* queue.readStoredRaw(claimed.id)
        memoryStep("main.read", claimed.sizeBytes)
        if (stored === undefined) return yield* queue.fail(claimed.id, "raw_missing")
        // Parsing, analysis and DKIM's reading of the message in a worker thread, within its
        // allowance; SPF and DMARC (DNS, no message bytes) here, SPF beside the thread's work.
        // Injected test mail has no sending server to check.
        const smtp = claimed.source === "smtp"
        const work = workers.process({
          raw: stored.bytes,
          ...(stored.zstd ? { inflateTo: claimed.sizeBytes } : {}),
          dkim: smtp ? { sender: claimed.envelopeFrom } : null
        })
        const [result, auth] = smtp
          ? yield* authenticateBeside(work, (done) => (done.ok && done.dkim !== null ? done.dkim : unread), {
            ip: claimed.clientAddress,
            helo: claimed.clientHelo,
            sender: claimed.envelopeFrom
          })
          : [yield* work, noAuth] as const
        memoryStep("main.worked", claimed.sizeBytes)
        if (!result.ok) return yield* queue.fail(claimed.id, `unparsable: ${result.reason}`)
        stampPhase("work.done", claimed.id)
        // The bytes are not needed any more while the message waits for its store.
        const ready = { message: { ...claimed, raw: null, rawZstd: null }, mail: result.mail, auth }
        yield* store({ ...ready, events: eventsOf(config.baseUrl, ready, yield* now) })
        memoryStep("main.stored", claimed.sizeBytes)
        // Stored: a big message's attachments and columns are freed now rather than at this
        // thread's next garbage collection, which under a burst of big mail comes late.
        for (const bytes of [result.mail.columns, ...result.mail.attachments.map((attachment) => attachment.content)]) freeBytes(bytes)
      }).pipe(
        budget.withPermits(workPermits(claimed.sizeBytes)),
        // Past its allowance the message is failed at once, with its raw bytes kept: it would only
        // go past it again.
        Effect.catchTag("MailTooComplex", (error) => queue.fail(claimed.id, `too_complex: ${error.reason}`)),
        Effect.catchCause((cause) =>
          Effect.logError(`pipeline: message ${claimed.id} failed`, cause).pipe(
            Effect.andThen(claimed.attempts >= MaxAttempts ? queue.fail(claimed.id, "processing_error") : Effect.void)
          ))
      )

    /** Claims and processes until no work is left; answers how many it processed. */
    const drain = Effect.gen(function*() {
      let total = 0
      for (;;) {
        const batch = yield* queue.claim
        if (batch.length === 0) return total
        yield* Effect.forEach(batch, processOne, { concurrency: ClaimBatchSize, discard: true })
        total += batch.length
      }
    })

    return { claim: queue.claim, processOne, drain, takeOver: queue.takeOver }
  })
}

/**
 * The pipeline as background fibers of the worker role (needs a DnsResolver and MailWorkers).
 * Mail this process accepts comes from the accepting commit in memory while the claimers are
 * caught up (PipelineHandoff); the rest is claimed.
 */
export const PipelineLive = Layer.effectDiscard(Effect.gen(function*() {
  const queue = yield* MailQueue
  const pipeline = yield* Pipeline.make
  const handoff = yield* PipelineHandoff
  const wakeups = yield* queue.wakeups
  // A wake-up, or the poll: what a lost wake-up (PipelineWakeups) costs at most.
  const waitForWork = Effect.race(Queue.take(wakeups).pipe(Effect.ignore), Effect.sleep(PollEvery))
  const working = yield* FiberSet.make()
  const runWork = yield* FiberSet.runtime(working)<Effect.Services<ReturnType<typeof pipeline.processOne>>>()
  let inFlight = 0
  /** Completed when a place frees while a claimer waits for room. */
  let roomMade: Deferred.Deferred<void> | undefined
  /**
   * The last claim found the queue empty and no accept has left rows for a claim since: only
   * then does the accepting commit hand mail over, so it never overtakes a backlog for long, nor
   * takes the places a claimer waits for.
   */
  let caughtUp = false
  const placesFreed = (n: number) => {
    inFlight -= n
    if (roomMade !== undefined && InFlight - inFlight >= ClaimBatchSize) {
      Deferred.doneUnsafe(roomMade, Effect.void)
      roomMade = undefined
    }
  }
  const placeFreed = Effect.sync(() => placesFreed(1))
  const claimer = Effect.gen(function*() {
    let wokeAt = phaseClock()
    for (;;) {
      // A full batch's room, taken before the claim so claimers running together never overfill.
      if (InFlight - inFlight < ClaimBatchSize) {
        roomMade ??= Deferred.makeUnsafe<void>()
        yield* Deferred.await(roomMade)
        continue
      }
      inFlight += ClaimBatchSize
      const sentAt = phaseClock()
      const batch = yield* queue.claimUpTo(ClaimBatchSize).pipe(Effect.onError(() => Effect.sync(() => placesFreed(ClaimBatchSize))))
      const answeredAt = phaseClock()
      placesFreed(ClaimBatchSize - batch.length)
      caughtUp = batch.length < ClaimBatchSize
      const ids = batch.map((claimed) => claimed.id)
      stampPhase("claim.woke", ids, wokeAt)
      stampPhase("claim.sent", ids, sentAt)
      stampPhase("claim.answered", ids, answeredAt)
      wokeAt = answeredAt
      for (const claimed of batch) yield* FiberSet.run(working, Effect.ensuring(pipeline.processOne(claimed), placeFreed))
      // Fewer than asked: the queue is empty now, and every message queued from here on wakes us.
      if (batch.length < ClaimBatchSize) {
        yield* waitForWork
        wokeAt = phaseClock()
      }
    }
  })
  yield* handoff.attach({
    reserve: (n) => {
      const places = caughtUp && roomMade === undefined ? Math.max(0, Math.min(n, InFlight - inFlight)) : 0
      // Rows it cannot take wait for a claim, and the hand-over for them to be claimed.
      if (places < n) caughtUp = false
      inFlight += places
      return places
    },
    release: placesFreed,
    take: (messages) => {
      for (const claimed of messages) runWork(Effect.ensuring(pipeline.processOne(claimed), placeFreed))
    }
  })
  for (let i = 0; i < Claimers; i++) {
    yield* claimer.pipe(
      Effect.catchCause((cause) => Effect.logError("pipeline claims", cause).pipe(Effect.andThen(Effect.sleep("1 second")))),
      Effect.forever,
      Effect.forkScoped
    )
  }
  // What crashed processes left claimed, taken over about a second after they are gone.
  yield* pipeline.takeOver.pipe(
    Effect.tap((n) => n > 0 ? Effect.logWarning(`pipeline: took over ${n} message(s) claimed by a process that is gone`) : Effect.void),
    Effect.andThen(Effect.sleep("1 second")),
    Effect.catchCause((cause) => Effect.logError("pipeline takeover", cause).pipe(Effect.andThen(Effect.sleep("1 second")))),
    Effect.forever,
    Effect.forkScoped
  )
}))
