/**
 * Retention (spec 2.10 expiresAt, 2.19 and 4.8: test mail expires after seven days; decisions.md
 * Plans table: retentionDays free 3, premium 30, pro 90): expiresAt is receipt plus the owner's
 * retention, and once the clock has passed it the purge deletes the message, its raw bytes and
 * attachments, and corrects the alias and account storage counters.
 */
import { Alias } from "@burnbox/domain"
import { claimAlias, expectProblem, expectShape, type Harness, type Session, SmtpClient, startHarness } from "@burnbox/testkit"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 7701 })
})
afterAll(() => h.close())

// ---------------------------------------------------------------------------------------------
// A raw SMTP client


const deliver = async (to: string, raw: Uint8Array) => {
  const data = await SmtpClient.sendOne(h.smtpPort, to, raw)
  expect(data.code, data.text).toBe(250)
}

const AliasList = Schema.Struct({ items: Schema.Array(Alias) })
const dayMs = 86_400_000

/** A fresh session at the current clock (sessions last 30 days; the clock moves further here). */
const login = async (email: string): Promise<Session> => {
  const answer = await h.request<{ id: number }>("/auth/login", { method: "POST", body: { email, password: "correct horse battery" } })
  expect(answer.status, answer.text).toBe(200)
  const cookie = /service_session=([^;]+)/.exec(answer.headers.get("set-cookie") ?? "")![1]!
  return { cookie, csrf: "", accountId: answer.body.id, email }
}

const messageWithAttachment = (to: string, subject: string) =>
  Buffer.from(
    `From: shop@example.org\r\nTo: ${to}\r\nSubject: ${subject}\r\nMIME-Version: 1.0\r\n` +
      `Content-Type: multipart/mixed; boundary="b"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nReceipt 12345678\r\n` +
      `--b\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename="r.pdf"\r\nContent-Transfer-Encoding: base64\r\n\r\n` +
      `${Buffer.from("%PDF-1.4 receipt").toString("base64")}\r\n--b--\r\n`
  )

const onlyMessageOf = async (aliasId: number) => {
  const rows = await h.query<{ id: number; size_bytes: number; received_at: Date; expires_at: Date }>(
    "SELECT id, size_bytes, received_at, expires_at FROM messages WHERE alias_id = $1 ORDER BY id",
    [aliasId]
  )
  expect(rows).toHaveLength(1)
  return rows[0]!
}

const settled = async (id: number, who: { session: Session } | { token: string }) => {
  const deadline = Date.now() + 15_000
  for (;;) {
    const answer = await h.request(`/messages/${id}`, who)
    expect(answer.status, answer.text).toBe(200)
    if (answer.body.processingStatus === "processed" || answer.body.processingStatus === "failed") return answer.body
    if (Date.now() > deadline) throw new Error(`message ${id} still ${answer.body.processingStatus}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

const exists = async (id: number) => ({
  message: (await h.query("SELECT 1 FROM messages WHERE id = $1", [id])).length,
  raw: (await h.query("SELECT 1 FROM message_raw WHERE message_id = $1", [id])).length,
  attachments: (await h.query("SELECT 1 FROM attachments WHERE message_id = $1", [id])).length
})

const counters = async (aliasId: number, accountId: number) => {
  await h.worker.foldCounts()
  const [alias] = await h.query<{ received_count: number; unread_count: number; storage_used_bytes: string }>(
    "SELECT received_count, unread_count, storage_used_bytes FROM aliases WHERE id = $1",
    [aliasId]
  )
  const [account] = await h.query<{ storage_used_bytes: string }>("SELECT storage_used_bytes FROM accounts WHERE id = $1", [accountId])
  return {
    received: alias!.received_count,
    unread: alias!.unread_count,
    aliasBytes: Number(alias!.storage_used_bytes),
    accountBytes: Number(account!.storage_used_bytes)
  }
}

describe("retention by plan, and the purge", () => {
  let t0: Date
  const accounts = {} as Record<"free" | "premium" | "pro", { session: Session; alias: typeof Alias.Type; id: number; size: number }>
  let proToken: string
  let testMessage: { id: number; size: number }

  beforeAll(async () => {
    h.clock.advance("1 hour")
    t0 = h.clock.now()
    for (const plan of ["free", "premium", "pro"] as const) {
      const session = await h.signup({ plan })
      const alias = await claimAlias(h, { session })
      const raw = messageWithAttachment(alias.address, `${plan} receipt`)
      await deliver(alias.address, raw)
      const row = await onlyMessageOf(alias.id)
      expect(row.size_bytes).toBe(raw.byteLength)
      accounts[plan] = { session, alias, id: row.id, size: row.size_bytes }
      await settled(row.id, { session })
    }
    proToken = await h.createToken(accounts.pro.session, ["read", "manage-aliases", "test"])
    const injected = await h.request("/test/messages", {
      method: "POST",
      token: proToken,
      body: { aliasId: accounts.pro.alias.id, from: "qa@example.org", subject: "fixture", text: "code 424242" }
    })
    expect(injected.status, injected.text).toBe(202)
    await settled(injected.body.id, { token: proToken })
    const [row] = await h.query<{ size_bytes: number }>("SELECT size_bytes FROM messages WHERE id = $1", [injected.body.id])
    testMessage = { id: injected.body.id, size: row!.size_bytes }
  })

  it("sets expiresAt to receipt plus the owner's retentionDays (free 3, premium 30, pro 90) and test mail to seven days", async () => {
    for (const [plan, days] of [["free", 3], ["premium", 30], ["pro", 90]] as const) {
      const { session, id } = accounts[plan]
      const detail = await h.request(`/messages/${id}`, { session })
      expect(detail.body.receivedAt, plan).toBe(t0.toISOString())
      expect(detail.body.expiresAt, plan).toBe(new Date(t0.getTime() + days * dayMs).toISOString())
    }
    const test = await h.request(`/messages/${testMessage.id}`, { token: proToken })
    expect(test.body.expiresAt).toBe(new Date(t0.getTime() + 7 * dayMs).toISOString())
    expect(await counters(accounts.pro.alias.id, accounts.pro.session.accountId)).toEqual({
      received: 2,
      unread: 2,
      aliasBytes: accounts.pro.size + testMessage.size,
      accountBytes: accounts.pro.size + testMessage.size
    })
  })

  it("keeps every message until its expiresAt has passed", async () => {
    h.clock.set(t0.getTime() + 3 * dayMs - 1000)
    expect(await h.worker.purgeExpired()).toBe(0)
    expect(await exists(accounts.free.id)).toEqual({ message: 1, raw: 1, attachments: 1 })
  })

  it("after a free message's three days, the purge deletes it with its bytes and attachments and corrects the counters", async () => {
    h.clock.set(t0.getTime() + 3 * dayMs + 1000)
    expect(await h.worker.purgeExpired()).toBe(1)
    const { session, alias, id } = accounts.free
    expect(await exists(id)).toEqual({ message: 0, raw: 0, attachments: 0 })
    expect(await counters(alias.id, session.accountId)).toEqual({ received: 1, unread: 0, aliasBytes: 0, accountBytes: 0 })
    expectProblem(await h.request(`/messages/${id}`, { session }), 404, "not_found")
    expectProblem(await h.request(`/messages/${id}/raw`, { session }), 404, "not_found")
    const listed = expectShape(AliasList, (await h.request("/aliases", { session })).body).items.find((a) => a.id === alias.id)
    expect(listed).toMatchObject({ storageUsedBytes: 0, unreadCount: 0, receivedCount: 1 })
    expect((await h.request("/me", { session })).body.storageUsedBytes).toBe(0)
    // The others are still there.
    for (const id of [accounts.premium.id, accounts.pro.id, testMessage.id]) expect((await exists(id)).message).toBe(1)
  })

  it("after seven days the test message goes, and only its size leaves the pro account's storage", async () => {
    h.clock.set(t0.getTime() + 7 * dayMs + 1000)
    expect(await h.worker.purgeExpired()).toBe(1)
    expect(await exists(testMessage.id)).toEqual({ message: 0, raw: 0, attachments: 0 })
    expect(await counters(accounts.pro.alias.id, accounts.pro.session.accountId)).toEqual({
      received: 2,
      unread: 1,
      aliasBytes: accounts.pro.size,
      accountBytes: accounts.pro.size
    })
    expectProblem(await h.request(`/messages/${testMessage.id}`, { token: proToken }), 404, "not_found")
    expect((await h.request(`/messages/${accounts.pro.id}`, { token: proToken })).status).toBe(200)
  })

  it("after thirty days the premium message goes; after ninety the pro one", async () => {
    h.clock.set(t0.getTime() + 30 * dayMs + 1000)
    expect(await h.worker.purgeExpired()).toBe(1)
    expect((await exists(accounts.premium.id)).message).toBe(0)
    expect(await counters(accounts.premium.alias.id, accounts.premium.session.accountId)).toMatchObject({ aliasBytes: 0, accountBytes: 0, unread: 0 })
    const premium = await login(accounts.premium.session.email)
    expectProblem(await h.request(`/messages/${accounts.premium.id}`, { session: premium }), 404, "not_found")
    expect((await exists(accounts.pro.id)).message).toBe(1)

    h.clock.set(t0.getTime() + 90 * dayMs - 1000)
    expect(await h.worker.purgeExpired()).toBe(0)
    h.clock.set(t0.getTime() + 90 * dayMs + 1000)
    expect(await h.worker.purgeExpired()).toBe(1)
    expect(await exists(accounts.pro.id)).toEqual({ message: 0, raw: 0, attachments: 0 })
    expect(await counters(accounts.pro.alias.id, accounts.pro.session.accountId)).toEqual({ received: 2, unread: 0, aliasBytes: 0, accountBytes: 0 })
    const storage = await h.request("/storage", { token: proToken })
    expect(storage.status, storage.text).toBe(200)
    expect(storage.body.usedBytes).toBe(0)
  })
})
