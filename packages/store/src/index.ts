/**
 * @burnbox/store: PostgreSQL through @effect/sql-pg, the only place SQL lives.
 *
 * One folder per feature, each holding its repositories and services: accounts, auth, tokens,
 * tags, domains, aliases, messages, testmail, notices, webhooks, plans (Entitlements: the one
 * reader of an account's plan and the registry of plan-change effects), pipeline (the mail
 * queue's claims and batched store), search (the index's statement fragments), realtime, sharing. `platform/` holds what
 * cuts across them: config, the database (embedded PostgreSQL, migrations, startup checks), the
 * keyring, rate limits, outbound HTTP, the job queue, time and SQL helpers.
 *
 * Wired once, in `StoreLive.ts`: `DatabaseLive` (config -> database URL -> migrations -> pool)
 * and `StoreLive` (every repository and service, each built once); a program provides both at
 * its edge and nothing else of the store.
 */
export * from "./accounts/Accounts.ts"
export * from "./platform/Config.ts"
export * from "./platform/Database.ts"
export * from "./domains/Domains.ts"
export * from "./platform/EmbeddedPostgres.ts"
export * from "./platform/Startup.ts"
export * from "./platform/Keyring.ts"
export * from "./platform/Migrations.ts"
export * from "./platform/RateLimiter.ts"
export * from "./auth/Sessions.ts"
export * from "./auth/SignIns.ts"
export * from "./tags/Tags.ts"
export * from "./platform/Time.ts"
export * from "./tokens/Tokens.ts"
export * from "./aliases/Aliases.ts"
export * from "./webhooks/Outbox.ts"
export * from "./messages/Mailstore.ts"
export * from "./messages/MailCounts.ts"
export * from "./messages/Messages.ts"
export { encodeCursor } from "./messages/MessageList.ts"
export * from "./messages/MessageWaits.ts"
export * from "./messages/MessageActions.ts"
export * from "./messages/StorageCompaction.ts"
export * from "./webhooks/ServiceKeys.ts"
export * from "./webhooks/Webhooks.ts"
export * from "./platform/OutboundHttp.ts"
export * from "./webhooks/Signer.ts"
export * from "./webhooks/Deliveries.ts"
export * from "./notices/Notices.ts"
export * from "./accounts/AccountSnapshots.ts"
export * from "./platform/PgText.ts"
export * from "./platform/SqlErrors.ts"
export * from "./pipeline/MailQueue.ts"
export * from "./pipeline/PipelineHandoff.ts"
export * from "./pipeline/PipelineWakeups.ts"
export * from "./realtime/Realtime.ts"
export * from "./search/SearchIndex.ts"
export * from "./platform/BlobStore.ts"
export * from "./sharing/MailboxAccess.ts"
export * from "./sharing/Shares.ts"
export * from "./exports/Exports.ts"
export * from "./platform/JobQueue.ts"
export * from "./plans/Entitlements.ts"
export * from "./testmail/TestMail.ts"
export * from "./desks/Desks.ts"
export * from "./platform/OutboundMail.ts"
export * from "./rules/Rules.ts"
export * from "./StoreLive.ts"
export * from "./push/Push.ts"
export * from "./realtime/ExternalHub.ts"
export * from "./platform/PhaseStamps.ts"
