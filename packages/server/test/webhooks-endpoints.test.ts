/**
 * Webhook endpoints: spec 2.21, 3.3, 4.9, 4.10, 7, 8; decisions.md (key set, plans).
 * URL policy at the HTTP level, with DNS answered by an injected resolver.
 */
import { Webhook, WebhookDeliveryPage, WebhookDeliveryQueued, WebhookList, WebhookWithSecret } from "@burnbox/domain"
import { WebhookKeySet } from "@burnbox/domain/webhooks/index"
import { expectProblem, expectShape, type Harness, type Session, startHarness } from "@burnbox/testkit"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

/** What the injected DNS answers for each test name. */
const dns: Record<string, ReadonlyArray<string>> = {
  "hooks.example.com": ["93.184.216.34"],
  "dual.example.com": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"],
  "intranet.example.com": ["10.1.2.3"],
  "sneaky.example.com": ["93.184.216.34", "192.168.1.10"],
  "metadata.example.com": ["169.254.169.254"],
  "loop.example.com": ["127.0.0.1"],
  "loop6.example.com": ["::1"],
  "mapped.example.com": ["::ffff:10.0.0.1"],
  "ula.example.com": ["fd00::1"],
  "cgnat.example.com": ["100.64.0.1"]
}

let h: Harness
let pro: Session
let token: string
beforeAll(async () => {
  h = await startHarness({}, undefined, { targetResolver: (host) => Effect.succeed(dns[host] ?? []) })
  pro = await h.signup({ plan: "pro" })
  token = await h.createToken(pro, ["webhooks", "read"])
})
afterAll(() => h.close())

const create = (body: unknown, auth: { token: string } | { session: Session } = { token }) =>
  h.request("/webhooks", { method: "POST", ...auth, body })

const valid = { name: "ci", url: "https://hooks.example.com/burnbox", subscription: { mode: "all" } }

const created = async (body: unknown = valid, auth: { token: string } | { session: Session } = { token }) => {
  const answer = await create(body, auth)
  expect(answer.status, answer.text).toBe(201)
  return expectShape(WebhookWithSecret, answer.body)
}

const expectUrlRefused = async (url: string, reason: string) => {
  const answer = await create({ ...valid, url })
  expectProblem(answer, 422, "validation_failed")
  expect(answer.body.error.fields, `${url}: ${answer.text}`).toEqual({ url: reason })
}

describe("POST /webhooks", () => {
  it("creates an endpoint and shows its whsec_ secret once, stored only encrypted", async () => {
    const { webhook, secret, secretShownOnce } = await created({
      ...valid,
      spki_pin: `sha256/${"A".repeat(43)}=`,
      include_text_body: true,
      include_message_restored: true
    })
    expect(secretShownOnce).toBe(true)
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    expect(webhook).toMatchObject({
      name: "ci",
      url: "https://hooks.example.com/burnbox",
      subscription: { mode: "all" },
      spkiPin: `sha256/${"A".repeat(43)}=`,
      includeTextBody: true,
      includeMessageRestored: true,
      status: "active",
      failureCount: 0,
      secretVersion: 1,
      lastSuccessAt: null,
      lastFailureAt: null,
      failureSince: null,
      disabledAt: null
    })
    const rows = JSON.stringify(await h.query("SELECT * FROM webhooks"))
    expect(rows).not.toContain(secret.slice(6))
    const listed = expectShape(WebhookList, (await h.request("/webhooks", { token })).body)
    expect(JSON.stringify(listed)).not.toContain(secret.slice(6))
  })

  it("defaults spki_pin to null and both flags to false", async () => {
    const { webhook } = await created()
    expect(webhook).toMatchObject({ spkiPin: null, includeTextBody: false, includeMessageRestored: false })
  })

  it("takes each of the five subscription modes with its own fields", async () => {
    for (const subscription of [
      { mode: "all" },
      { mode: "aliases", alias_ids: [1, 2, 3] },
      { mode: "label", label: "Shopping" },
      { mode: "tag", tag_id: 7 },
      { mode: "otp" }
    ]) {
      const session = await h.signup({ plan: "pro" })
      const { webhook } = await created({ ...valid, subscription }, { session })
      expect(webhook.subscription).toEqual(subscription)
    }
  })

  it("refuses subscriptions that are not exactly one mode with its fields (422)", async () => {
    for (const subscription of [
      {},
      { mode: "everything" },
      { mode: "all", label: "x" },
      { mode: "aliases" },
      { mode: "aliases", alias_ids: [] },
      { mode: "aliases", alias_ids: [1, 1] },
      { mode: "aliases", alias_ids: Array.from({ length: 101 }, (_, i) => i + 1) },
      { mode: "aliases", alias_ids: [0] },
      { mode: "label", label: "" },
      { mode: "label", label: "x".repeat(161) },
      { mode: "tag" },
      { mode: "tag", tag_id: "7" },
      { mode: "otp", tag_id: 1 }
    ]) {
      const answer = await create({ ...valid, subscription })
      expectProblem(answer, 422, "validation_failed")
      expect(Object.keys(answer.body.error.fields ?? {}).some((f) => f.startsWith("subscription")), JSON.stringify(subscription) + answer.text).toBe(true)
    }
  })

  it("checks name, spki_pin, flags and unknown fields", async () => {
    const cases: Array<[unknown, string]> = [
      [{ ...valid, name: "x".repeat(81) }, "name"],
      [{ url: valid.url, subscription: valid.subscription }, "name"],
      [{ ...valid, spki_pin: "sha256/short=" }, "spki_pin"],
      [{ ...valid, spki_pin: `sha1/${"A".repeat(43)}=` }, "spki_pin"],
      [{ ...valid, include_text_body: "yes" }, "include_text_body"],
      [{ ...valid, include_message_restored: 1 }, "include_message_restored"],
      [{ ...valid, includeTextBody: true }, "includeTextBody"],
      [{ name: "x", subscription: valid.subscription }, "url"]
    ]
    for (const [body, field] of cases) {
      const answer = await create(body)
      expectProblem(answer, 422, "validation_failed")
      expect(answer.body.error.fields, answer.text).toHaveProperty([field])
    }
    expect(await create({ ...valid, name: "x".repeat(80), spki_pin: null })).toHaveProperty("status", 201)
  })

  it("refuses URLs that are not public HTTPS on port 443, with a reason code", async () => {
    const cases: Array<[string, string]> = [
      ["http://hooks.example.com/x", "https_required"],
      ["ftp://hooks.example.com/x", "https_required"],
      ["not a url", "invalid_url"],
      ["https://user:pass@hooks.example.com/x", "credentials_not_allowed"],
      ["https://hooks.example.com/x#frag", "fragment_not_allowed"],
      ["https://hooks.example.com:8443/x", "port_not_allowed"],
      ["https://127.0.0.1/x", "private_address"],
      ["https://10.0.0.8/x", "private_address"],
      ["https://169.254.169.254/latest/meta-data", "private_address"],
      ["https://[::1]/x", "private_address"],
      ["https://[::ffff:127.0.0.1]/x", "private_address"],
      ["https://[fe80::1]/x", "private_address"],
      ["https://224.0.0.1/x", "private_address"],
      ["https://0x7f000001/x", "private_address"],
      ["https://2130706433/x", "private_address"],
      ["https://192.0.2.1/x", "private_address"],
      ["https://localhost/x", "localhost_not_allowed"],
      ["https://printer.local/x", "localhost_not_allowed"],
      ["https://intranet/x", "localhost_not_allowed"],
      // through DNS
      ["https://intranet.example.com/x", "private_address"],
      ["https://sneaky.example.com/x", "private_address"],
      ["https://metadata.example.com/x", "private_address"],
      ["https://loop.example.com/x", "private_address"],
      ["https://loop6.example.com/x", "private_address"],
      ["https://mapped.example.com/x", "private_address"],
      ["https://ula.example.com/x", "private_address"],
      ["https://cgnat.example.com/x", "private_address"],
      ["https://nxdomain.example.com/x", "unresolvable"]
    ]
    for (const [url, reason] of cases) await expectUrlRefused(url, reason)
  })

  it("accepts public names (every address public) and public literals on 443", async () => {
    for (const url of ["https://dual.example.com/x", "https://hooks.example.com:443/x?a=1", "https://93.184.216.34/x"]) {
      const session = await h.signup({ plan: "pro" })
      await created({ ...valid, url }, { session })
    }
  })

  it("answers 409 once the plan's webhookCount is used, and deleting frees a place", async () => {
    const session = await h.signup({ plan: "pro" })
    const ids: Array<number> = []
    for (let i = 0; i < 10; i++) ids.push((await created({ ...valid, name: `n${i}` }, { session })).webhook.id)
    expectProblem(await create(valid, { session }), 409, "webhook_limit_reached")
    expect((await h.request(`/webhooks/${ids[0]}`, { method: "DELETE", session })).status).toBe(204)
    await created(valid, { session })
  })

  it("answers 409 on a plan without webhooks (webhookCount 0)", async () => {
    const session = await h.signup({ plan: "free" })
    expectProblem(await create(valid, { session }), 409, "webhook_limit_reached")
    const list = expectShape(WebhookList, (await h.request("/webhooks", { session })).body)
    expect(list).toEqual({ items: [], limit: 0 })
  })

  it("needs the webhooks scope (403 with WWW-Authenticate)", async () => {
    const readOnly = await h.createToken(pro, ["read"])
    const answer = await create(valid, { token: readOnly })
    expectProblem(answer, 403, "insufficient_scope")
    expect(answer.headers.get("www-authenticate")).toContain("webhooks")
  })
})

describe("GET, PATCH, DELETE /webhooks/{id}", () => {
  it("lists the owner's endpoints with the plan limit; a stranger sees none and gets 404", async () => {
    const owner = await h.signup({ plan: "pro" })
    const stranger = await h.signup({ plan: "pro" })
    const { webhook } = await created(valid, { session: owner })
    const list = expectShape(WebhookList, (await h.request("/webhooks", { session: owner })).body)
    expect(list.limit).toBe(10)
    expect(list.items.map((w) => w.id)).toEqual([webhook.id])
    expect(expectShape(WebhookList, (await h.request("/webhooks", { session: stranger })).body).items).toEqual([])
    expectProblem(await h.request(`/webhooks/${webhook.id}`, { method: "PATCH", session: stranger, body: { name: "x" } }), 404, "not_found")
    expectProblem(await h.request(`/webhooks/${webhook.id}`, { method: "DELETE", session: stranger }), 404, "not_found")
    expectProblem(await h.request(`/webhooks/${webhook.id}/rotate-secret`, { method: "POST", session: stranger }), 404, "not_found")
    expectProblem(await h.request(`/webhooks/${webhook.id}/deliveries`, { session: stranger }), 404, "not_found")
    expectProblem(await h.request(`/webhooks/${webhook.id}/test`, { method: "POST", session: stranger }), 404, "not_found")
  })

  it("PATCH changes any field, re-checks the URL, and moves active <-> paused", async () => {
    const { webhook } = await created()
    const patch = (body: unknown) => h.request(`/webhooks/${webhook.id}`, { method: "PATCH", token, body })
    const answer = await patch({
      name: "renamed",
      url: "https://dual.example.com/new",
      subscription: { mode: "otp" },
      spki_pin: `sha256/${"B".repeat(43)}=`,
      include_text_body: true,
      include_message_restored: true,
      status: "paused"
    })
    expect(answer.status, answer.text).toBe(200)
    expect(expectShape(Webhook, answer.body)).toMatchObject({
      name: "renamed",
      url: "https://dual.example.com/new",
      subscription: { mode: "otp" },
      spkiPin: `sha256/${"B".repeat(43)}=`,
      includeTextBody: true,
      includeMessageRestored: true,
      status: "paused"
    })
    expect((await patch({ status: "active", spki_pin: null })).body).toMatchObject({ status: "active", spkiPin: null })
    const refused = await patch({ url: "https://intranet.example.com/x" })
    expectProblem(refused, 422, "validation_failed")
    expect(refused.body.error.fields).toEqual({ url: "private_address" })
    expectProblem(await patch({ status: "disabled" }), 422, "validation_failed")
    expectProblem(await patch({ name: "" }), 422, "validation_failed")
    expectProblem(await patch({ secretVersion: 3 }), 422, "validation_failed")
    expectProblem(await h.request("/webhooks/999999", { method: "PATCH", token, body: { name: "x" } }), 404, "not_found")
  })

  it("DELETE removes it from the list and answers 404 the second time", async () => {
    const { webhook } = await created()
    expect((await h.request(`/webhooks/${webhook.id}`, { method: "DELETE", token })).status).toBe(204)
    const list = expectShape(WebhookList, (await h.request("/webhooks", { token })).body)
    expect(list.items.map((w) => w.id)).not.toContain(webhook.id)
    expectProblem(await h.request(`/webhooks/${webhook.id}`, { method: "DELETE", token }), 404, "not_found")
  })

  it("rotate-secret returns a new secret once and bumps secretVersion", async () => {
    const first = await created()
    const answer = await h.request(`/webhooks/${first.webhook.id}/rotate-secret`, { method: "POST", token })
    expect(answer.status, answer.text).toBe(200)
    const rotated = expectShape(WebhookWithSecret, answer.body)
    expect(rotated.secret).toMatch(/^whsec_/)
    expect(rotated.secret).not.toBe(first.secret)
    expect(rotated.webhook.secretVersion).toBe(2)
  })
})

describe("tests, deliveries and redelivery (API side)", () => {
  it("POST /webhooks/{id}/test queues webhook.test (202); 409 while paused", async () => {
    const { webhook } = await created()
    const answer = await h.request(`/webhooks/${webhook.id}/test`, { method: "POST", token })
    expect(answer.status, answer.text).toBe(202)
    const { delivery } = expectShape(WebhookDeliveryQueued, answer.body)
    expect(delivery).toMatchObject({ webhookId: webhook.id, eventType: "webhook.test", status: "pending", attemptCount: 0, cycleAttemptCount: 0 })
    expect(delivery.eventId).toMatch(/^evt_[0-9A-HJKMNP-TV-Z]{26}$/)
    const page = expectShape(WebhookDeliveryPage, (await h.request(`/webhooks/${webhook.id}/deliveries`, { token })).body)
    expect(page.items.map((d) => d.id)).toEqual([delivery.id])
    expect(page.items[0]).toMatchObject({ webhookName: "ci", attempts: [], lastAttemptAt: null, deliveredAt: null })
    expect(page.items[0]!.createdAt).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?\+00$/)

    await h.request(`/webhooks/${webhook.id}`, { method: "PATCH", token, body: { status: "paused" } })
    expectProblem(await h.request(`/webhooks/${webhook.id}/test`, { method: "POST", token }), 409, "webhook_paused")
    const after = expectShape(WebhookDeliveryPage, (await h.request(`/webhooks/${webhook.id}/deliveries`, { token })).body)
    expect(after.items[0]!.status).toBe("abandoned")
  })

  it("delivery listings are newest first, limit 1..100 (default 50), across all endpoints", async () => {
    const session = await h.signup({ plan: "pro" })
    const a = (await created(valid, { session })).webhook.id
    const b = (await created(valid, { session })).webhook.id
    for (const id of [a, b, a]) await h.request(`/webhooks/${id}/test`, { method: "POST", session })
    const all = expectShape(WebhookDeliveryPage, (await h.request("/webhooks/deliveries", { session })).body)
    expect(all.items.map((d) => d.webhookId)).toEqual([a, b, a])
    expect(all.items.map((d) => d.id)).toEqual(all.items.map((d) => d.id).sort((x, y) => y - x))
    expect((await h.request("/webhooks/deliveries?limit=2", { session })).body.items).toHaveLength(2)
    expect((await h.request(`/webhooks/${a}/deliveries?limit=1`, { session })).body.items).toHaveLength(1)
    for (const limit of ["0", "101", "x"]) {
      const answer = await h.request(`/webhooks/deliveries?limit=${limit}`, { session })
      expectProblem(answer, 422, "validation_failed")
      expect(answer.body.error.fields).toHaveProperty(["limit"])
    }
  })

  it("redeliver: 404 for a stranger's delivery, 202 keeping the event id", async () => {
    const { webhook } = await created()
    const queued = (await h.request(`/webhooks/${webhook.id}/test`, { method: "POST", token })).body.delivery
    const stranger = await h.signup({ plan: "pro" })
    expectProblem(await h.request(`/webhooks/deliveries/${queued.id}/redeliver`, { method: "POST", session: stranger }), 404, "not_found")
    const answer = await h.request(`/webhooks/deliveries/${queued.id}/redeliver`, { method: "POST", token })
    expect(answer.status, answer.text).toBe(202)
    expect(expectShape(WebhookDeliveryQueued, answer.body).delivery).toMatchObject({ id: queued.id, eventId: queued.eventId, cycleAttemptCount: 0 })
  })

  it("redeliver answers 410 once the payload is past 30 days", async () => {
    const { webhook } = await created()
    const queued = (await h.request(`/webhooks/${webhook.id}/test`, { method: "POST", token })).body.delivery
    h.clock.advance("31 days")
    try {
      expectProblem(await h.request(`/webhooks/deliveries/${queued.id}/redeliver`, { method: "POST", token }), 410, "payload_expired")
    } finally {
      h.clock.advance("-31 days")
    }
  })
})

describe("GET /.well-known/service-webhooks.json", () => {
  it("publishes the current Ed25519 key with kid, alg, raw 32-byte publicKey, status and createdAt", async () => {
    const answer = await h.request("/.well-known/service-webhooks.json")
    expect(answer.status).toBe(200)
    expect(answer.headers.get("content-type")).toContain("application/json")
    const keySet = expectShape(WebhookKeySet, answer.body)
    expect(keySet.keys.filter((k) => k.status === "current")).toHaveLength(1)
    const key = keySet.keys[0]!
    expect(key).toMatchObject({ alg: "Ed25519", status: "current" })
    expect(key.kid).toMatch(/^bbx_[0-9a-f]{16}$/)
    expect(Buffer.from(key.publicKey, "base64")).toHaveLength(32)
    const stored = await h.query("SELECT private_key_encrypted FROM webhook_signing_keys")
    expect(stored[0].private_key_encrypted).toMatch(/^v1\./)
  })

  it("`burnbox admin keys rotate` keeps the old key published as previous for at least 7 days", async () => {
    const before = (await h.request("/.well-known/service-webhooks.json")).body.keys[0]
    const result = await h.cli(["admin", "keys", "rotate"])
    expect(result.code, result.stderr + result.stdout).toBe(0)
    expect(result.json.kid).toMatch(/^bbx_/)
    expect(result.json.kid).not.toBe(before.kid)
    const after = expectShape(WebhookKeySet, (await h.request("/.well-known/service-webhooks.json")).body)
    expect(after.keys.map((k) => [k.kid, k.status])).toEqual([[result.json.kid, "current"], [before.kid, "previous"]])
  })
})
