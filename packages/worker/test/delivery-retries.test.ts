/**
 * Retries, terminal failures, the three-day disable and crash recovery (spec 3.3, 6.5), all on
 * the injected clock: nothing here sleeps to let time-dependent rules pass.
 */
import { RetryJitter, RetryScheduleSeconds } from "@burnbox/domain"
import {
  caFileSetting,
  type DeliveryWorker,
  expectProblem,
  type Harness,
  type Receiver,
  type Session,
  startDeliveryWorker,
  startHarness,
  startReceiver
} from "@burnbox/testkit"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { DeliveryLeaseMs } from "@burnbox/worker"

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
beforeEach(async () => {
  // Retries left queued by an earlier test would fall due here: each test starts with none.
  await h.query("UPDATE webhook_deliveries SET status = 'abandoned' WHERE status IN ('pending', 'delivering')")
  receiver.requests.length = 0
  receiver.reply(() => ({ status: 200, body: "ok" }))
})

const setup = async () => {
  const session = await h.signup({ plan: "pro" })
  const answer = await h.request("/webhooks", {
    method: "POST",
    session,
    body: { name: "flaky", url: receiver.url, subscription: { mode: "all" } }
  })
  expect(answer.status, answer.text).toBe(201)
  return { session, webhookId: answer.body.webhook.id as number }
}

const test = async (session: Session, webhookId: number) => {
  const answer = await h.request(`/webhooks/${webhookId}/test`, { method: "POST", session })
  expect(answer.status, answer.text).toBe(202)
  return answer.body.delivery.id as number
}

const delivery = async (id: number) =>
  (await h.query("SELECT * FROM webhook_deliveries WHERE id = $1", [id]))[0] as {
    status: string
    attempt_count: number
    cycle_attempt_count: number
    next_attempt_at: Date
    last_attempt_at: Date | null
    last_http_status: number | null
    last_error: string | null
  }

const webhook = async (session: Session, id: number) =>
  ((await h.request("/webhooks", { session })).body.items as Array<any>).find((w) => w.id === id)

describe("retry schedule", () => {
  it("5xx retries at about 60, 300, 1800, 7200, 21600, 43200, 86400 s with jitter, eight attempts, then failed", async () => {
    receiver.reply(() => ({ status: 503, body: "busy" }))
    const { session, webhookId } = await setup()
    const id = await test(session, webhookId)
    await worker.runOnce()
    for (const [index, seconds] of RetryScheduleSeconds.entries()) {
      const row = await delivery(id)
      expect(row).toMatchObject({ status: "pending", attempt_count: index + 1, cycle_attempt_count: index + 1, last_http_status: 503, last_error: "http_503" })
      const wait = (row.next_attempt_at.getTime() - row.last_attempt_at!.getTime()) / 1000
      expect(wait).toBeGreaterThanOrEqual(seconds * (1 - RetryJitter) - 0.001)
      expect(wait).toBeLessThanOrEqual(seconds * (1 + RetryJitter) + 0.001)
      // One second early: not due yet.
      h.clock.set(row.next_attempt_at.getTime() - 1000)
      expect((await worker.runOnce()).attempted).toBe(0)
      h.clock.set(row.next_attempt_at)
      expect((await worker.runOnce()).attempted).toBe(1)
    }
    const final = await delivery(id)
    expect(final).toMatchObject({ status: "failed", attempt_count: 8, cycle_attempt_count: 8 })
    expect(receiver.requests).toHaveLength(8)
    expect(new Set(receiver.requests.map((r) => r.headers["webhook-id"])).size).toBe(1)
    const page = (await h.request(`/webhooks/${webhookId}/deliveries`, { session })).body.items[0]
    expect(page.attempts.map((a: any) => [a.attempt, a.status, a.httpStatus, a.errorCode])).toEqual(
      Array.from({ length: 8 }, (_, i) => [i + 1, "failed", 503, "http_503"])
    )
    const endpoint = await webhook(session, webhookId)
    expect(endpoint).toMatchObject({ failureCount: 8, status: "active" })
    expect(endpoint.failureSince).not.toBeNull()
  })

  it("429 and connection errors retry; other statuses and redirects are terminal (never followed)", async () => {
    const { session, webhookId } = await setup()
    for (const [reply, status, error] of [
      [{ status: 429 }, "pending", "http_429"],
      [{ status: 404 }, "failed", "http_404"],
      [{ status: 400 }, "failed", "http_400"],
      [{ status: 302, headers: { location: "https://127.0.0.1:1/elsewhere" } }, "failed", "redirect_refused"]
    ] as const) {
      receiver.requests.length = 0
      receiver.reply(() => reply)
      const id = await test(session, webhookId)
      await worker.runOnce()
      expect(await delivery(id), JSON.stringify(reply)).toMatchObject({ status, attempt_count: 1, last_error: error })
      expect(receiver.requests).toHaveLength(1)
      await h.query("UPDATE webhook_deliveries SET status = 'abandoned' WHERE id = $1", [id])
    }
    // Nobody listening: a connection error, retried.
    await h.query("UPDATE webhooks SET url = 'https://127.0.0.1:1/hook' WHERE id = $1", [webhookId])
    const id = await test(session, webhookId)
    await worker.runOnce()
    expect(await delivery(id)).toMatchObject({ status: "pending", attempt_count: 1, last_error: "connection_refused", last_http_status: null })
  })

  it("records a response whose snippet cut splits a character, or that holds NUL, instead of failing the batch", async () => {
    const { session, webhookId } = await setup()
    // 511 characters, then an emoji (two UTF-16 units) across the 512-character cut, then a NUL.
    receiver.reply(() => ({ status: 200, body: `${"a".repeat(511)}\u{1F600}\u0000tail` }))
    const split = await test(session, webhookId)
    await worker.runOnce()
    receiver.reply(() => ({ status: 200, body: "ok\u0000done" }))
    const nul = await test(session, webhookId)
    await worker.runOnce()
    expect(await delivery(split)).toMatchObject({ status: "succeeded", last_http_status: 200 })
    expect(await delivery(nul)).toMatchObject({ status: "succeeded", last_http_status: 200 })
    const snippets = await h.query<{ delivery_id: number; response_snippet: string }>(
      "SELECT delivery_id, response_snippet FROM webhook_attempts WHERE delivery_id = ANY($1::bigint[])", [[split, nul]])
    expect(Object.fromEntries(snippets.map((r) => [r.delivery_id, r.response_snippet]))).toEqual({
      [split]: `${"a".repeat(511)}\uFFFD`,
      [nul]: "okdone"
    })
  })

  it("redelivery of a failed delivery resets the cycle and keeps the history", async () => {
    receiver.reply(() => ({ status: 410 }))
    const { session, webhookId } = await setup()
    const id = await test(session, webhookId)
    await worker.runOnce()
    expect(await delivery(id)).toMatchObject({ status: "failed", attempt_count: 1 })
    receiver.reply(() => ({ status: 204 }))
    expect((await h.request(`/webhooks/deliveries/${id}/redeliver`, { method: "POST", session })).status).toBe(202)
    await worker.runOnce()
    expect(await delivery(id)).toMatchObject({ status: "succeeded", attempt_count: 2, cycle_attempt_count: 1 })
    expect(receiver.requests[0]!.text).toBe(receiver.requests[1]!.text)
  })
})

describe("three days of failures", () => {
  it("disables the endpoint, abandons its queue, and leaves a notice for the owner", async () => {
    receiver.reply(() => ({ status: 500 }))
    const { session, webhookId } = await setup()
    await test(session, webhookId)
    await worker.runOnce()
    const since = (await webhook(session, webhookId)).failureSince
    expect(since).toBe(h.clock.now().toISOString())

    h.clock.advance("2 days")
    await test(session, webhookId)
    await worker.runOnce()
    expect((await webhook(session, webhookId)).status).toBe("active")

    h.clock.advance("1 day")
    const last = await test(session, webhookId)
    await worker.runOnce()
    const endpoint = await webhook(session, webhookId)
    expect(endpoint).toMatchObject({ status: "disabled", disabledAt: h.clock.now().toISOString(), failureSince: since })
    // Its own retry was queued, and abandoned with the rest.
    expect((await delivery(last)).status).toBe("abandoned")
    const queued = await h.query("SELECT status FROM webhook_deliveries WHERE webhook_id = $1 AND status IN ('pending', 'delivering')", [webhookId])
    expect(queued).toEqual([])
    const notices = await h.query("SELECT kind, data FROM account_notices WHERE account_id = $1", [session.accountId])
    expect(notices).toEqual([{ kind: "webhook.disabled", data: expect.objectContaining({ webhookId, name: "flaky" }) }])
    expectProblem(await h.request(`/webhooks/${webhookId}/test`, { method: "POST", session }), 409, "webhook_disabled")
    const before = receiver.requests.length
    h.clock.advance("2 days")
    await worker.runOnce()
    expect(receiver.requests.length).toBe(before)
  })

  it("a success in between starts the count again", async () => {
    receiver.reply(() => ({ status: 500 }))
    const { session, webhookId } = await setup()
    await test(session, webhookId)
    await worker.runOnce()
    h.clock.advance("2 days")
    receiver.reply(() => ({ status: 200 }))
    await test(session, webhookId)
    await worker.runOnce()
    expect(await webhook(session, webhookId)).toMatchObject({ failureCount: 0, failureSince: null, lastSuccessAt: h.clock.now().toISOString() })
    receiver.reply(() => ({ status: 500 }))
    h.clock.advance("1 day")
    await test(session, webhookId)
    await worker.runOnce()
    expect((await webhook(session, webhookId)).status).toBe("active")
  })
})

describe("a worker that dies mid-delivery", () => {
  it("loses no event: the claim's lease runs out and another worker delivers it", async () => {
    const { session, webhookId } = await setup()
    const id = await test(session, webhookId)
    // The first worker claims the delivery and dies before sending it.
    const dying = await startDeliveryWorker(h, caFileSetting(receiver))
    expect(await dying.claimOnly()).toBe(1)
    await dying.close()
    expect((await delivery(id)).status).toBe("delivering")
    // While the lease holds, nobody else takes it.
    expect((await worker.runOnce()).attempted).toBe(0)
    h.clock.advance(DeliveryLeaseMs - 1_000)
    expect((await worker.runOnce()).attempted).toBe(0)
    h.clock.advance(2_000)
    expect((await worker.runOnce()).attempted).toBe(1)
    expect(await delivery(id)).toMatchObject({ status: "succeeded", attempt_count: 1 })
    expect(receiver.requests).toHaveLength(1)
  })

  it("an event written while no worker ran is delivered by the next one", async () => {
    const { session, webhookId } = await setup()
    const reserved = await h.request("/aliases/candidates", { method: "POST", session, body: { domainId: 1, style: "words" } })
    h.clock.advance("1 second")
    await h.request("/aliases", { method: "POST", session, body: { aliasId: reserved.body.candidates[0].id, reservationToken: reserved.body.reservationToken } })
    const fresh = await startDeliveryWorker(h, caFileSetting(receiver))
    try {
      await fresh.runOnce()
    } finally {
      await fresh.close()
    }
    expect(receiver.requests.map((r) => JSON.parse(r.text).type)).toEqual(["alias.claimed"])
    expect((await h.query("SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1", [webhookId]))[0].n).toBe(1)
  })
})

describe("retention", () => {
  it("purges payloads and logs after 30 days; redelivery then answers 410", async () => {
    const { session, webhookId } = await setup()
    const token = await h.createToken(session, ["webhooks"])
    const id = await test(session, webhookId)
    await worker.runOnce()
    h.clock.advance("30 days")
    h.clock.advance("1 minute")
    expect(await worker.purge()).toBeGreaterThanOrEqual(1)
    expect((await h.query("SELECT payload FROM webhook_deliveries WHERE id = $1", [id]))[0].payload).toBeNull()
    expect(await h.query("SELECT 1 FROM webhook_attempts WHERE delivery_id = $1", [id])).toEqual([])
    expect((await h.request(`/webhooks/${webhookId}/deliveries`, { token })).body.items).toEqual([])
    expectProblem(await h.request(`/webhooks/deliveries/${id}/redeliver`, { method: "POST", token }), 410, "payload_expired")
  })
})
