/**
 * A real SMTP relay for the tests of outbound mail (protected-desk sends): an smtp-server on
 * 127.0.0.1 that takes AUTH PLAIN/LOGIN (without TLS, or after STARTTLS with smtp-server's
 * self-signed certificate when `startTls` is set), records every message it accepts (envelope,
 * the user it authenticated, whether the session was TLS, raw bytes, parsed), and can be stopped
 * to be a relay that is down, then started again on the same port.
 */
import { parseMessage, type ParsedMessage } from "@burnbox/domain/mail/parse"
import { SMTPServer } from "smtp-server"

export interface RelayedMail {
  readonly envelope: { readonly from: string; readonly to: ReadonlyArray<string> }
  /** The user that authenticated, if any. */
  readonly user: string | undefined
  /** The session was upgraded with STARTTLS. */
  readonly secure: boolean
  readonly raw: Buffer
  readonly parsed: ParsedMessage
}

export interface Relay {
  readonly port: number
  /** `smtp://user:pass@127.0.0.1:port`, as BURNBOX_OUTBOUND_SMTP_URL takes it. */
  readonly url: string
  /** What it accepted, in order. */
  readonly received: ReadonlyArray<RelayedMail>
  /** Stops listening (a relay that is down: connections are refused). */
  readonly stop: () => Promise<void>
  /** Listens again on the same port. */
  readonly start: () => Promise<void>
}

export const RelayCredentials = { user: "relay-user", pass: "relay-pass" } as const

export const startRelay = async (options: { readonly startTls?: boolean } = {}): Promise<Relay> => {
  const received: Array<RelayedMail> = []
  const make = () =>
    new SMTPServer({
      name: "relay.test",
      disabledCommands: options.startTls === true ? [] : ["STARTTLS"],
      allowInsecureAuth: true,
      authOptional: true,
      disableReverseLookup: true,
      logger: false,
      onAuth(auth, _session, callback) {
        if (auth.username === RelayCredentials.user && auth.password === RelayCredentials.pass) return callback(null, { user: auth.username })
        callback(new Error("5.7.8 Authentication failed"))
      },
      onData(stream, session, callback) {
        const chunks: Array<Buffer> = []
        stream.on("data", (chunk: Buffer) => chunks.push(chunk))
        stream.on("end", () => {
          const raw = Buffer.concat(chunks)
          void parseMessage(raw).then((result) => {
            if (!result.ok) return callback(new Error(`554 unparsable message: ${result.reason}`))
            received.push({
              envelope: {
                from: session.envelope.mailFrom === false ? "" : session.envelope.mailFrom.address,
                to: session.envelope.rcptTo.map((r) => r.address)
              },
              user: typeof session.user === "string" ? session.user : undefined,
              secure: session.secure,
              raw,
              parsed: result.message
            })
            callback()
          })
        })
      }
    })
  let server = make()
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once("error", reject)
      server.listen(port, "127.0.0.1", () => {
        const address = server.server.address()
        resolve(typeof address === "object" && address !== null ? address.port : port)
      })
    })
  const port = await listen(0)
  let listening = true
  return {
    port,
    url: `smtp://${RelayCredentials.user}:${RelayCredentials.pass}@127.0.0.1:${port}`,
    received,
    stop: async () => {
      if (!listening) return
      listening = false
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
    start: async () => {
      if (listening) return
      server = make()
      await listen(port)
      listening = true
    }
  }
}
