/**
 * The Effect face against a real service, and the webhook signature helpers against a real
 * signed delivery (the testkit's HTTPS receiver and the worker's delivery engine).
 */
import { BurnboxClient, BurnboxProblem, verifyWebhook, verifyWebhookEffect } from "@burnbox/client"
import {
  caFileSetting,
  type DeliveryWorker,
  type Harness,
  type Receiver,
  type ReceivedRequest,
  startDeliveryWorker,
  startHarness,
  startReceiver
} from "@burnbox/testkit"
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let receiver: Receiver
let worker: DeliveryWorker
let client: Layer.Layer<BurnboxClient>
beforeAll(async () => {
  receiver = await startReceiver()
  h = await startHarness(caFileSetting(receiver))
  worker = await startDeliveryWorker(h, caFileSetting(receiver))
  // Signatures are checked against the real clock, within five minutes.
  h.clock.set(Date.now())
  const session = await h.signup({ plan: "pro" })
  const token = await h.createToken(session, ["read", "manage-aliases", "test", "webhooks"])
  client = BurnboxClient.layer({ baseUrl: h.baseUrl, token })
})
afterAll(async () => {
  await worker?.close()
  await h?.close()
  await receiver?.close()
})

const run = <A, E>(effect: Effect.Effect<A, E, BurnboxClient>) => Effect.runPromise(Effect.provide(effect, client))

describe("BurnboxClient", () => {
  it("claims, waits for mail and burns, failing with typed BurnboxProblems", async () => {
    const result = await run(Effect.gen(function*() {
      const burnbox = yield* BurnboxClient
      const alias = yield* burnbox.aliases.create({ style: "numeric" })
      yield* burnbox.testMessages.inject({ aliasId: alias.id, from: "Bank <no-reply@bank.example>", subject: "Login", text: "Use 558201 to sign in." })
      const message = yield* burnbox.messages.wait({ alias, timeout: 20, sort: "oldest" })
      yield* burnbox.aliases.burn(alias)
      const again = yield* Effect.flip(burnbox.aliases.burn(999_999))
      const me = yield* burnbox.raw.account.me()
      return { alias, message, again, me }
    }))
    expect(result.alias.style).toBe("numeric")
    expect(result.message.otpCodes).toEqual(["558201"])
    expect(result.again).toBeInstanceOf(BurnboxProblem)
    expect(result.again).toMatchObject({ status: 404, code: "not_found" })
    expect(result.me.plan.code).toBe("pro")
  })
})

describe("verifyWebhook", () => {
  let delivery: ReceivedRequest
  let secret: string
  beforeAll(async () => {
    const created = await run(Effect.gen(function*() {
      const burnbox = yield* BurnboxClient
      const webhook = yield* burnbox.webhooks.create({ name: "client test", url: receiver.url, subscription: { mode: "all" } })
      const alias = yield* burnbox.aliases.create()
      yield* burnbox.testMessages.inject({ aliasId: alias.id, from: "a@example.com", subject: "Hi", text: "code 1234" })
      yield* burnbox.messages.wait({ alias, timeout: 20 })
      return webhook
    }))
    secret = created.secret
    const deadline = Date.now() + 15_000
    while (receiver.requests.length === 0 && Date.now() < deadline) {
      await worker.runOnce()
      if (receiver.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 100))
    }
    delivery = (await receiver.waitFor(1))[0]!
  })

  it("accepts a real delivery by its v1 HMAC and by its v1a Ed25519 signature", async () => {
    const byHmac = await verifyWebhook({ secret, headers: delivery.headers, body: delivery.body })
    expect(byHmac).toMatchObject({ scheme: "v1", id: delivery.headers["webhook-id"] })
    expect(byHmac.payload).toMatchObject({ id: byHmac.id, type: expect.stringMatching(/^(alias|message)\./) })

    const keySet = (await h.request<{ keys: Array<{ publicKey: string }> }>("/.well-known/service-webhooks.json")).body
    const byKey = await verifyWebhook({ keySet, headers: new Headers(delivery.headers as Record<string, string>), body: delivery.text })
    expect(byKey.scheme).toBe("v1a")
    const publicKey = await verifyWebhook({ publicKey: keySet.keys[0]!.publicKey, headers: delivery.headers, body: delivery.body })
    expect(publicKey.scheme).toBe("v1a")
  })

  it("refuses a tampered body, a wrong secret and an old timestamp", async () => {
    const tampered = delivery.text.replace("\"type\":", "\"type\" :")
    const refusal = await Effect.runPromise(Effect.flip(verifyWebhookEffect({ secret, headers: delivery.headers, body: tampered })))
    expect(refusal).toMatchObject({ code: "invalid_signature" })
    await expect(verifyWebhook({ secret: `whsec_${btoa("another secret of 32 bytes......")}`, headers: delivery.headers, body: delivery.body }))
      .rejects.toMatchObject({ code: "invalid_signature" })
    await expect(verifyWebhook({ secret, headers: delivery.headers, body: delivery.body, now: new Date(Date.now() + 600_000) }))
      .rejects.toMatchObject({ code: "timestamp_too_old" })
    await expect(verifyWebhook({ secret, headers: {}, body: delivery.body })).rejects.toBeInstanceOf(BurnboxProblem)
  })
})
