/**
 * Guest webhooks and guest tokens on a shared mailbox, and the owner's oversight of them (spec
 * 2.17, 4.4, 6.2, 6.5 rule 6), through the API and the real delivery engine on the manual clock:
 * - a guest's endpoint receives the mailbox's events with shared_mailbox true and owner_handle,
 *   never the owner's label; the owner's own endpoint gets shared_mailbox false;
 * - each guest endpoint and guest token is a ShareGrant the owner lists (host only, no names, no
 *   guest email) as new until acknowledged, with delivery status and last use;
 * - the owner revokes a token (it stops reaching the mailbox on its next request) and an endpoint
 *   with a retry queued (abandoned; re-registering the URL does not restore it); the guest's
 *   GET /share-grants/revoked tells each as owner_revoked.
 */
import { ShareGrant } from "@burnbox/domain"
import {
  caFileSetting,
  claimAlias,
  type DeliveryWorker,
  deliver,
  expectNoneOf,
  expectProblem,
  expectShape,
  type Harness,
  type Receiver,
  type Session,
  shareMailbox,
  startDeliveryWorker,
  startHarness,
  startReceiver
} from "@burnbox/testkit"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let receiver: Receiver
let worker: DeliveryWorker
let owner: Session
let guest: Session
let stranger: Session
let aliasId: number
let ownerHandle: string
let guestToken: string
let guestTokenId: number
let guestWebhookId: number
const label = "grants-owner-label-41f"
const endpointName = "guest-endpoint-name-7e2"
const tokenName = "guest-token-name-c90"

const Grants = Schema.Struct({ items: Schema.Array(ShareGrant) })
const grantsOf = async () => {
  const answer = await h.request(`/aliases/${aliasId}/share-grants`, { session: owner })
  expect(answer.status, answer.text).toBe(200)
  expectNoneOf(answer, [guest.email, endpointName, tokenName, "/hook"])
  return expectShape(Grants, answer.body).items
}
const revokedOf = async () => {
  const answer = await h.request("/share-grants/revoked", { session: guest })
  expect(answer.status, answer.text).toBe(200)
  expectNoneOf(answer, [owner.email, label])
  return answer.body.items as Array<Record<string, unknown>>
}
const envelopes = () => receiver.requests.map((r) => JSON.parse(r.text) as Record<string, any>)

beforeAll(async () => {
  receiver = await startReceiver()
  h = await startHarness(caFileSetting(receiver), undefined, { seed: 3104 })
  worker = await startDeliveryWorker(h, caFileSetting(receiver))
  ;[owner, guest, stranger] = await Promise.all([h.signup({ plan: "pro" }), h.signup({ plan: "pro" }), h.signup({ plan: "pro" })])
  aliasId = (await claimAlias(h, { session: owner })).id
  expect((await h.request(`/aliases/${aliasId}`, { method: "PATCH", session: owner, body: { label } })).status).toBe(200)
  await shareMailbox(h, { session: owner }, { session: guest }, { aliasId, email: guest.email, role: "viewer" })
  ownerHandle = (await h.request("/bootstrap", { session: owner })).body.user.handle
  const created = await h.request("/webhooks", { method: "POST", session: guest, body: { name: endpointName, url: receiver.url, subscription: { mode: "all" } } })
  expect(created.status, created.text).toBe(201)
  guestWebhookId = created.body.webhook.id
  const ownerHook = await h.request("/webhooks", {
    method: "POST",
    session: owner,
    body: { name: "owner's own", url: receiver.url.replace("/hook", "/owner"), subscription: { mode: "all" } }
  })
  expect(ownerHook.status, ownerHook.text).toBe(201)
  guestToken = await h.createToken(guest, ["read"], tokenName)
  guestTokenId = (await h.request("/tokens", { session: guest })).body.items[0].id
})
afterAll(async () => {
  await worker?.close()
  await h?.close()
  await receiver?.close()
})

describe("a guest's endpoint", () => {
  it("receives the shared mailbox's mail with shared_mailbox true and the owner's handle, without the owner's label", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId, 1, { subject: "for both" })
    await worker.runOnce()
    await receiver.waitFor(2)
    const received = envelopes().filter((e) => e.type === "message.received" && e.data.message_id === id)
    const guests = received.find((e) => e.shared_mailbox === true)
    const owners = received.find((e) => e.shared_mailbox === false)
    expect(guests).toMatchObject({ shared_mailbox: true, owner_handle: ownerHandle, data: { alias: { id: aliasId, label: null } } })
    expect(owners).toMatchObject({ shared_mailbox: false, owner_handle: null, data: { alias: { id: aliasId, label } } })
    expect(receiver.requests.find((r) => JSON.parse(r.text).shared_mailbox === true)!.text).not.toContain(label)
    expect(receiver.requests.find((r) => JSON.parse(r.text).shared_mailbox === true)!.path).toBe("/hook")
  })
})

describe("the owner's oversight", () => {
  it("lists the guest's endpoint and token as grants, new until acknowledged, host only and nameless", async () => {
    expect((await h.request(`/messages?alias=${aliasId}`, { token: guestToken })).status).toBe(200)
    const grants = await grantsOf()
    const hook = grants.find((g) => g.kind === "webhook")
    const token = grants.find((g) => g.kind === "api_token")
    const guestHandle = (await h.request("/bootstrap", { session: guest })).body.user.handle
    expect(hook).toMatchObject({
      webhookId: guestWebhookId,
      apiTokenId: null,
      guestHandle,
      endpointHost: new URL(receiver.url).host,
      isNewToOwner: true,
      deliveryStatus: "active",
      revokedAt: null,
      revokedBy: null,
      lastUsedAt: null
    })
    expect(hook!.lastSuccessAt).not.toBeNull()
    expect(token).toMatchObject({ apiTokenId: guestTokenId, webhookId: null, endpointHost: null, deliveryStatus: null, isNewToOwner: true })
    expect(token!.lastUsedAt).not.toBeNull()
    expect((await h.request(`/aliases/${aliasId}/share-grants/acknowledge`, { method: "POST", session: owner })).status).toBe(204)
    expect((await grantsOf()).map((g) => g.isNewToOwner)).toEqual([false, false])
  })

  it("is the owner's only: a guest and a stranger get 404", async () => {
    for (const who of [guest, stranger]) {
      expectProblem(await h.request(`/aliases/${aliasId}/share-grants`, { session: who }), 404, "not_found")
      expectProblem(await h.request(`/aliases/${aliasId}/share-grants/acknowledge`, { method: "POST", session: who }), 404, "not_found")
      expectProblem(await h.request(`/aliases/${aliasId}/share-grants/webhooks/${guestWebhookId}`, { method: "DELETE", session: who }), 404, "not_found")
    }
    expectProblem(await h.request(`/aliases/${aliasId}/share-grants/webhooks/999999`, { method: "DELETE", session: owner }), 404, "not_found")
  })
})

describe("revoking", () => {
  it("a token: it stops reaching the mailbox on its next request, the guest keeps it otherwise; owner_revoked", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId, 1, { subject: "token read" })
    expect((await h.request(`/messages/${id}`, { token: guestToken })).status).toBe(200)
    expect((await h.request(`/aliases/${aliasId}/share-grants/api-tokens/${guestTokenId}`, { method: "DELETE", session: owner })).status).toBe(204)
    expectProblem(await h.request(`/messages/${id}`, { token: guestToken }), 404, "not_found")
    const list = await h.request("/aliases", { token: guestToken })
    expect(list.body.items.some((a: { id: number }) => a.id === aliasId)).toBe(false)
    expect((await h.request(`/messages/${id}`, { session: guest })).status).toBe(200)
    expect((await h.request("/me", { token: guestToken })).status).toBe(200)
    const item = (await revokedOf()).find((r) => r["kind"] === "api_token")
    expect(item).toMatchObject({
      aliasId,
      ownerHandle,
      reason: "owner_revoked",
      reversible: false,
      apiTokenId: guestTokenId,
      webhookId: null,
      revokedBy: "owner"
    })
    expect(item!["aliasAddress"]).toMatch(/@burnbox\.test$/)
    expect(item!["revokedAt"]).toBe(item!["endedAt"])
    expect((await grantsOf()).find((g) => g.kind === "api_token")).toMatchObject({ revokedBy: "owner" })
  })

  it("an endpoint with a retry queued: the retry is abandoned, nothing more is sent, re-registering the URL does not restore it", async () => {
    receiver.reply(() => ({ status: 503, body: "busy" }))
    const [id] = await deliver(h, { session: owner }, aliasId, 1, { subject: "will be retried" })
    await worker.runOnce()
    const queued = await h.query(
      "SELECT d.status FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE d.webhook_id = $1 AND (e.data->>'message_id')::int = $2",
      [guestWebhookId, id]
    )
    expect(queued.map((r) => r.status)).toContain("pending")
    receiver.reply(() => ({ status: 200, body: "ok" }))

    expect((await h.request(`/aliases/${aliasId}/share-grants/webhooks/${guestWebhookId}`, { method: "DELETE", session: owner })).status).toBe(204)
    const after = await h.query("SELECT status FROM webhook_deliveries WHERE webhook_id = $1 AND status IN ('pending', 'delivering')", [guestWebhookId])
    expect(after).toEqual([])

    const again = await h.request("/webhooks", { method: "POST", session: guest, body: { name: "again", url: receiver.url, subscription: { mode: "all" } } })
    expect(again.status, again.text).toBe(201)
    const before = receiver.requests.length
    const [next] = await deliver(h, { session: owner }, aliasId, 1, { subject: "after the revocation" })
    await worker.runOnce()
    const sent = receiver.requests.slice(before).map((r) => JSON.parse(r.text))
    expect(sent.filter((e) => e.data?.message_id === next && e.shared_mailbox === true)).toEqual([])
    expect(sent.filter((e) => e.data?.message_id === next && e.shared_mailbox === false)).toHaveLength(1)

    const item = (await revokedOf()).find((r) => r["kind"] === "webhook")
    expect(item).toMatchObject({ aliasId, reason: "owner_revoked", reversible: false, webhookId: guestWebhookId, endpointHost: new URL(receiver.url).host })
  })
})
