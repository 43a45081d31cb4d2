/**
 * @burnbox/testkit: what tests run burnbox with. No layer of its own: `Harness.ts` builds the
 * packages' wired layers (httpListener, smtpListener, PipelineLive on storeLayer) on a database
 * cloned from the migrated template, and `Receiver.ts` a delivery worker on StoreLive, each
 * overriding only what a test controls (ports, DNS, webhook targets, the candidate seed, the
 * clock). Beside them: `ManualClock.ts`, `StoreTesting.ts` (one repository on a fresh database),
 * `SmtpClient.ts`, `ServiceProcess.ts` (the real `burnbox` program as a child process),
 * `FakeMail.ts` (realistic verification mail, raw or as a test-mail request), `Inject.ts` (mail
 * into a harness by the API or SMTP, and waiting for the pipeline), `ApiSteps.ts` (claim an
 * alias, read messages), `HostileMail.ts` (pathological mail for the hostile-mail tests),
 * `Shapes.ts`, the global setup (one embedded PostgreSQL per run) and reporter.
 */
export * from "./ApiSteps.ts"
export * from "./FakeMail.ts"
export * from "./Harness.ts"
export * from "./HostileMail.ts"
export * from "./Inject.ts"
export * from "./ManualClock.ts"
export * from "./Shapes.ts"
export * from "./Receiver.ts"
export * from "./ServiceProcess.ts"
export * from "./SmtpClient.ts"
export * from "./SseClient.ts"
export * from "./StoreTesting.ts"
