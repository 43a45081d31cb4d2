/**
 * PipelineHandoff: mail accepted by a process that runs the pipeline too (`burnbox start`'s
 * ingest-and-worker thread, the test harness) goes from the accepting commit to that pipeline in
 * memory (issue #36 item 4). The accepting statement writes such a message already claimed by
 * this process (`processing`, named as a claim names it, one attempt), and after its commit the
 * message, with the raw bytes the process still holds, is handed to the pipeline: no wake-up, no
 * claim round trip, no raw bytes read back and decompressed. At 200 msg/s those were a wake-up
 * and a claim waiting their turn on the busy event loop and pool (bench:wait).
 *
 * A claim still: the accepting commit is durable, so a process that dies with handed messages
 * leaves them `processing` under its name, and the takeover of any living process gives them back
 * (MailQueue.takeOver), as it does a claim's; the store writes only rows still `processing`.
 *
 * Only while the pipeline is caught up: it takes messages (`reserve`) only while the last claim
 * found the queue empty, no accept has left rows for a claim since, no claimer waits for room, and
 * it has free places. Otherwise the accept writes
 * `stub` rows and the claimers take them in order, so a backlog is never overtaken for long and
 * never starved. A process without a pipeline (`burnbox ingest`), or one whose connections bear no
 * claim name, takes none.
 */
import { Context, Effect, Layer, Schema, type Scope } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import type { ClaimedMessage } from "./MailQueue.ts"

/** What the pipeline of this process offers the accepting side. */
export interface PipelineTaker {
  /** Places taken now for up to `n` messages (0 when it is not caught up, or full); held until taken or released. */
  readonly reserve: (n: number) => number
  /** Gives back places reserved and not used (the accept failed, or wrote fewer). */
  readonly release: (n: number) => void
  /** Starts work on messages the accepting commit claimed for it, one reserved place each. */
  readonly take: (messages: ReadonlyArray<ClaimedMessage>) => void
}

/**
 * This process's claim name: its connections' `application_name` (Database.ts), which a claim
 * records and the takeover looks for among living connections; null for a pool named otherwise.
 */
export const claimerName = (sql: SqlClient.SqlClient): Effect.Effect<string | null> =>
  SqlSchema.findAll({
    Request: Schema.Void,
    Result: Schema.Struct({ name: Schema.String }),
    execute: () => sql`SELECT current_setting('application_name') AS name`
  })(undefined).pipe(
    Effect.map((rows) => rows[0] !== undefined && rows[0].name.startsWith("burnbox/") ? rows[0].name : null),
    Effect.orDie
  )

export class PipelineHandoff extends Context.Service<PipelineHandoff, {
  /** The claim name the accepting statement writes for messages it hands over (null: it hands none). */
  readonly worker: string | null
  /** Places for up to `n` messages in this process's pipeline, taken now (0 without one). */
  readonly reserve: (n: number) => number
  /** Gives back reserved places. */
  readonly release: (n: number) => void
  /** Hands messages claimed by the accepting commit to the pipeline (each on a reserved place). */
  readonly hand: (messages: ReadonlyArray<ClaimedMessage>) => void
  /** The pipeline of this process, taking handed mail until the scope closes. */
  readonly attach: (taker: PipelineTaker) => Effect.Effect<void, never, Scope.Scope>
}>()("burnbox/PipelineHandoff") {
  static readonly layer = Layer.effect(PipelineHandoff, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const worker = yield* claimerName(sql)
    let taker: PipelineTaker | undefined
    return PipelineHandoff.of({
      worker,
      reserve: (n) => (worker === null || taker === undefined || n <= 0 ? 0 : taker.reserve(n)),
      release: (n) => {
        if (n > 0) taker?.release(n)
      },
      hand: (messages) => {
        if (messages.length > 0) taker?.take(messages)
      },
      attach: (attached) =>
        Effect.acquireRelease(
          Effect.sync(() => {
            taker = attached
          }),
          () =>
            Effect.sync(() => {
              if (taker === attached) taker = undefined
            })
        )
    })
  }))

  /** Takes nothing: every accepted message waits for a claim (tests of the claims and the poll). */
  static readonly none = Layer.succeed(PipelineHandoff, PipelineHandoff.of({
    worker: null,
    reserve: () => 0,
    release: () => undefined,
    hand: () => undefined,
    attach: () => Effect.void
  }))
}
