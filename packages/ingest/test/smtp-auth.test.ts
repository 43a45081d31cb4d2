/**
 * SPF, DKIM and DMARC of SMTP mail through mailauth, with DNS answered from fixed records
 * (the harness's resolver fails every other name with ENOTFOUND, as the real one does).
 */
import { type Harness, type Session, SmtpClient, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let owner: Session
let token: string
let address: string

beforeAll(async () => {
  h = await startHarness({}, undefined, {
    seed: 77,
    dnsRecords: {
      // The connection comes from 127.0.0.1: allowed for good.example, refused for bad.example.
      "TXT good.example": [["v=spf1 ip4:127.0.0.1 -all"]],
      "TXT bad.example": [["v=spf1 ip4:192.0.2.1 -all"]],
      "TXT _dmarc.bad.example": [["v=DMARC1; p=reject"]]
    }
  })
  owner = await h.signup({ plan: "pro" })
  token = await h.createToken(owner, ["read", "manage-aliases"])
  const reservation = await h.request("/aliases/candidates", { method: "POST", token, body: { domainId: 1, style: "numeric" } })
  const candidate = reservation.body.candidates[0]
  const claimed = await h.request("/aliases", { method: "POST", token, body: { aliasId: candidate.id, reservationToken: reservation.body.reservationToken } })
  address = claimed.body.address
})
afterAll(() => h.close())

const send = async (from: string) => {
  const client = await SmtpClient.open(h.smtpPort)
  try {
    await client.read()
    await client.command("EHLO mx.sender.example")
    expect((await client.command(`MAIL FROM:<${from}>`)).code).toBe(250)
    expect((await client.command(`RCPT TO:<${address}>`)).code).toBe(250)
    const reply = await client.data(Buffer.from(`From: <${from}>\r\nTo: <${address}>\r\nSubject: auth\r\n\r\nHello 123456\r\n`))
    expect(reply.code, reply.text).toBe(250)
    return Number(/stored as (\d+)/.exec(reply.text)![1])
  } finally {
    await client.quit()
  }
}

const processed = async (id: number) => {
  const until = Date.now() + 15_000
  for (;;) {
    const answer = await h.request(`/messages/${id}`, { token })
    if (answer.body.processingStatus === "processed") return answer.body
    if (Date.now() > until) throw new Error(`message ${id} not processed in time`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

describe("mail authentication", () => {
  it("SPF passes for a sender domain that allows the connecting address; unsigned mail has dkim none", async () => {
    const message = await processed(await send("shop@good.example"))
    expect(message.auth).toEqual({ spf: "pass", dkim: "none", dmarc: "none" })
  })

  it("SPF fails for a domain that does not allow the address, and its DMARC policy fails too", async () => {
    const message = await processed(await send("shop@bad.example"))
    expect(message.auth.spf).toBe("fail")
    expect(message.auth.dmarc).toBe("fail")
  })

  it("a domain without records gives spf none, and the results reach the message.received event", async () => {
    const id = await send("shop@nowhere.example")
    const message = await processed(id)
    expect(message.auth.spf).toBe("none")
    const [event] = await h.query("SELECT data FROM events WHERE type = 'message.received' AND (data->>'message_id')::int = $1", [id])
    expect(event.data.auth).toEqual(message.auth)
  })
})
