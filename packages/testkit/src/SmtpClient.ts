/** A raw SMTP client for tests: every reply code is seen exactly as the server sent it. */
import { connect, type Socket } from "node:net"

export interface SmtpReply {
  readonly code: number
  /** The text of every line of the reply, without the code, joined by "\n". */
  readonly text: string
  readonly lines: ReadonlyArray<string>
}

export const dotStuff = (raw: Uint8Array) => Buffer.from(Buffer.from(raw).toString("latin1").replace(/(^|\r\n)\./g, "$1.."), "latin1")

export class SmtpClient {
  private buffer = ""
  private readonly lines: Array<string> = []
  private waiter: (() => void) | undefined
  private closed = false
  private readonly socket: Socket
  private constructor(socket: Socket) {
    this.socket = socket
    socket.on("data", (chunk: Buffer) => {
      this.buffer += chunk.toString("latin1")
      let at: number
      while ((at = this.buffer.indexOf("\r\n")) >= 0) {
        this.lines.push(this.buffer.slice(0, at))
        this.buffer = this.buffer.slice(at + 2)
      }
      this.wake()
    })
    socket.on("close", () => {
      this.closed = true
      this.wake()
    })
    socket.on("error", () => {
      this.closed = true
      this.wake()
    })
  }

  /**
   * One message to one recipient on a fresh connection. The greeting, EHLO, MAIL FROM and RCPT
   * TO must each be accepted (else it throws, naming the reply); answers the reply to the message.
   * `stuffed`: `raw` is dot-stuffed already (`dotStuff`), so sending costs this process nothing.
   */
  static async sendOne(port: number, to: string, raw: Uint8Array, from = "sender@example.org", options: { readonly stuffed?: boolean } = {}): Promise<SmtpReply> {
    const client = await SmtpClient.open(port)
    try {
      const greeting = await client.read()
      if (greeting.code !== 220) throw new Error(`greeting: ${greeting.code} ${greeting.text}`)
      for (const line of ["EHLO client.example.org", `MAIL FROM:<${from}>`, `RCPT TO:<${to}>`]) {
        const reply = await client.command(line)
        if (reply.code !== 250) throw new Error(`${line}: ${reply.code} ${reply.text}`)
      }
      return await client.data(raw, options.stuffed)
    } finally {
      await client.quit()
    }
  }

  /** Connects to 127.0.0.1:port, from `localAddress` (another loopback address: another client) when given. */
  static open(port: number, localAddress?: string): Promise<SmtpClient> {
    return new Promise((resolve, reject) => {
      const socket = connect({ port, host: "127.0.0.1", ...(localAddress === undefined ? {} : { localAddress }) }, () => resolve(new SmtpClient(socket)))
      socket.once("error", reject)
    })
  }

  private wake() {
    const waiter = this.waiter
    this.waiter = undefined
    waiter?.()
  }

  /** The next complete (possibly multi-line) reply. */
  async read(timeoutMs = 30_000): Promise<SmtpReply> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const end = this.lines.findIndex((line) => !/^\d{3}-/.test(line))
      if (end >= 0) {
        const lines = this.lines.splice(0, end + 1)
        return { code: Number(lines[end]!.slice(0, 3)), text: lines.map((l) => l.slice(4)).join("\n"), lines }
      }
      if (this.closed) throw new Error(`SMTP connection closed; unread: ${this.lines.join(" | ")}`)
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("no SMTP reply in time")), Math.max(0, deadline - Date.now()))
        this.waiter = () => {
          clearTimeout(timer)
          resolve()
        }
      })
    }
  }

  send(line: string) {
    this.socket.write(`${line}\r\n`)
  }

  command(line: string): Promise<SmtpReply> {
    this.send(line)
    return this.read()
  }

  /** The dot-stuffed bytes and the terminator, after a 354 (`stuffed`: `raw` is dot-stuffed already). */
  writeMessage(raw: Uint8Array, stuffed = false) {
    this.socket.write(stuffed ? raw : dotStuff(raw))
    this.socket.write(".\r\n")
  }

  /** DATA, the message and its terminator; answers the reply to the message. */
  async data(raw: Uint8Array, stuffed = false): Promise<SmtpReply> {
    const go = await this.command("DATA")
    if (go.code !== 354) return go
    this.writeMessage(raw, stuffed)
    return this.read()
  }

  async quit() {
    if (!this.closed) {
      this.send("QUIT")
      await this.read(5_000).catch(() => undefined)
    }
    this.socket.destroy()
  }
}
