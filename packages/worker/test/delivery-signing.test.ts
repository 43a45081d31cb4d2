/**
 * Webhook delivery end to end against a real HTTPS receiver: spec 6.2-6.5, decisions.md
 * (subscription modes, key set). Every request is verified by the official
 * `standardwebhooks` package and by Ed25519 against the published key set.
 */
import { WebhookDeliveryPage } from "@burnbox/domain"
import { keySetPublicKeys, verifyEd25519, verifyHmac, WebhookKeySet } from "@burnbox/domain/webhooks/index"
import {
  caFileSetting,
  type DeliveryWorker,
  expectShape,
  type Harness,
  type Receiver,
  type ReceivedRequest,
  type Session,
  startDeliveryWorker,
  startHarness,
  startReceiver,
  verifyWithStandardWebhooks
} from "@burnbox/testkit"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"

let h: Harness
let receiver: Receiver
let worker: DeliveryWorker
beforeAll(async () => {
  receiver = await startReceiver()
  h = await startHarness(caFileSetting(receiver))
  worker = await startDeliveryWorker(h, caFileSetting(receiver))
})
afterAll(async () => {
  await worker?.close()
  await h?.close()
  await receiver?.close()
})
// standardwebhooks checks timestamps against the real clock: deliver at real time here.
beforeEach(() => {
  h.clock.set(Date.now())
  receiver.requests.length = 0
  receiver.reply(() => ({ status: 200, body: "ok" }))
})

const createWebhook = async (session: Session, body: Record<string, unknown> = {}) => {
  const answer = await h.request("/webhooks", {
    method: "POST",
    session,
    body: { name: "receiver", url: receiver.url, subscription: { mode: "all" }, ...body }
  })
  expect(answer.status, answer.text).toBe(201)
  return answer.body as { webhook: { id: number }; secret: string }
}

const claimAlias = async (session: Session, label: string | null = null) => {
  const reserved = await h.request("/aliases/candidates", { method: "POST", session, body: { domainId: 1, style: "words" } })
  expect(reserved.status, reserved.text).toBe(200)
  const claimed = await h.request("/aliases", {
    method: "POST",
    session,
    body: { aliasId: reserved.body.candidates[0].id, reservationToken: reserved.body.reservationToken, label }
  })
  expect(claimed.status, claimed.text).toBe(201)
  return claimed.body as { id: number; address: string }
}

/** Injects a test message and waits until the pipeline wrote its events. */
const inject = async (session: Session, aliasId: number, body: Record<string, unknown>) => {
  const answer = await h.request("/test/messages", {
    method: "POST",
    session,
    body: { aliasId, from: "Shop <shop@example.com>", subject: "Your code", ...body }
  })
  expect(answer.status, answer.text).toBe(202)
  const deadline = Date.now() + 15_000
  while ((await h.query("SELECT 1 FROM events WHERE type = 'message.received' AND (data->>'message_id')::int = $1", [answer.body.id])).length === 0) {
    if (Date.now() > deadline) throw new Error("the pipeline wrote no message.received event")
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return answer.body.id as number
}

const keySet = async () => expectShape(WebhookKeySet, (await h.request("/.well-known/service-webhooks.json")).body)

/** Both signatures, each checked on its own: HMAC by standardwebhooks, Ed25519 by the key set. */
const expectVerified = async (secret: string, request: ReceivedRequest) => {
  expect(request.method).toBe("POST")
  expect(request.headers["content-type"]).toBe("application/json")
  const payload = verifyWithStandardWebhooks(secret, request) as { id: string }
  expect(payload.id).toBe(request.headers["webhook-id"])
  const signed = {
    id: String(request.headers["webhook-id"]),
    timestamp: String(request.headers["webhook-timestamp"]),
    signature: String(request.headers["webhook-signature"]),
    body: request.body
  }
  expect(verifyEd25519(keySetPublicKeys(await keySet()), signed, { nowSeconds: Math.floor(h.clock.now().getTime() / 1000) })).toMatchObject({ ok: true })
  return payload
}

describe("signing", () => {
  it("a webhook.test delivery verifies with standardwebhooks and with Ed25519 against the key set", async () => {
    const session = await h.signup({ plan: "pro" })
    const { webhook, secret } = await createWebhook(session)
    const queued = (await h.request(`/webhooks/${webhook.id}/test`, { method: "POST", session })).body.delivery
    await worker.runOnce()
    const [request] = await receiver.waitFor(1)
    const payload = await expectVerified(secret, request!)
    expect(payload).toEqual({
      id: queued.eventId,
      type: "webhook.test",
      time: expect.stringMatching(/Z$/),
      api_version: "2026-08-31",
      shared_mailbox: false,
      owner_handle: null,
      data: { endpoint_id: webhook.id, message: expect.any(String) }
    })
    expect(String(request!.headers["webhook-signature"]).split(" ").map((e) => e.split(",")[0])).toEqual(["v1", "v1a"])
    expect(Number(request!.headers["webhook-timestamp"])).toBe(Math.floor(h.clock.now().getTime() / 1000))

    const page = expectShape(WebhookDeliveryPage, (await h.request(`/webhooks/${webhook.id}/deliveries`, { session })).body)
    expect(page.items[0]).toMatchObject({
      status: "succeeded",
      attemptCount: 1,
      cycleAttemptCount: 1,
      lastHttpStatus: 200,
      lastError: null,
      responseSnippet: "ok",
      attempts: [{ attempt: 1, status: "succeeded", httpStatus: 200, errorCode: null, responseSnippet: "ok" }]
    })
    const listed = (await h.request("/webhooks", { session })).body.items[0]
    expect(listed.lastSuccessAt).toBe(h.clock.now().toISOString())
  })

  it("after a key rotation both keys sign, and each verifies against the published set", async () => {
    const session = await h.signup({ plan: "pro" })
    const { webhook, secret } = await createWebhook(session)
    const rotated = await h.cli(["admin", "keys", "rotate"])
    expect(rotated.code, rotated.stdout + rotated.stderr).toBe(0)
    await h.request(`/webhooks/${webhook.id}/test`, { method: "POST", session })
    await worker.runOnce()
    const [request] = await receiver.waitFor(1)
    await expectVerified(secret, request!)
    const set = await keySet()
    expect(set.keys.map((k) => k.status)).toEqual(["current", "previous"])
    const signature = String(request!.headers["webhook-signature"])
    expect(signature.split(" ").filter((e) => e.startsWith("v1a,"))).toHaveLength(2)
    const nowSeconds = Math.floor(h.clock.now().getTime() / 1000)
    for (const key of keySetPublicKeys(set)) {
      expect(verifyEd25519([key], { id: String(request!.headers["webhook-id"]), timestamp: String(request!.headers["webhook-timestamp"]), signature, body: request!.body }, { nowSeconds }))
        .toMatchObject({ ok: true })
    }
  })

  it("after rotate-secret the old and the new secret both sign for 24 hours, then only the new", async () => {
    const session = await h.signup({ plan: "pro" })
    const { webhook, secret: oldSecret } = await createWebhook(session)
    const newSecret = (await h.request(`/webhooks/${webhook.id}/rotate-secret`, { method: "POST", session })).body.secret as string
    await h.request(`/webhooks/${webhook.id}/test`, { method: "POST", session })
    await worker.runOnce()
    const [first] = await receiver.waitFor(1)
    expect(String(first!.headers["webhook-signature"]).split(" ").filter((e) => e.startsWith("v1,"))).toHaveLength(2)
    verifyWithStandardWebhooks(oldSecret, first!)
    verifyWithStandardWebhooks(newSecret, first!)

    h.clock.advance("25 hours")
    await h.request(`/webhooks/${webhook.id}/test`, { method: "POST", session })
    await worker.runOnce()
    const [, second] = await receiver.waitFor(2)
    const signed = {
      id: String(second!.headers["webhook-id"]),
      timestamp: String(second!.headers["webhook-timestamp"]),
      signature: String(second!.headers["webhook-signature"]),
      body: second!.body
    }
    const nowSeconds = Math.floor(h.clock.now().getTime() / 1000)
    expect(verifyHmac(newSecret, signed, { nowSeconds })).toMatchObject({ ok: true })
    expect(verifyHmac(oldSecret, signed, { nowSeconds })).toMatchObject({ ok: false })
  })
})

describe("events and subscription modes", () => {
  it("alias and message events reach the endpoints whose mode selects them, with text_body only when asked", async () => {
    const session = await h.signup({ plan: "pro" })
    const all = await createWebhook(session, { name: "all", include_text_body: true })
    const otp = await createWebhook(session, { name: "otp", subscription: { mode: "otp" } })
    const label = await createWebhook(session, { name: "label", subscription: { mode: "label", label: "SHOPPING" } })
    const shop = await claimAlias(session, "Shopping")
    const other = await claimAlias(session, "other")
    h.clock.advance("1 second") // the injected clock stands still otherwise
    const pick = await createWebhook(session, { name: "aliases", subscription: { mode: "aliases", alias_ids: [other.id] } })
    const messageId = await inject(session, shop.id, { text: "Your code is 482913.\nThanks" })
    await inject(session, other.id, { text: "no code here" })
    // runOnce answers once every attempt has its answer: the receiver has seen all it will.
    await worker.runOnce()

    const byEndpoint = new Map<number, Array<{ type: string; data: any }>>()
    const secrets = new Map([all, otp, label, pick].map((w) => [w.webhook.id, w.secret]))
    const deliveries = await h.query("SELECT webhook_id, event_id FROM webhook_deliveries WHERE account_id = $1", [session.accountId])
    for (const request of receiver.requests) {
      const eventId = request.headers["webhook-id"]
      const webhookId = deliveries.find((d) => d.event_id === eventId && verifies(secrets.get(d.webhook_id)!, request))?.webhook_id
      expect(webhookId, "every request verifies under its endpoint's secret").toBeDefined()
      const payload = (await expectVerified(secrets.get(webhookId)!, request)) as unknown as { type: string; data: any }
      byEndpoint.set(webhookId, [...(byEndpoint.get(webhookId) ?? []), payload])
    }
    const types = (w: { webhook: { id: number } }) => (byEndpoint.get(w.webhook.id) ?? []).map((p) => p.type).sort()
    // `all` endpoints created before the aliases: both claims, two messages and one code.
    expect(types(all)).toEqual(["alias.claimed", "alias.claimed", "message.otp_extracted", "message.received", "message.received"])
    expect(types(otp)).toEqual(["message.otp_extracted"])
    expect(types(label)).toEqual(["alias.claimed", "message.otp_extracted", "message.received"])
    // Created after the claims: only the message of its alias.
    expect(types(pick)).toEqual(["message.received"])

    const received = byEndpoint.get(all.webhook.id)!.find((p) => p.type === "message.received" && p.data.message_id === messageId)!
    expect(received.data.text_body).toContain("Your code is 482913.")
    expect(received.data.otp.code).toBe("482913")
    expect(received.data.alias).toEqual({ id: shop.id, address: shop.address, label: "Shopping" })
    const withoutText = byEndpoint.get(label.webhook.id)!.find((p) => p.type === "message.received")!
    expect(withoutText.data).not.toHaveProperty("text_body")
  })

  it("a paused endpoint gets nothing; its queued deliveries are abandoned", async () => {
    const session = await h.signup({ plan: "pro" })
    const { webhook } = await createWebhook(session)
    await h.request(`/webhooks/${webhook.id}/test`, { method: "POST", session })
    await h.request(`/webhooks/${webhook.id}`, { method: "PATCH", session, body: { status: "paused" } })
    await claimAlias(session)
    // runOnce answers once every attempt has its answer: the receiver has seen all it will.
    await worker.runOnce()
    expect(receiver.requests).toHaveLength(0)
    const rows = await h.query("SELECT status FROM webhook_deliveries WHERE webhook_id = $1", [webhook.id])
    expect(rows.map((r) => r.status)).toEqual(["abandoned"])
  })

  it("a deleted endpoint gets nothing more", async () => {
    const session = await h.signup({ plan: "pro" })
    const { webhook } = await createWebhook(session)
    await h.request(`/webhooks/${webhook.id}/test`, { method: "POST", session })
    await h.request(`/webhooks/${webhook.id}`, { method: "DELETE", session })
    await claimAlias(session)
    // runOnce answers once every attempt has its answer: the receiver has seen all it will.
    await worker.runOnce()
    expect(receiver.requests).toHaveLength(0)
  })
})

describe("redelivery", () => {
  it("sends the identical bytes under the same webhook-id with a fresh timestamp, keeping the history", async () => {
    const session = await h.signup({ plan: "pro" })
    const { webhook, secret } = await createWebhook(session)
    const queued = (await h.request(`/webhooks/${webhook.id}/test`, { method: "POST", session })).body.delivery
    await worker.runOnce()
    await receiver.waitFor(1)
    h.clock.advance("90 seconds")
    const answer = await h.request(`/webhooks/deliveries/${queued.id}/redeliver`, { method: "POST", session })
    expect(answer.status, answer.text).toBe(202)
    expect(answer.body.delivery).toMatchObject({ id: queued.id, eventId: queued.eventId, status: "pending", cycleAttemptCount: 0, attemptCount: 1 })
    await worker.runOnce()
    const [first, second] = await receiver.waitFor(2)
    expect(second!.headers["webhook-id"]).toBe(first!.headers["webhook-id"])
    expect(Buffer.from(second!.body).equals(Buffer.from(first!.body))).toBe(true)
    expect(Number(second!.headers["webhook-timestamp"])).toBe(Number(first!.headers["webhook-timestamp"]) + 90)
    expect(second!.headers["webhook-signature"]).not.toBe(first!.headers["webhook-signature"])
    await expectVerified(secret, second!)
    const page = expectShape(WebhookDeliveryPage, (await h.request(`/webhooks/${webhook.id}/deliveries`, { session })).body)
    expect(page.items[0]).toMatchObject({ status: "succeeded", attemptCount: 2, cycleAttemptCount: 1 })
    expect(page.items[0]!.attempts.map((a) => a.attempt)).toEqual([1, 2])
  })
})

const verifies = (secret: string, request: ReceivedRequest) => {
  try {
    verifyWithStandardWebhooks(secret, request)
    return true
  } catch {
    return false
  }
}
