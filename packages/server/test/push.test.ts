/**
 * Browser push (issue #32; spec 2.20, 4.1, 7; decisions.md "Browser push"): settings with the
 * VAPID public key, subscriptions known by their endpoint's hash and refused on private
 * addresses (the webhooks' SSRF rules) unless the test flag allows them, a mailbox's preference
 * (a guest's own), and sending: the testkit's HTTPS Receiver is the push service; the test
 * decrypts what arrives with the subscription's own keys and checks its VAPID JWT; 410 deletes
 * the subscription; the test push is queued (202), never sent in the request, and limited (429);
 * when the queue cannot take it the answer is 503 and nothing is queued.
 */
import { createHash } from "node:crypto"
import {
  type Caller,
  caFileSetting,
  claimAlias,
  decryptPush,
  encryptPushForTest,
  expectProblem,
  type Harness,
  injectMail,
  makeBrowserPushKeys,
  processed,
  type PushSenderHandle,
  type Receiver,
  type Session,
  shareMailbox,
  startHarness,
  startPushSender,
  startReceiver,
  verifyVapid
} from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let strict: Harness
let h: Harness
let receiver: Receiver
let sender: PushSenderHandle
let owner: Session
let who: Caller

beforeAll(async () => {
  receiver = await startReceiver()
  // One database: `strict` has the production rules (no private endpoints), `h` trusts the receiver (loopback, its CA).
  strict = await startHarness({}, undefined, { seed: 4412 })
  h = await startHarness({ ...caFileSetting(receiver) }, strict)
  sender = await startPushSender(h, caFileSetting(receiver))
  owner = await h.signup({ plan: "pro" })
  who = { session: owner }
})
afterAll(async () => {
  await sender.close()
  await h.close()
  await strict.close()
  await receiver.close()
})

const settingsOf = async (session: Session) => {
  const answer = await h.request("/push/settings", { session })
  expect(answer.status, answer.text).toBe(200)
  return answer.body
}
const subscribe = async (harness: Harness, session: Session, endpoint: string, keys = makeBrowserPushKeys(), contentEncoding?: string) =>
  harness.request("/push/subscriptions", {
    method: "POST",
    session,
    body: { endpoint, keys: keys.keys, ...(contentEncoding === undefined ? {} : { contentEncoding }) }
  })
let endpoints = 0
const endpoint = () => `${receiver.url.replace(/\/hook$/, "")}/push/${++endpoints}`

describe("push settings", () => {
  it("answers the VAPID public key, turns push on and dismisses the nudge; bearer tokens are refused", async () => {
    const session = await h.signup()
    const first = await settingsOf(session)
    expect(first).toMatchObject({ enabled: false, nudgeDismissed: false, subscriptions: [] })
    expect(Buffer.from(first.publicKey, "base64url")).toHaveLength(65)
    const on = await h.request("/push/settings", { method: "PUT", session, body: { enabled: true } })
    expect(on.status, on.text).toBe(200)
    expect(on.body.enabled).toBe(true)
    const dismissed = await h.request("/push/nudge", { method: "DELETE", session })
    expect(dismissed.status, dismissed.text).toBe(200)
    expect(dismissed.body).toMatchObject({ enabled: true, nudgeDismissed: true })
    const bootstrap = await h.request("/bootstrap", { session })
    expect(bootstrap.body.push).toEqual(dismissed.body)
    const extra = await h.request("/push/settings", { method: "PUT", session, body: { enabled: true, other: 1 } })
    expect(extra.status).toBe(422)
    const token = await h.createToken(owner, ["read"])
    expect((await h.request("/push/settings", { token })).status).toBe(403)
  })
})

describe("push subscriptions", () => {
  it("are listed by the SHA-256 of their endpoint, never the endpoint; a second one for the same endpoint is 409", async () => {
    const session = await h.signup()
    const url = endpoint()
    const created = await subscribe(h, session, url)
    expect(created.status, created.text).toBe(201)
    expect(created.body).toEqual({ id: expect.any(Number), enabled: true })
    const settings = await h.request("/push/settings", { session })
    expect(settings.body.subscriptions).toEqual([
      { id: created.body.id, endpointHash: createHash("sha256").update(url).digest("hex"), createdAt: expect.any(String), lastSuccessAt: null }
    ])
    expect(settings.text).not.toContain(url)
    expect((await subscribe(h, session, url)).status).toBe(409)
    const removed = await h.request(`/push/subscriptions/${created.body.id}`, { method: "DELETE", session })
    expect(removed.status).toBe(204)
    expect((await h.request(`/push/subscriptions/${created.body.id}`, { method: "DELETE", session })).status).toBe(404)
  })

  it("refuses private and plain-http endpoints under the production rules, and keys that cannot be encrypted for", async () => {
    const session = await strict.signup()
    const loopback = await subscribe(strict, session, endpoint())
    expect(loopback.status, loopback.text).toBe(422)
    expect(Object.keys(loopback.body.error.fields)).toEqual(["endpoint"])
    for (const url of ["https://10.1.2.3/push", "https://[::1]/push", "https://169.254.169.254/latest"]) {
      expect((await subscribe(strict, session, url)).status, url).toBe(422)
    }
    expect((await subscribe(strict, session, "http://push.example.com/x")).status).toBe(422)
    const bad = await strict.request("/push/subscriptions", { method: "POST", session, body: { endpoint: endpoint(), keys: { p256dh: "AAAA", auth: "BBBB" } } })
    expect(bad.status).toBe(422)
  })
})

describe("sending", () => {
  it("a message on an alias with push on reaches the push service encrypted for the subscription, with a valid VAPID JWT and never the body", async () => {
    const alias = await claimAlias(h, who)
    const keys = makeBrowserPushKeys()
    const url = endpoint()
    const created = await subscribe(h, owner, url, keys)
    expect(created.status, created.text).toBe(201)
    // Off by default: the account's push and the mailbox's preference must both be on.
    const quiet = await injectMail(h, who, alias.id, { subject: "before push was on" })
    await processed(h, who, quiet)
    expect(await sender.sendDue()).toEqual([])
    await h.request("/push/settings", { method: "PUT", session: owner, body: { enabled: true } })
    const preference = await h.request(`/push/aliases/${alias.id}`, { method: "PUT", session: owner, body: { enabled: true } })
    expect(preference.status, preference.text).toBe(200)
    expect(preference.body).toMatchObject({ id: alias.id, pushEnabled: true })

    const before = receiver.requests.length
    const id = await injectMail(h, who, alias.id, { from: "Shop <no-reply@shop.example>", subject: "Your code", text: "the secret body; your code is 482913", otp: "482913" })
    await processed(h, who, id)
    expect(await sender.sendDue()).toEqual(["sent"])
    const request = receiver.requests[before]!
    expect(request.path).toBe(new URL(url).pathname)
    expect(request.headers["content-encoding"]).toBe("aes128gcm")
    expect(request.headers["ttl"]).toBe("86400")
    expect(request.headers["urgency"]).toBe("high")
    const publicKey = (await settingsOf(owner)).publicKey as string
    expect(verifyVapid(request, publicKey, new URL(url).origin).sub).toMatch(/^(mailto:|https:)/)
    const payload = JSON.parse(decryptPush(request.body, keys))
    expect(payload).toEqual({ type: "message", messageId: id, alias: alias.address, from: "Shop <no-reply@shop.example>", subject: "Your code", otp: "482913" })
    expect(request.text).not.toContain("secret body")
    // Sent once: nothing is due any more, and the subscription records its success.
    expect(await sender.sendDue()).toEqual([])
    expect((await settingsOf(owner)).subscriptions.find((s: { id: number }) => s.id === created.body.id).lastSuccessAt).not.toBeNull()
    await h.request(`/push/subscriptions/${created.body.id}`, { method: "DELETE", session: owner })
  })

  it("the decryption is RFC 8291's (a round trip with the test's own encryption)", () => {
    const keys = makeBrowserPushKeys()
    expect(decryptPush(encryptPushForTest("hello", keys), keys)).toBe("hello")
    expect(() => decryptPush(encryptPushForTest("hello", keys), makeBrowserPushKeys())).toThrow()
  })

  it("a guest's own preference on a shared mailbox sends to the guest, never the owner's preference", async () => {
    const guest = await h.signup()
    const alias = await claimAlias(h, who)
    await shareMailbox(h, who, { session: guest }, { aliasId: alias.id, email: guest.email, role: "viewer" })
    const keys = makeBrowserPushKeys()
    expect((await subscribe(h, guest, endpoint(), keys)).status).toBe(201)
    await h.request("/push/settings", { method: "PUT", session: guest, body: { enabled: true } })
    const preference = await h.request(`/push/aliases/${alias.id}`, { method: "PUT", session: guest, body: { enabled: true } })
    expect(preference.status, preference.text).toBe(200)
    expect(preference.body).toMatchObject({ id: alias.id, pushEnabled: true, shared: true })
    // The owner's own view of the alias is untouched.
    const ownView = (await h.request("/aliases", { session: owner })).body.items.find((a: { id: number }) => a.id === alias.id)
    expect(ownView.pushEnabled).toBe(false)
    const before = receiver.requests.length
    const id = await injectMail(h, who, alias.id, { subject: "shared" })
    await processed(h, who, id)
    expect(await sender.sendDue()).toEqual(["sent"])
    expect(JSON.parse(decryptPush(receiver.requests[before]!.body, keys)).messageId).toBe(id)
    expect((await h.request(`/push/aliases/999999`, { method: "PUT", session: guest, body: { enabled: true } })).status).toBe(404)
  })

  it("a subscription that asks for aesgcm is sent aesgcm (the older draft's headers)", async () => {
    const session = await h.signup()
    const created = await subscribe(h, session, endpoint(), makeBrowserPushKeys(), "aesgcm")
    expect(created.status, created.text).toBe(201)
    const before = receiver.requests.length
    await h.request(`/push/subscriptions/${created.body.id}/test`, { method: "POST", session })
    expect(await sender.sendDue()).toEqual(["sent"])
    const request = receiver.requests[before]!
    expect(request.headers["content-encoding"]).toBe("aesgcm")
    expect(String(request.headers["encryption"])).toMatch(/^salt=/)
    expect(String(request.headers["crypto-key"])).toMatch(/dh=/)
  })

  it("a subscription its push service answers 410 is deleted", async () => {
    const session = await h.signup()
    const created = await subscribe(h, session, endpoint())
    receiver.reply(() => ({ status: 410 }))
    try {
      expect((await h.request(`/push/subscriptions/${created.body.id}/test`, { method: "POST", session })).status).toBe(202)
      expect(await sender.sendDue()).toEqual(["gone"])
    } finally {
      receiver.reply(() => ({ status: 201 }))
    }
    expect((await settingsOf(session)).subscriptions).toEqual([])
  })

  it("a failed push is retried later, at the backoff's time on the clock", async () => {
    const session = await h.signup()
    const created = await subscribe(h, session, endpoint())
    receiver.reply(() => ({ status: 503 }))
    try {
      await h.request(`/push/subscriptions/${created.body.id}/test`, { method: "POST", session })
      expect(await sender.sendDue()).toEqual(["retry"])
      expect(await sender.sendDue()).toEqual([])
    } finally {
      receiver.reply(() => ({ status: 201 }))
    }
    h.clock.advance("11 seconds")
    expect(await sender.sendDue()).toEqual(["sent"])
  })
})

describe("POST /push/subscriptions/{id}/test", () => {
  it("answers 202 {queued, sent} without sending in the request; 429 once tests are outstanding; 404 for another's subscription", async () => {
    const session = await h.signup()
    const keys = makeBrowserPushKeys()
    const created = await subscribe(h, session, endpoint(), keys)
    const before = receiver.requests.length
    const answer = await h.request(`/push/subscriptions/${created.body.id}/test`, { method: "POST", session })
    expect(answer.status, answer.text).toBe(202)
    expect(answer.body).toEqual({ queued: true, sent: true })
    expect(receiver.requests.length).toBe(before)
    await h.request(`/push/subscriptions/${created.body.id}/test`, { method: "POST", session })
    await h.request(`/push/subscriptions/${created.body.id}/test`, { method: "POST", session })
    const limited = await h.request(`/push/subscriptions/${created.body.id}/test`, { method: "POST", session })
    expect(limited.status, limited.text).toBe(429)
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0)
    expect(await sender.sendDue()).toEqual(["sent", "sent", "sent"])
    expect(JSON.parse(decryptPush(receiver.requests[before]!.body, keys)).type).toBe("test")
    const stranger = await h.signup()
    expect((await h.request(`/push/subscriptions/${created.body.id}/test`, { method: "POST", session: stranger })).status).toBe(404)
    expect((await h.request(`/push/subscriptions/${created.body.id}/test`, { method: "POST", session, withoutCsrf: true })).status).toBe(403)
  })

  it("answers 503 push_queue_unavailable (spec 7's Problem) when the queue refuses the job, queues nothing, and 202 once it takes jobs again", async () => {
    const session = await h.signup()
    const created = await subscribe(h, session, endpoint())
    const queued = async () =>
      (await h.query<{ n: number }>("SELECT count(*)::int AS n FROM push_deliveries WHERE subscription_id = $1", [created.body.id]))[0]!.n
    // The queue is the push_deliveries table: a real database error on its insert (here a trigger
    // that refuses every row) is the failure the queueing transaction meets when it cannot write.
    await h.query(`CREATE FUNCTION push_queue_down() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'push queue unavailable (test)'; END $$`)
    await h.query("CREATE TRIGGER push_queue_down BEFORE INSERT ON push_deliveries FOR EACH ROW EXECUTE FUNCTION push_queue_down()")
    try {
      const refused = await h.request(`/push/subscriptions/${created.body.id}/test`, { method: "POST", session })
      expectProblem(refused, 503, "push_queue_unavailable")
      expect(refused.body.error.message).toBe("The test push could not be queued; retry later.")
      expect(await queued()).toBe(0)
    } finally {
      await h.query("DROP TRIGGER push_queue_down ON push_deliveries")
      await h.query("DROP FUNCTION push_queue_down()")
    }
    const answer = await h.request(`/push/subscriptions/${created.body.id}/test`, { method: "POST", session })
    expect(answer.status, answer.text).toBe(202)
    expect(await queued()).toBe(1)
    expect(await sender.sendDue()).toEqual(["sent"])
  })
})
