/**
 * @burnbox/ingest: the SMTP ingest (receive-only), one file: `SmtpIngest.ts`, the smtp-server
 * callbacks (RCPT checks, size cap, bare-LF refusal, the 250 after the commit) and the one wired
 * layer, `IngestLive` (the listener from BurnboxConfig), which needs StoreLive's Mailstore.
 * `smtpListener` is the same listener with options of one's own (tests: port 0).
 */
export * from "./SmtpIngest.ts"
