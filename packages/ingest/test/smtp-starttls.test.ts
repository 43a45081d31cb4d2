/** STARTTLS is offered when a certificate is configured, and the session goes on over TLS. */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { connect } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { connect as tlsConnect, type TLSSocket } from "node:tls"
import { type Harness, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let plain: Harness
let dir: string

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "burnbox-tls-"))
  execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=mx.burnbox.test",
    "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem")], { stdio: "ignore" })
  h = await startHarness({}, undefined, { smtpTls: { key: readFileSync(join(dir, "key.pem")), cert: readFileSync(join(dir, "cert.pem")) } })
  plain = await startHarness()
})
afterAll(async () => {
  await Promise.all([h.close(), plain.close()])
  rmSync(dir, { recursive: true, force: true })
})

/** Reads one complete SMTP reply from a socket. */
const reply = (socket: { once: (event: "data", listener: (chunk: Buffer) => void) => unknown }): Promise<string> =>
  new Promise((resolve) => {
    let text = ""
    const onData = (chunk: Buffer) => {
      text += chunk.toString("latin1")
      const lines = text.split("\r\n").filter((l) => l.length > 0)
      if (text.endsWith("\r\n") && lines.length > 0 && !/^\d{3}-/.test(lines[lines.length - 1]!)) resolve(text)
      else socket.once("data", onData)
    }
    socket.once("data", onData)
  })

const ehlo = async (port: number) => {
  const socket = connect(port, "127.0.0.1")
  await reply(socket)
  socket.write("EHLO client.example.org\r\n")
  return { socket, text: await reply(socket) }
}

describe("STARTTLS", () => {
  it("is offered with a certificate, upgrades the connection, and EHLO works over TLS", async () => {
    const { socket, text } = await ehlo(h.smtpPort)
    expect(text).toMatch(/250[- ]STARTTLS/)
    socket.write("STARTTLS\r\n")
    expect(await reply(socket)).toMatch(/^220 /)
    const secure: TLSSocket = await new Promise((resolve, reject) => {
      const tls = tlsConnect({ socket, servername: "mx.burnbox.test", rejectUnauthorized: false }, () => resolve(tls))
      tls.once("error", reject)
    })
    expect(secure.encrypted).toBe(true)
    expect(secure.getPeerCertificate().subject.CN).toBe("mx.burnbox.test")
    secure.write("EHLO client.example.org\r\n")
    const again = await reply(secure)
    expect(again).toMatch(/^250[- ]/)
    expect(again).not.toMatch(/STARTTLS/)
    secure.end("QUIT\r\n")
  })

  it("is not offered without a certificate", async () => {
    const { socket, text } = await ehlo(plain.smtpPort)
    expect(text).not.toMatch(/STARTTLS/)
    socket.end("QUIT\r\n")
  })
})
