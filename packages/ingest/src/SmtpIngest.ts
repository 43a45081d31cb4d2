/**
 * The SMTP listener (receive-only, no AUTH). Until aliases exist every recipient is unknown,
 * so RCPT TO answers 550 5.1.1; the message pipeline arrives with the mail-in work.
 */
import { BurnboxConfig } from "@burnbox/store"
import { Effect, Layer } from "effect"
import { SMTPServer } from "smtp-server"

export const MaxMessageBytes = 15_728_640

export const SmtpIngestLive = Layer.effectDiscard(Effect.gen(function*() {
  const config = yield* BurnboxConfig
  const server = new SMTPServer({
    name: new URL(config.siteUrl).hostname,
    banner: "burnbox ESMTP receive-only",
    disabledCommands: ["AUTH", "STARTTLS"],
    authOptional: true,
    size: MaxMessageBytes,
    hideSize: false,
    logger: false,
    socketTimeout: 60_000,
    closeTimeout: 5_000,
    onRcptTo(address, _session, callback) {
      const error = Object.assign(new Error(`5.1.1 <${address.address}>: no such mailbox here`), { responseCode: 550 })
      callback(error)
    },
    onData(stream, _session, callback) {
      stream.resume()
      stream.on("end", () => callback(Object.assign(new Error("5.1.1 no valid recipients"), { responseCode: 550 })))
    }
  })
  yield* Effect.acquireRelease(
    Effect.callback<void, Error>((resume) => {
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(config.smtpPort, config.host, () => resume(Effect.void))
    }),
    () => Effect.callback<void>((resume) => server.close(() => resume(Effect.void)))
  ).pipe(Effect.orDie)
  yield* Effect.logInfo(`SMTP ingest listening on ${config.host}:${config.smtpPort}`)
}))
