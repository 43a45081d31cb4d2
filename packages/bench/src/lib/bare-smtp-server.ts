/**
 * smtp-server alone, the SMTP library burnbox (and maildev) is built on, with burnbox's options
 * and nothing behind it: each message is read to its end and answered 250, nothing is stored.
 * bench-smtp.ts measures it as the ceiling of that library on this machine.
 *
 * Usage: node scripts/lib/bare-smtp-server.ts <port>
 */
import { createRequire } from "node:module"

/** The part of smtp-server's interface used here (the library is a dependency of packages/ingest, not of scripts). */
interface DataStream {
  readonly sizeExceeded: boolean
  on(event: "data" | "end", listener: () => void): void
}
type Reply = (error: Error | null, message?: string) => void
interface SMTPServerClass {
  new(options: Record<string, unknown> & { onData(stream: DataStream, session: unknown, callback: Reply): void }): {
    listen(port: number, host: string): void
    close(callback: () => void): void
  }
}
const { SMTPServer } = createRequire(new URL("../../packages/ingest/package.json", import.meta.url))("smtp-server") as { SMTPServer: SMTPServerClass }

const server = new SMTPServer({
  name: "bare.localhost",
  banner: "smtp-server alone, discarding",
  disabledCommands: ["AUTH", "STARTTLS"],
  authOptional: true,
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
