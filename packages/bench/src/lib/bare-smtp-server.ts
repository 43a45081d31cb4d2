/**
 * smtp-server alone, the SMTP library burnbox (and maildev) is built on, with burnbox's options
 * and nothing behind it: each message is read to its end and answered 250, nothing is stored.
 * bench-smtp.ts and bench-bigmail.ts measure it as the ceiling of that library on this machine.
 *
 * Usage: node packages/bench/src/lib/bare-smtp-server.ts <port>
 */
import { SMTPServer } from "smtp-server"

const server = new SMTPServer({
  name: "bare.localhost",
  banner: "smtp-server alone, discarding",
  disabledCommands: ["AUTH", "STARTTLS"],
  authOptional: true,
  // the greeting delay as an option: burnbox's patch of smtp-server (pnpm-workspace.yaml)
  earlyTalkerDelay: 0,
  disableReverseLookup: true,
  size: 15_728_640,
  logger: false,
  socketTimeout: 60_000,
  closeTimeout: 5_000,
  maxClients: 1_000,
  onData(stream, _session, callback) {
    stream.on("data", () => {})
    stream.on("end", () => stream.sizeExceeded ? callback(Object.assign(new Error("5.3.4 Too big"), { responseCode: 552 })) : callback(null, "2.0.0 Ok: discarded"))
  }
})
server.listen(Number(process.argv[2]), "127.0.0.1")
process.on("SIGTERM", () => server.close(() => process.exit(0)))
