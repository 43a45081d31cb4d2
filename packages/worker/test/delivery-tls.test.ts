/**
 * Where a delivery connects and whom it trusts (spec 6.5.1): SPKI pins against a real TLS
 * receiver, the CA, the checked address (no second DNS lookup), and DNS rebinding refused.
 */
import { Effect, Option } from "effect"
import {
  caFileSetting,
  type DeliveryWorker,
  type Harness,
  type Receiver,
  type Session,
  startDeliveryWorker,
  startHarness,
  startReceiver
} from "@burnbox/testkit"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"

let h: Harness
let receiver: Receiver
let worker: DeliveryWorker
/** DNS as the delivery worker sees it. */
const answers: Record<string, ReadonlyArray<string>> = { "receiver.example": ["127.0.0.1"] }
beforeAll(async () => {
  receiver = await startReceiver()
  h = await startHarness(caFileSetting(receiver), undefined, { targetResolver: (host) => Effect.succeed(answers[host] ?? []) })
  worker = await startDeliveryWorker(h, caFileSetting(receiver), { resolver: (host) => Effect.succeed(answers[host] ?? []) })
})
afterAll(async () => {
  await worker?.close()
  await h?.close()
  await receiver?.close()
})
beforeEach(async () => {
  await h.query("UPDATE webhook_deliveries SET status = 'abandoned' WHERE status IN ('pending', 'delivering')")
  receiver.requests.length = 0
})

const setup = async (body: Record<string, unknown> = {}) => {
  const session = await h.signup({ plan: "pro" })
  const answer = await h.request("/webhooks", {
    method: "POST",
    session,
    body: { name: "tls", url: receiver.url, subscription: { mode: "all" }, ...body }
  })
  expect(answer.status, answer.text).toBe(201)
  return { session, webhookId: answer.body.webhook.id as number }
}

const testDelivery = async (session: Session, webhookId: number) => {
  const answer = await h.request(`/webhooks/${webhookId}/test`, { method: "POST", session })
  expect(answer.status, answer.text).toBe(202)
  await worker.runOnce()
  return (await h.query("SELECT status, last_error, attempt_count FROM webhook_deliveries WHERE id = $1", [answer.body.delivery.id]))[0]
}

describe("SPKI pin", () => {
  it("a pin matching the receiver's public key delivers", async () => {
    const { session, webhookId } = await setup({ spki_pin: receiver.certificates.spkiPin })
    expect(await testDelivery(session, webhookId)).toMatchObject({ status: "succeeded" })
    expect(receiver.requests).toHaveLength(1)
  })

  it("a pin that does not match fails closed before any byte of the body is sent", async () => {
    const { session, webhookId } = await setup({ spki_pin: `sha256/${"A".repeat(43)}=` })
    expect(await testDelivery(session, webhookId)).toMatchObject({ status: "pending", last_error: "spki_pin_mismatch", attempt_count: 1 })
    expect(receiver.requests).toHaveLength(0)
  })

  it("a kept-alive connection is not reused after the pin changes: the new pin meets a new handshake and fails closed", async () => {
    const { session, webhookId } = await setup({ spki_pin: receiver.certificates.spkiPin })
    expect(await testDelivery(session, webhookId)).toMatchObject({ status: "succeeded" })
    expect(await testDelivery(session, webhookId)).toMatchObject({ status: "succeeded" })
    expect(receiver.requests).toHaveLength(2)
    const patched = await h.request(`/webhooks/${webhookId}`, { method: "PATCH", session, body: { spki_pin: `sha256/${"A".repeat(43)}=` } })
    expect(patched.status, patched.text).toBe(200)
    expect(await testDelivery(session, webhookId)).toMatchObject({ status: "pending", last_error: "spki_pin_mismatch", attempt_count: 1 })
    expect(receiver.requests).toHaveLength(2)
  })
})

describe("trust", () => {
  it("a receiver whose CA is not trusted gets nothing (tls_error)", async () => {
    const { session, webhookId } = await setup()
    const untrusting = await startDeliveryWorker(h, { webhookAllowPrivate: true, webhookCaFile: Option.none() })
    try {
      const queued = await h.request(`/webhooks/${webhookId}/test`, { method: "POST", session })
      await untrusting.runOnce()
      const row = (await h.query("SELECT last_error FROM webhook_deliveries WHERE id = $1", [queued.body.delivery.id]))[0]
      expect(row.last_error).toBe("tls_error")
      expect(receiver.requests).toHaveLength(0)
    } finally {
      await untrusting.close()
    }
  })

  it("a host name connects to the address that was checked, with the name for SNI and the certificate", async () => {
    const { session, webhookId } = await setup({ url: `https://receiver.example:${receiver.port}/named` })
    expect(await testDelivery(session, webhookId)).toMatchObject({ status: "succeeded" })
    expect(receiver.requests.map((r) => [r.path, r.headers.host])).toEqual([["/named", `receiver.example:${receiver.port}`]])
  })
})

describe("DNS rebinding", () => {
  it("a name public when registered and private when delivering is refused, nothing is sent", async () => {
    // Production policy: no private targets.
    const dns: Record<string, ReadonlyArray<string>> = { "rebind.example.com": ["93.184.216.34"] }
    const strict = await startHarness({}, undefined, { targetResolver: (host) => Effect.succeed(dns[host] ?? []) })
    const strictWorker = await startDeliveryWorker(strict, { webhookAllowPrivate: false }, { resolver: (host) => Effect.succeed(dns[host] ?? []) })
    try {
      const session = await strict.signup({ plan: "pro" })
      const created = await strict.request("/webhooks", {
        method: "POST",
        session,
        body: { name: "rebind", url: "https://rebind.example.com/hook", subscription: { mode: "all" } }
      })
      expect(created.status, created.text).toBe(201)
      dns["rebind.example.com"] = ["127.0.0.1"]
      const queued = await strict.request(`/webhooks/${created.body.webhook.id}/test`, { method: "POST", session })
      await strictWorker.runOnce()
      const row = (await strict.query("SELECT status, last_error FROM webhook_deliveries WHERE id = $1", [queued.body.delivery.id]))[0]
      expect(row).toMatchObject({ status: "pending", last_error: "private_address" })
      expect(receiver.requests).toHaveLength(0)
      const attempt = (await strict.request(`/webhooks/${created.body.webhook.id}/deliveries`, { session })).body.items[0].attempts[0]
      expect(attempt).toMatchObject({ status: "failed", httpStatus: null, errorCode: "private_address" })
    } finally {
      await strictWorker.close()
      await strict.close()
    }
  })
})
