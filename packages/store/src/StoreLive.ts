/**
 * The store's wired layers, provided once at the edge of each program:
 *
 * - `DatabaseLive`: config -> where the database is (DATABASE_URL or the embedded cluster) ->
 *   migrations and seed -> one PgClient pool, sized by the program.
 * - `StoreLive`: every repository and service of the store the roles use, each built once, on
 *   what `DatabaseLive` gives (the SQL client, DatabaseUrl) and BurnboxConfig.
 */
import { Context, Effect, Layer } from "effect"
import { AccountSnapshots } from "./accounts/AccountSnapshots.ts"
import { Accounts } from "./accounts/Accounts.ts"
import { Aliases, CandidateRandom } from "./aliases/Aliases.ts"
import { Sessions } from "./auth/Sessions.ts"
import { SignIns } from "./auth/SignIns.ts"
import { Desks } from "./desks/Desks.ts"
import { Domains } from "./domains/Domains.ts"
import { BlobStore } from "./platform/BlobStore.ts"
import { MailboxAccess } from "./sharing/MailboxAccess.ts"
import { Shares } from "./sharing/Shares.ts"
import { SearchIndex } from "./search/SearchIndex.ts"
import { Mailstore } from "./messages/Mailstore.ts"
import { MessageActions } from "./messages/MessageActions.ts"
import { StorageCompaction } from "./messages/StorageCompaction.ts"
import { Messages } from "./messages/Messages.ts"
import { MessageWaits } from "./messages/MessageWaits.ts"
import { Notices } from "./notices/Notices.ts"
import { Entitlements } from "./plans/Entitlements.ts"
import { Exports } from "./exports/Exports.ts"
import { MailQueue } from "./pipeline/MailQueue.ts"
import { PipelineWakeups } from "./pipeline/PipelineWakeups.ts"
import { PipelineHandoff } from "./pipeline/PipelineHandoff.ts"
import type { BurnboxConfig } from "./platform/Config.ts"
import { DatabaseUrl, MigratedDatabase, SqlLive } from "./platform/Database.ts"
import { JobQueue } from "./platform/JobQueue.ts"
import { Keyring } from "./platform/Keyring.ts"
import { OutboundHttp } from "./platform/OutboundHttp.ts"
import { RateLimiter } from "./platform/RateLimiter.ts"
import type { StartupFailure } from "./platform/Startup.ts"
import { Realtime } from "./realtime/Realtime.ts"
import { Rules } from "./rules/Rules.ts"
import { Push, PushSender, VapidKeys } from "./push/Push.ts"
import { Tags } from "./tags/Tags.ts"
import { TestMail } from "./testmail/TestMail.ts"
import { Tokens } from "./tokens/Tokens.ts"
import { WebhookDeliveries } from "./webhooks/Deliveries.ts"
import { ServiceKeys } from "./webhooks/ServiceKeys.ts"
import { Signer } from "./webhooks/Signer.ts"
import { Webhooks } from "./webhooks/Webhooks.ts"

/**
 * The SQL client of a program on a migrated database. `maxConnections` is the program's pool
 * (a served role's, or a one-shot command's); `url` is `DatabaseUrl.layerExclusive` for
 * `burnbox start`, which alone may hold its data dir.
 */
export const DatabaseLive = (options: {
  readonly maxConnections: number
  readonly url?: Layer.Layer<DatabaseUrl, StartupFailure, BurnboxConfig>
}) =>
  SqlLive({ maxConnections: options.maxConnections }).pipe(
    Layer.provideMerge(MigratedDatabase.layer),
    Layer.provideMerge(options.url ?? DatabaseUrl.layer)
  )

/**
 * Builds `layer` the first time its service is used, in the scope of the layer this is called
 * from, and answers the service. For the services that start a resource of their own (pg-boss,
 * a LISTEN connection): a program that never uses them does not start them.
 */
const onFirstUse = <I, S, R>(service: Context.Key<I, S>, layer: Layer.Layer<I, never, R>) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const context = yield* Effect.context<R>()
    return yield* Effect.cached(
      Layer.buildWithScope(layer, scope).pipe(Effect.map(Context.get(service)), Effect.provideContext(context))
    )
  })

/** pg-boss, started when a role first works, schedules or sends a job (the worker). */
const JobQueueOnFirstUse = Layer.effect(JobQueue, Effect.gen(function*() {
  const started = yield* onFirstUse(JobQueue, JobQueue.layer)
  return JobQueue.of({
    work: (name, handler) => Effect.flatMap(started, (jobs) => jobs.work(name, handler)),
    schedule: (name, cron) => Effect.flatMap(started, (jobs) => jobs.schedule(name, cron)),
    send: (name) => Effect.flatMap(started, (jobs) => jobs.send(name))
  })
}))

/** The process's LISTEN connection for realtime events, opened when a role first publishes or subscribes. */
const RealtimeOnFirstUse = Layer.effect(Realtime, Effect.gen(function*() {
  const started = yield* onFirstUse(Realtime, Realtime.layer)
  return Realtime.of({
    publish: (event) => Effect.flatMap(started, (realtime) => realtime.publish(event)),
    subscribe: (accounts, wants) => Effect.flatMap(started, (realtime) => realtime.subscribe(accounts, wants)),
    publishChange: (change) => Effect.flatMap(started, (realtime) => realtime.publishChange(change)),
    updates: (accounts, wants, lastEventId) => Effect.flatMap(started, (realtime) => realtime.updates(accounts, wants, lastEventId)),
    everyUpdate: Effect.flatMap(started, (realtime) => realtime.everyUpdate),
    lastEventId: Effect.flatMap(started, (realtime) => realtime.lastEventId),
    subscriptions: Effect.flatMap(started, (realtime) => realtime.subscriptions)
  })
}))

/**
 * What several services of the store read: keys, limits, plans (Entitlements, with the registry of
 * plan-change effects every feature adds to), accounts, and who owns mail bytes, words and mailboxes.
 */
const Shared = Layer.mergeAll(
  Accounts.layer,
  ServiceKeys.layer,
  BlobStore.layer,
  SearchIndex.layer,
  MailboxAccess.layer,
  PipelineWakeups.layer,
  PipelineHandoff.layer
).pipe(
  Layer.provideMerge(Layer.mergeAll(Keyring.layer, RateLimiter.layer, Entitlements.layer))
)

/** The store with its candidate generator given: tests pass a seeded one. */
export const storeLayer = (options: { readonly random: Layer.Layer<CandidateRandom> }) =>
  Layer.mergeAll(
    // accounts, auth, tokens, tags, domains, aliases
    AccountSnapshots.layer,
    Sessions.layer,
    SignIns.layer.pipe(Layer.provide(Sessions.layer)),
    Tokens.layer,
    Tags.layer,
    Domains.layer,
    Aliases.layer,
    // sharing
    Shares.layer,
    // mail rules (the pipeline walks them in MailQueue's store statement)
    Rules.layer,
    // exports: on the shared BlobStore and MailboxAccess, and the JobQueue below
    Exports.layerNoDeps.pipe(Layer.provide(JobQueueOnFirstUse)),
    // messages, notices
    Mailstore.layerNoDeps,
    // test mail: through Aliases and Mailstore, the instances above
    TestMail.layer.pipe(Layer.provide([Aliases.layer, Mailstore.layerNoDeps])),
    Messages.layerNoDeps,
    MessageActions.layerNoDeps,
    // the background conversion of mail stored before migration 0028 (issue #36 item 7)
    StorageCompaction.layerNoDeps,
    // Messages.layerNoDeps and RealtimeOnFirstUse are the instances above (layers are built once).
    MessageWaits.layerNoDeps.pipe(Layer.provide([Messages.layerNoDeps, RealtimeOnFirstUse])),
    Notices.layer,
    // protected operator desks, with their outbound relay
    Desks.layer,
    // webhooks: endpoints, the delivery queue, signatures, the way out
    Webhooks.layer,
    WebhookDeliveries.layer,
    Signer.layerNoDeps,
    OutboundHttp.layer,
    // browser push: through Aliases, OutboundHttp and VapidKeys, the instances here (issue #32)
    VapidKeys.layer,
    Push.layer.pipe(Layer.provide([Aliases.layer, OutboundHttp.layer, VapidKeys.layer])),
    PushSender.layer.pipe(Layer.provide([OutboundHttp.layer, VapidKeys.layer])),
    // background work and events
    MailQueue.layerNoDeps,
    JobQueueOnFirstUse,
    RealtimeOnFirstUse
  ).pipe(
    Layer.provideMerge(Shared),
    Layer.provide(options.random)
  )

/** Every repository and service of the store, each built once; needs the SQL client, BurnboxConfig and DatabaseUrl. */
export const StoreLive = storeLayer({ random: CandidateRandom.layer })
