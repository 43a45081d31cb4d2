/**
 * @burnbox/worker: the background work of burnbox.
 *
 * Folders by feature: `pipeline/` (parse -> index -> realtime -> webhook, the rules step to come; mail
 * authentication and its DNS, the mail worker threads that parse and analyze), `webhooks/` (delivery: dispatch, attempts, retries, purge).
 * `Worker.ts` holds the scheduled jobs (alias timers, retention, maintenance) and the one wired
 * layer, `WorkerLive` (pipeline + delivery + scheduled jobs, with the real DNS), which needs
 * StoreLive's services.
 */
export * from "./Worker.ts"
export * from "./pipeline/Pipeline.ts"
export * from "./webhooks/Delivery.ts"
export * from "./push/PushJobs.ts"
export * from "./realtime/MercurePublisher.ts"
export * from "./pipeline/MailAuth.ts"
export * from "./pipeline/MailWorkers.ts"
export { doMailWork, type MailTask, type MailWorkResult, workableInline } from "./pipeline/MailWork.ts"
export * from "./exports/ExportBuilder.ts"
