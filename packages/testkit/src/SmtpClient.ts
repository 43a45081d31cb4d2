/**
 * A raw SMTP client for tests and benchmarks: every reply code is seen exactly as the server
 * sent it. One connection carries any number of transactions; commands may be pipelined (write
 * MAIL, RCPT and DATA at once, then read their replies in order), and a message goes out
 * dot-stuffed with its terminator in one write.
 */
import { connect, type Socket } from "node:net"

export interface SmtpReply {
  readonly code: number
  /** The text of every line of the reply, without the code, joined by "\n". */
  readonly text: string
  readonly lines: ReadonlyArray<string>
}

/** A reply that ended a step of `SmtpClient.connect` (the greeting or EHLO). */
export class SmtpRefusal extends Error {
  readonly reply: SmtpReply
  constructor(stage: string, reply: SmtpReply) {
    super(`${stage}: ${reply.code} ${reply.text}`)
    this.reply = reply
  }
}

export const dotStuff = (raw: Uint8Array) => Buffer.from(Buffer.from(raw).toString("latin1").replace(/(^|\r\n)\./g, "$1.."), "latin1")

export class SmtpClient {
  private buffer = ""
  private pending: Array<string> = []
  private readonly replies: Array<SmtpReply> = []
  private readonly waiters: Array<{ readonly ok: (reply: SmtpReply) => void; readonly fail: (error: Error) => void }> = []
  /** Why the connection closed, once it has. */
  closedError: Error | undefined
  /** The EHLO keywords (upper case) when the client was made by `connect`. */
  extensions: ReadonlyArray<string> = []
  readonly socket: Socket

  private constructor(socket: Socket) {
    this.socket = socket
    socket.setNoDelay(true)
    socket.on("data", (chunk: Buffer) => this.onData(chunk.toString("latin1")))
    const close = (error: Error) => {
      if (this.closedError !== undefined) return
      this.closedError = error
      for (const waiter of this.waiters.splice(0)) waiter.fail(new Error(`SMTP connection closed (${error.message}); unread: ${this.pending.join(" | ")}`))
    }
    socket.on("error", close)
    socket.on("close", () => close(new Error("closed")))
  }

  private onData(chunk: string) {
    this.buffer += chunk
    let at: number
    while ((at = this.buffer.indexOf("\r\n")) >= 0) {
      const line = this.buffer.slice(0, at)
      this.buffer = this.buffer.slice(at + 2)
      this.pending.push(line)
      if (/^\d{3}-/.test(line)) continue
      const lines = this.pending
      this.pending = []
      const reply = { code: Number(line.slice(0, 3)), text: lines.map((l) => l.slice(4)).join("\n"), lines }
      const waiter = this.waiters.shift()
      if (waiter !== undefined) waiter.ok(reply)
      else this.replies.push(reply)
    }
  }

  /**
   * One message to one recipient on a fresh connection. The greeting, EHLO, MAIL FROM and RCPT
   * TO must each be accepted (else it throws, naming the reply); answers the reply to the message.
   * `stuffed`: `raw` is dot-stuffed already (`dotStuff`), so sending costs this process nothing.
   */
  static async sendOne(port: number, to: string, raw: Uint8Array, from = "sender@example.org", options: { readonly stuffed?: boolean } = {}): Promise<SmtpReply> {
    const client = await SmtpClient.connect(port, { ehlo: "client.example.org" })
    try {
      for (const line of [`MAIL FROM:<${from}>`, `RCPT TO:<${to}>`]) {
        const reply = await client.command(line)
        if (reply.code !== 250) throw new Error(`${line}: ${reply.code} ${reply.text}`)
      }
      return await client.data(raw, options.stuffed)
    } finally {
      await client.quit()
    }
  }

  /** Connects to 127.0.0.1:port, from `localAddress` (another loopback address: another client) when given. The greeting is not read. */
  static open(port: number, localAddress?: string): Promise<SmtpClient> {
    return new Promise((resolve, reject) => {
      const socket = connect({ port, host: "127.0.0.1", ...(localAddress === undefined ? {} : { localAddress }) }, () => {
        socket.off("error", reject)
        resolve(new SmtpClient(socket))
      })
      socket.once("error", reject)
    })
  }

  /**
   * Connects, reads the 220 greeting and says EHLO (its keywords in `extensions`); throws
   * `SmtpRefusal` when either is refused. The connection is destroyed after `idleMs` without
   * traffic (default 30 s).
   */
  static async connect(port: number, options: { readonly localAddress?: string | undefined; readonly ehlo?: string; readonly idleMs?: number } = {}): Promise<SmtpClient> {
    const client = await SmtpClient.open(port, options.localAddress)
    const idleMs = options.idleMs ?? 30_000
    client.socket.setTimeout(idleMs, () => client.socket.destroy(new Error(`no answer within ${idleMs / 1000} s`)))
    try {
      const greeting = await client.read()
      if (greeting.code !== 220) throw new SmtpRefusal("greeting", greeting)
      const ehlo = await client.command(`EHLO ${options.ehlo ?? "client.example.org"}`)
      if (ehlo.code !== 250) throw new SmtpRefusal("EHLO", ehlo)
      client.extensions = ehlo.lines.slice(1).map((l) => l.slice(4).split(" ")[0]!.toUpperCase())
      return client
    } catch (error) {
      client.destroy()
      throw error
    }
  }

  /** True when an SMTP server on 127.0.0.1:port greets with 220 within `timeoutMs` (then it QUITs politely). */
  static async greets(port: number, timeoutMs = 3_000): Promise<boolean> {
    let client: SmtpClient | undefined
    try {
      client = await SmtpClient.open(port)
      const greeted = (await client.read(timeoutMs)).code === 220
      await client.quit(1_000)
      return greeted
    } catch {
      client?.destroy()
      return false
    }
  }

  get closed(): boolean {
    return this.closedError !== undefined
  }

  get pipelining(): boolean {
    return this.extensions.includes("PIPELINING")
  }

  /** The next complete (possibly multi-line) reply. */
  read(timeoutMs = 30_000): Promise<SmtpReply> {
    const ready = this.replies.shift()
    if (ready !== undefined) return Promise.resolve(ready)
    if (this.closedError !== undefined) return Promise.reject(new Error(`SMTP connection closed (${this.closedError.message}); unread: ${this.pending.join(" | ")}`))
    return new Promise((resolve, reject) => {
      const waiter = {
        ok: (reply: SmtpReply) => {
          clearTimeout(timer)
          resolve(reply)
        },
        fail: (error: Error) => {
          clearTimeout(timer)
          reject(error)
        }
      }
      const timer = setTimeout(() => {
        const at = this.waiters.indexOf(waiter)
        if (at >= 0) this.waiters.splice(at, 1)
        reject(new Error("no SMTP reply in time"))
      }, timeoutMs)
      this.waiters.push(waiter)
    })
  }

  /** Writes bytes as they are (e.g. several pipelined commands). */
  write(data: string | Uint8Array) {
    this.socket.write(data)
  }

  send(line: string) {
    this.socket.write(`${line}\r\n`)
  }

  command(line: string): Promise<SmtpReply> {
    this.send(line)
    return this.read()
  }

  /** The dot-stuffed bytes and the terminator in one write, after a 354 (`stuffed`: `raw` is dot-stuffed already). */
  writeMessage(raw: Uint8Array, stuffed = false) {
    this.socket.cork()
    this.socket.write(stuffed ? raw : dotStuff(raw))
    this.socket.write(".\r\n")
    this.socket.uncork()
  }

  /** DATA, the message and its terminator; answers the reply to the message. */
  async data(raw: Uint8Array, stuffed = false): Promise<SmtpReply> {
    const go = await this.command("DATA")
    if (go.code !== 354) return go
    this.writeMessage(raw, stuffed)
    return this.read()
  }

  /**
   * One transaction on this connection: MAIL, RCPT and DATA (in one write when the server offers
   * PIPELINING, else one at a time, stopping at a refusal), then, after the 354, the message.
   * Answers the envelope's replies and, when DATA was accepted, the reply to the message; a
   * refused envelope is RSET so the connection can carry the next one. `onSent` runs when the
   * message has been written, before its reply; `mailParameters` follow MAIL FROM (e.g. SIZE=n).
   */
  async transaction(
    from: string,
    to: string,
    raw: Uint8Array,
    options: { readonly stuffed?: boolean; readonly mailParameters?: string; readonly timeoutMs?: number; readonly onSent?: () => void } = {}
  ): Promise<{ readonly envelope: ReadonlyArray<SmtpReply>; readonly reply: SmtpReply | undefined }> {
    const commands = [`MAIL FROM:<${from}>${options.mailParameters === undefined ? "" : ` ${options.mailParameters}`}\r\n`, `RCPT TO:<${to}>\r\n`, "DATA\r\n"]
    const envelope: Array<SmtpReply> = []
    if (this.pipelining) {
      this.write(commands.join(""))
      for (let i = 0; i < commands.length; i++) envelope.push(await this.read(options.timeoutMs))
    } else {
      for (const command of commands) {
        this.write(command)
        const reply = await this.read(options.timeoutMs)
        envelope.push(reply)
        if (reply.code >= 400) break
      }
    }
    if (envelope[envelope.length - 1]!.code !== 354) {
      await this.command("RSET")
      return { envelope, reply: undefined }
    }
    this.writeMessage(raw, options.stuffed)
    options.onSent?.()
    return { envelope, reply: await this.read(options.timeoutMs) }
  }

  async quit(timeoutMs = 5_000) {
    if (this.closedError === undefined) {
      this.send("QUIT")
      await this.read(timeoutMs).catch(() => undefined)
    }
    this.socket.destroy()
  }

  destroy() {
    this.socket.destroy()
  }
}
