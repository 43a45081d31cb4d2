/**
 * The SMTP ingest (receive-only: no AUTH). RCPT TO accepts an active alias on a known domain
 * (local part case-insensitive, `+detail` subaddressing), refuses a paused alias with
 * 550 5.2.1 and anything else with 550 5.1.1. DATA is refused with 552 over 15728640 bytes and
 * with 550 5.6.11 when a line ends in a bare LF (an SMTP smuggling defence). The 250 goes out
 * only after the message, its raw bytes and its pipeline work are committed; a database
 * failure answers 451 so the sender retries. Every reply after EHLO carries an enhanced status
 * code (RFC 2034, advertised as ENHANCEDSTATUSCODES).
 */
import { readFileSync } from "node:fs"
import { BurnboxConfig, type Delivery, Mailstore, stampPhase, StartupFailure } from "@burnbox/store"
import { Cause, Config, Context, Effect, Exit, Layer, Option } from "effect"
import { SMTPServer, type SMTPServerAddress, type SMTPServerSession } from "smtp-server"

export const MaxMessageBytes = 15_728_640
export const MaxRecipients = 100
/** The default of BURNBOX_SMTP_MAX_CONNECTIONS_PER_ADDRESS. */
export const MaxConnectionsPerAddress = 20

/**
 * The machine's own address: a CI fleet's jobs and the app under test send from it, dozens at
 * once, so it is not held to the per-address limit (the server's 1,000 connections in all still are).
 */
const ownAddresses = new Set(["127.0.0.1", "::1", "::ffff:127.0.0.1"])

/** True when a new connection from `address`, making `open` from it, is over the per-address limit (0: none). */
export const overConnectionLimit = (address: string, open: number, limit: number): boolean =>
  limit > 0 && open > limit && !ownAddresses.has(address)

const smtpError = (code: number, text: string) => Object.assign(new Error(text), { responseCode: code })

/** True when `chunk` holds a LF not preceded by CR (`previous` is the byte before the chunk). */
export const hasBareLf = (chunk: Uint8Array, previous: number): boolean => {
  for (let i = 0; i < chunk.length; i++) {
    if (chunk[i] === 0x0a && (i === 0 ? previous : chunk[i - 1]) !== 0x0d) return true
  }
  return false
}

interface AcceptedRecipient extends SMTPServerAddress {
  delivery?: Delivery
}

/** One stored message per alias of this envelope, however many of its addresses it names. */
const deliveriesOf = (session: SMTPServerSession): Array<Delivery> => {
  const byAlias = new Map<number, Delivery>()
  for (const recipient of session.envelope.rcptTo as Array<AcceptedRecipient>) {
    if (recipient.delivery !== undefined && !byAlias.has(recipient.delivery.aliasId)) byAlias.set(recipient.delivery.aliasId, recipient.delivery)
  }
  return [...byAlias.values()]
}

export interface SmtpOptions {
  readonly port: number
  readonly host: string
  readonly hostname: string
  readonly tls?: { readonly key: Buffer; readonly cert: Buffer } | undefined
  /** Connections at once from one client address (MaxConnectionsPerAddress when omitted; 0: no limit). */
  readonly maxConnectionsPerAddress?: number | undefined
}

export const makeSmtpServer = Effect.fnUntraced(function*(options: SmtpOptions) {
  const mailstore = yield* Mailstore
  const context = yield* Effect.context<never>()
  const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromiseExit(Effect.provideContext(effect, context))
  const connections = new Map<string, number>()
  const perAddress = options.maxConnectionsPerAddress ?? MaxConnectionsPerAddress

  const server = new SMTPServer({
    name: options.hostname,
    banner: "burnbox ESMTP receive-only",
    disabledCommands: options.tls === undefined ? ["AUTH", "STARTTLS"] : ["AUTH"],
    ...(options.tls === undefined ? {} : { key: options.tls.key, cert: options.tls.cert }),
    authOptional: true,
    // No wait before the greeting (smtp-server's is 100 ms, patched into an option): it catches
    // clients that talk too soon, a spam signal that means little to a receive-only inbox that
    // takes mail only for claimed aliases, and it costs every sender 100 ms per connection.
    earlyTalkerDelay: 0,
    // The client's name from reverse DNS is only decoration here (nothing reads it; SPF checks
    // the address and the HELO name), and the lookup holds every new connection's greeting.
    disableReverseLookup: true,
    // RFC 2034: EHLO advertises ENHANCEDSTATUSCODES and every reply after it (but the 354) carries
    // one. smtp-server derives a code from the reply code; our own replies name theirs first
    // ("5.2.1 <a@b>: mailbox disabled"), which the patched smtp-server keeps instead (patches/).
    // No CHUNKING: smtp-server has no BDAT (nodemailer/smtp-server#109).
    hideENHANCEDSTATUSCODES: false,
    size: MaxMessageBytes,
    logger: false,
    socketTimeout: 60_000,
    closeTimeout: 5_000,
    maxClients: 1_000,
    onConnect(session, callback) {
      const address = session.remoteAddress
      const open = (connections.get(address) ?? 0) + 1
      if (overConnectionLimit(address, open, perAddress)) return callback(smtpError(421, "4.7.0 Too many connections from your address, try later"))
      connections.set(address, open)
      callback()
    },
    onClose(session) {
      const open = (connections.get(session.remoteAddress) ?? 1) - 1
      if (open <= 0) connections.delete(session.remoteAddress)
      else connections.set(session.remoteAddress, open)
    },
    onRcptTo(address: SMTPServerAddress, session: SMTPServerSession, callback) {
      if (session.envelope.rcptTo.length >= MaxRecipients) return callback(smtpError(452, "4.5.3 Too many recipients"))
      run(mailstore.resolveRecipient(address.address)).then((exit) => {
        if (Exit.isFailure(exit)) return callback(smtpError(451, "4.3.0 Temporary failure, try again later"))
        const verdict = exit.value
        if (verdict.kind === "paused") return callback(smtpError(550, `5.2.1 <${address.address}>: mailbox disabled`))
        if (verdict.kind === "unknown") return callback(smtpError(550, `5.1.1 <${address.address}>: no such mailbox here`))
        // The verdict travels with the recipient: smtp-server keeps accepted recipients in the
        // envelope, which RSET and each finished transaction reset.
        ;(address as AcceptedRecipient).delivery = { aliasId: verdict.aliasId, accountId: verdict.accountId, recipient: address.address }
        callback()
      })
    },
    onData(stream, session, callback) {
      const chunks: Array<Buffer> = []
      let previous = 0x0d
      let bareLf = false
      stream.on("data", (chunk: Buffer) => {
        if (!bareLf && hasBareLf(chunk, previous)) bareLf = true
        previous = chunk[chunk.length - 1] ?? previous
        if (!bareLf && !stream.sizeExceeded) chunks.push(chunk)
      })
      stream.on("end", () => {
        if (stream.sizeExceeded) return callback(smtpError(552, `5.3.4 Message exceeds the ${MaxMessageBytes} byte limit`))
        if (bareLf) return callback(smtpError(550, "5.6.11 Bare LF line endings are not accepted; use CRLF"))
        const deliveries = deliveriesOf(session)
        if (deliveries.length === 0) return callback(smtpError(554, "5.5.1 No valid recipients"))
        const from = session.envelope.mailFrom
        run(mailstore.accept({
          deliveries,
          // The pieces as received: the store joins a small message and streams a big one.
          raw: chunks,
          source: "smtp",
          envelopeFrom: from === false ? null : from.address,
          clientAddress: session.remoteAddress,
          clientHelo: session.hostNameAppearsAs
        })).then((exit) => {
          if (Exit.isSuccess(exit)) {
            callback(null, `2.0.0 Ok: stored as ${exit.value.map((m) => m.id).join(",")}`)
            return stampPhase("accept.replied", exit.value.map((m) => m.id))
          }
          if (Cause.hasFails(exit.cause)) return callback(smtpError(552, "5.2.2 Mailbox full: the message is larger than the recipient's storage"))
          Effect.runFork(Effect.logError("SMTP accept failed", exit.cause).pipe(Effect.provideContext(context)))
          callback(smtpError(451, "4.3.0 Temporary failure storing the message, try again later"))
        })
      })
    }
  })
  server.on("error", (error) => Effect.runFork(Effect.logWarning(`SMTP: ${error.message}`).pipe(Effect.provideContext(context))))
  yield* Effect.acquireRelease(
    Effect.callback<void, Error>((resume) => {
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(options.port, options.host, () => resume(Effect.void))
    }),
    () => Effect.callback<void>((resume) => server.close(() => resume(Effect.void)))
  ).pipe(Effect.orDie)
  const address = server.server.address()
  return { port: typeof address === "object" && address !== null ? address.port : options.port }
})

/** The SMTP listener of a process: the port it listens on (the system's choice when asked for port 0). */
export class SmtpListener extends Context.Service<SmtpListener, { readonly port: number }>()("burnbox/SmtpListener") {}

/** An SMTP listener with the given options (tests ask for port 0); needs Mailstore. */
export const smtpListener = (options: SmtpOptions) => Layer.effect(SmtpListener, makeSmtpServer(options))

/**
 * The ingest role: the SMTP listener on BURNBOX_HOST:BURNBOX_SMTP_PORT, offering STARTTLS when
 * BURNBOX_SMTP_TLS_CERT and BURNBOX_SMTP_TLS_KEY name a certificate; needs StoreLive's Mailstore.
 */
export const IngestLive = Layer.unwrap(Effect.gen(function*() {
  const config = yield* BurnboxConfig
  const certFile = Option.fromNullishOr(process.env["BURNBOX_SMTP_TLS_CERT"])
  const keyFile = Option.fromNullishOr(process.env["BURNBOX_SMTP_TLS_KEY"])
  const tls = Option.isSome(certFile) && Option.isSome(keyFile)
    ? { cert: readFileSync(certFile.value), key: readFileSync(keyFile.value) }
    : undefined
  const maxConnectionsPerAddress = yield* Config.Int("BURNBOX_SMTP_MAX_CONNECTIONS_PER_ADDRESS").pipe(
    Config.withDefault(MaxConnectionsPerAddress),
    Effect.orDie
  )
  if (maxConnectionsPerAddress < 0) {
    return yield* new StartupFailure({ message: `BURNBOX_SMTP_MAX_CONNECTIONS_PER_ADDRESS must be 0 (no limit) or more; it is ${maxConnectionsPerAddress}` })
  }
  return smtpListener({ port: config.smtpPort, host: config.host, hostname: new URL(config.siteUrl).hostname, tls, maxConnectionsPerAddress }).pipe(
    Layer.tap(() => Effect.logInfo(`SMTP ingest listening on ${config.host}:${config.smtpPort}${tls ? " (STARTTLS)" : ""}`))
  )
}))
