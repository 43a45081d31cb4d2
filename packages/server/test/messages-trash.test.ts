/**
 * The trash (spec 3.2, 4.5 list rules 1-7, 2.15, 6.1; decisions.md Plans, message.restored):
 * DELETE trashes when the mailbox owner's plan has a trash and destroys otherwise; ?permanent=1
 * destroys; a repeated plain DELETE changes nothing; restore brings back pins, tags and marks
 * and writes message.restored; trash/empty destroys at most 1000 per request; the purge takes
 * trashed mail at its trashPurgeAt, pinned or not; destroying gives storage back; deleting
 * writes no event.
 */
import { Alias, EmptyTrashResult, MessageDetail } from "@burnbox/domain"
import { aliasOf, type Caller, claimAlias, deliver, detail, expectProblem, expectShape, type Harness, listIds, type Session, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let owner: Session
let stranger: Session
let deleteToken: string
let readToken: string
let aliasId: number
const dayMs = 86_400_000
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 7201 })
  ;[owner, stranger] = await Promise.all([h.signup({ plan: "pro" }), h.signup({ plan: "pro" })])
  deleteToken = await h.createToken(owner, ["delete"])
  readToken = await h.createToken(owner, ["read"])
  aliasId = (await claimAlias(h, { session: owner })).id
})
afterAll(() => h.close())

const remove = (id: number, query = "", who: Caller = { token: deleteToken }) => h.request(`/messages/${id}${query}`, { method: "DELETE", ...who })
const restore = (id: number, who: Caller = { token: deleteToken }) => h.request(`/messages/${id}/restore`, { method: "POST", ...who })
const emptyTrash = (query = "", who: Caller = { token: deleteToken }) => h.request(`/messages/trash/empty${query}`, { method: "POST", ...who })

const exists = async (id: number) => (await h.query("SELECT 1 FROM messages WHERE id = $1", [id])).length === 1
const rawExists = async (id: number) => (await h.query("SELECT 1 FROM message_raw WHERE message_id = $1", [id])).length === 1
const eventsOf = async (type: string, accountId = owner.accountId) =>
  h.query<{ data: any }>("SELECT data FROM events WHERE account_id = $1 AND type = $2 ORDER BY time, id", [accountId, type])
const allEvents = async (accountId: number) => Number((await h.query("SELECT count(*) AS n FROM events WHERE account_id = $1", [accountId]))[0]!.n)
/** The account's storage row, after the mail counters' deltas are folded into it. */
const accountUsed = async (accountId: number) => {
  await h.worker.foldCounts()
  return Number((await h.query("SELECT storage_used_bytes FROM accounts WHERE id = $1", [accountId]))[0]!.storage_used_bytes)
}

/** A fresh account with one alias on `plan`; mail is injected while Pro (test mail is Pro only). */
const mailbox = async (plan: "free" | "premium" | "pro", count: number, overrides?: Record<string, number>) => {
  const session = await h.signup({ plan: "pro" })
  const alias = await claimAlias(h, { session })
  const ids = await deliver(h, { session }, alias.id, count)
  if (plan !== "pro") await h.setPlan(session.accountId, plan)
  if (overrides !== undefined) await h.query("UPDATE accounts SET overrides = $1::jsonb WHERE id = $2", [JSON.stringify(overrides), session.accountId])
  return { session, alias, ids }
}

describe("DELETE on a plan with a trash (Pro: 30 days)", () => {
  it("answers 204 and trashes: trashedAt now, trashPurgeAt the earlier of expiresAt and now + 30 days", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId)
    const alias = expectShape(Alias, await aliasOf(h, { session: owner }, aliasId))
    expect(alias.trash).toEqual({ enabled: true, retentionDays: 30 })
    h.clock.advance("1 hour")
    const answer = await remove(id!)
    expect(answer.status, answer.text).toBe(204)
    expect(answer.text).toBe("")
    const seen = await detail(h, { session: owner }, id!)
    expect(seen.trashed).toBe(true)
    expect(seen.trashedAt).toBe(new Date(h.clock.now()).toISOString())
    // Test mail expires after seven days, before the 30-day window ends.
    expect(seen.trashPurgeAt).toBe(seen.expiresAt)
  })

  it("ignores a stored override of the wrong kind (the plan's 30 days apply) instead of failing the request", async () => {
    const { session, ids } = await mailbox("pro", 1)
    await h.query("UPDATE accounts SET overrides = $1::jsonb WHERE id = $2", [JSON.stringify({ trashRetentionDays: "2", maxPinned: [3] }), session.accountId])
    const answer = await remove(ids[0]!, "", { session })
    expect(answer.status, answer.text).toBe(204)
    const seen = await detail(h, { session }, ids[0]!)
    expect(seen.trashed).toBe(true)
    expect(seen.trashPurgeAt).toBe(seen.expiresAt)
  })

  it("fixes trashPurgeAt at now + the window when that comes before expiresAt", async () => {
    const { session, ids } = await mailbox("pro", 1, { trashRetentionDays: 2 })
    expect((await aliasOf(h, { session }, (await detail(h, { session }, ids[0]!)).alias.id)).trash).toEqual({ enabled: true, retentionDays: 2 })
    expect((await remove(ids[0]!, "", { session })).status).toBe(204)
    const seen = await detail(h, { session }, ids[0]!)
    expect(seen.trashPurgeAt).toBe(new Date(h.clock.now().getTime() + 2 * dayMs).toISOString())
    expect(Date.parse(seen.trashPurgeAt!)).toBeLessThan(Date.parse(seen.expiresAt))
  })

  it("takes trashed mail out of every list, count and search unless trashed=true (rules 1, 2)", async () => {
    const [keep, gone] = await deliver(h, { session: owner }, aliasId, 2, { subject: "zebracrossing notice" })
    const before = await listIds(h, { session: owner }, `?alias=${aliasId}&q=zebracrossing`)
    expect(before.ids.sort()).toEqual([keep, gone].sort())
    const unreadBefore = (await aliasOf(h, { session: owner }, aliasId)).unreadCount
    expect((await remove(gone!)).status).toBe(204)
    const after = await listIds(h, { session: owner }, `?alias=${aliasId}&q=zebracrossing`)
    expect(after).toEqual({ ids: [keep], total: 1 })
    expect((await listIds(h, { session: owner }, "?unread=true")).ids).not.toContain(gone)
    expect((await aliasOf(h, { session: owner }, aliasId)).unreadCount).toBe(unreadBefore - 1)
    // In the trash, q matches subject and sender; archived does not apply.
    const trash = await listIds(h, { session: owner }, `?trashed=true&q=zebracrossing&archived=true`)
    expect(trash).toEqual({ ids: [gone], total: 1 })
  })

  it("keeps a trashed message in the trash on a repeated plain DELETE, with the same dates (rule 7)", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId)
    expect((await remove(id!)).status).toBe(204)
    const first = await detail(h, { session: owner }, id!)
    h.clock.advance("2 hours")
    expect((await remove(id!)).status).toBe(204)
    expect((await remove(id!, "?permanent=0")).status).toBe(204)
    expect((await remove(id!, "?permanent=false")).status).toBe(204)
    const again = await detail(h, { session: owner }, id!)
    expect([again.trashed, again.trashedAt, again.trashPurgeAt]).toEqual([true, first.trashedAt, first.trashPurgeAt])
  })

  for (const flag of ["1", "true"]) {
    it(`destroys with ?permanent=${flag}, from the mailbox or the trash, giving the storage back`, async () => {
      const { session, alias, ids } = await mailbox("pro", 2)
      const token = await h.createToken(session, ["delete", "read"])
      const size = (await detail(h, { session }, ids[0]!)).sizeBytes
      const used = await accountUsed(session.accountId)
      expect((await remove(ids[0]!, `?permanent=${flag}`, { token })).status).toBe(204)
      expect((await remove(ids[1]!, "", { token })).status).toBe(204)
      expect((await remove(ids[1]!, `?permanent=${flag}`, { token })).status).toBe(204)
      for (const id of ids) {
        expect(await exists(id)).toBe(false)
        expect(await rawExists(id)).toBe(false)
        expectProblem(await h.request(`/messages/${id}`, { token }), 404, "not_found")
      }
      expect(await accountUsed(session.accountId)).toBe(used - 2 * size)
      const after = await aliasOf(h, { session }, alias.id)
      expect([after.storageUsedBytes, after.unreadCount]).toEqual([0, 0])
    })
  }

  it("refuses a permanent value outside 0, 1, true, false with 422", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId)
    const answer = await remove(id!, "?permanent=yes")
    expectProblem(answer, 422, "validation_failed")
    expect(Object.keys(answer.body.error.fields)).toEqual(["permanent"])
    expect(await exists(id!)).toBe(true)
  })
})

describe("DELETE on a plan without a trash (Free)", () => {
  it("destroys at once with 204; the alias says trash disabled; storage and unread counters are corrected", async () => {
    const { session, alias, ids } = await mailbox("free", 2)
    const seenAlias = await aliasOf(h, { session }, alias.id)
    expect(seenAlias.trash).toEqual({ enabled: false, retentionDays: 0 })
    expect(seenAlias.unreadCount).toBe(2)
    const size = (await detail(h, { session }, ids[0]!)).sizeBytes
    expect((await remove(ids[0]!, "", { session })).status).toBe(204)
    expect(await exists(ids[0]!)).toBe(false)
    const after = await aliasOf(h, { session }, alias.id)
    expect([after.unreadCount, after.storageUsedBytes]).toEqual([1, size])
    expect(await accountUsed(session.accountId)).toBe(size)
    expect((await listIds(h, { session }, "?trashed=true")).total).toBe(0)
  })

  it("never destroys on a plain DELETE what an earlier plan put in the trash, nor moves its purge date", async () => {
    const { session, ids } = await mailbox("premium", 1)
    expect((await remove(ids[0]!, "", { session })).status).toBe(204)
    const trashed = await detail(h, { session }, ids[0]!)
    expect(trashed.trashed).toBe(true)
    await h.setPlan(session.accountId, "free")
    expect((await remove(ids[0]!, "", { session })).status).toBe(204)
    const still = await detail(h, { session }, ids[0]!)
    expect([still.trashed, still.trashPurgeAt]).toEqual([true, trashed.trashPurgeAt])
    expect((await remove(ids[0]!, "?permanent=1", { session })).status).toBe(204)
    expect(await exists(ids[0]!)).toBe(false)
  })
})

describe("restore", () => {
  it("brings a trashed message back with its pin, tags and marks; unread counts it again; message.restored is written", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId)
    const tag = (await h.request("/tags", { method: "POST", session: owner, body: { name: "keep" } })).body.id
    const state = await h.request(`/messages/${id}`, { method: "PATCH", session: owner, body: { starred: true, pinned: true, archived: false, tagIds: [tag] } })
    expect(state.status, state.text).toBe(200)
    const unread = (await aliasOf(h, { session: owner }, aliasId)).unreadCount
    expect((await remove(id!)).status).toBe(204)
    expect((await aliasOf(h, { session: owner }, aliasId)).unreadCount).toBe(unread - 1)
    h.clock.advance("1 day")
    const answer = await restore(id!)
    expect(answer.status, answer.text).toBe(204)
    const back = await detail(h, { session: owner }, id!)
    expect(back).toMatchObject({ trashed: false, trashedAt: null, trashPurgeAt: null, isRead: false, starred: true, pinned: true })
    expect(back.tags.map((t) => t.id)).toEqual([tag])
    expect((await aliasOf(h, { session: owner }, aliasId)).unreadCount).toBe(unread)
    expect((await listIds(h, { session: owner }, "?pinned=true")).ids).toContain(id)
    // Findable by full text again (rule 4).
    expect((await listIds(h, { session: owner }, `?q=${encodeURIComponent(back.subject)}`)).ids).toContain(id)
    const events = (await eventsOf("message.restored")).filter((e) => e.data.message_id === id)
    const alias = await aliasOf(h, { session: owner }, aliasId)
    expect(events.map((e) => e.data)).toEqual([{
      alias: { id: aliasId, address: alias.address, label: alias.label },
      message_id: id,
      restored_at: new Date(h.clock.now()).toISOString(),
      url: `${h.baseUrl}/messages/${id}`
    }])
  })

  it("answers 204 for a message not in the trash, changing nothing and writing no event", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId)
    const before = (await eventsOf("message.restored")).length
    const seen = await detail(h, { session: owner }, id!)
    expect((await restore(id!)).status).toBe(204)
    expect(await detail(h, { session: owner }, id!)).toEqual(seen)
    expect((await eventsOf("message.restored")).length).toBe(before)
  })

  it("answers 404 for a stranger's message, a destroyed one and an unknown id", async () => {
    const [id, destroyed] = await deliver(h, { session: owner }, aliasId, 2)
    expect((await remove(id!)).status).toBe(204)
    expect((await remove(destroyed!, "?permanent=1")).status).toBe(204)
    expectProblem(await restore(id!, { session: stranger }), 404, "not_found")
    expectProblem(await restore(destroyed!), 404, "not_found")
    expectProblem(await restore(999_999), 404, "not_found")
    expect((await detail(h, { session: owner }, id!)).trashed).toBe(true)
  })
})

describe("who may delete", () => {
  it("needs the delete scope for DELETE, restore and empty; a stranger gets 404 and nothing changes", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId)
    expectProblem(await remove(id!, "", { token: readToken }), 403, "insufficient_scope")
    expectProblem(await restore(id!, { token: readToken }), 403, "insufficient_scope")
    expectProblem(await emptyTrash("", { token: readToken }), 403, "insufficient_scope")
    expectProblem(await remove(id!, "", { session: stranger }), 404, "not_found")
    expectProblem(await remove(id!, "?permanent=1", { session: stranger }), 404, "not_found")
    expect((await detail(h, { session: owner }, id!)).trashed).toBe(false)
  })

  it("writes no event for trashing or destroying", async () => {
    const { session, ids } = await mailbox("pro", 2)
    const before = await allEvents(session.accountId)
    expect((await remove(ids[0]!, "", { session })).status).toBe(204)
    expect((await remove(ids[1]!, "?permanent=1", { session })).status).toBe(204)
    expect((await remove(ids[0]!, "?permanent=1", { session })).status).toBe(204)
    expect(await allEvents(session.accountId)).toBe(before)
  })
})

describe("POST /messages/trash/empty", () => {
  it("destroys the trash, leaves the mailbox alone and reports {deleted, remaining}", async () => {
    const { session, alias, ids } = await mailbox("pro", 3)
    const size = (await detail(h, { session }, ids[0]!)).sizeBytes
    for (const id of ids.slice(0, 2)) expect((await remove(id, "", { session })).status).toBe(204)
    const answer = await emptyTrash("", { session })
    expect(answer.status, answer.text).toBe(200)
    expect(expectShape(EmptyTrashResult, answer.body)).toEqual({ deleted: 2, remaining: 0 })
    expect(await exists(ids[0]!)).toBe(false)
    expect(await exists(ids[2]!)).toBe(true)
    expect((await aliasOf(h, { session }, alias.id)).storageUsedBytes).toBe(size)
    expect(await accountUsed(session.accountId)).toBe(size)
    expect((await emptyTrash("", { session })).body).toEqual({ deleted: 0, remaining: 0 })
  })

  it("with ?alias= empties that mailbox's trash only; a stranger's alias is 404 and alias=0 is 422", async () => {
    const session = await h.signup({ plan: "pro" })
    const [a, b] = [await claimAlias(h, { session }), await claimAlias(h, { session })]
    const [inA] = await deliver(h, { session }, a.id)
    const [inB] = await deliver(h, { session }, b.id)
    for (const id of [inA!, inB!]) expect((await remove(id, "", { session })).status).toBe(204)
    expect((await emptyTrash(`?alias=${a.id}`, { session })).body).toEqual({ deleted: 1, remaining: 0 })
    expect(await exists(inA!)).toBe(false)
    expect(await exists(inB!)).toBe(true)
    expectProblem(await emptyTrash(`?alias=${aliasId}`, { session }), 404, "not_found")
    expectProblem(await emptyTrash("?alias=0", { session }), 422, "validation_failed")
    expect((await emptyTrash("", { session })).body).toEqual({ deleted: 1, remaining: 0 })
  })

  it("destroys at most 1000 per request; repeat while remaining > 0", async () => {
    const { session, ids } = await mailbox("pro", 1)
    expect((await remove(ids[0]!, "", { session })).status).toBe(204)
    // 1000 more trashed copies, made in SQL: injecting them one by one would take minutes.
    await h.query(`
      INSERT INTO messages (account_id, alias_id, source, recipient, received_at, expires_at, size_bytes, processing_status, trashed_at, trash_purge_at)
      SELECT account_id, alias_id, source, recipient, received_at, expires_at, 0, 'processed', trashed_at, trash_purge_at
      FROM messages, generate_series(1, 1000) WHERE id = $1`, [ids[0]])
    const first = await emptyTrash("", { session })
    expect(first.body).toEqual({ deleted: 1000, remaining: 1 })
    expect((await emptyTrash("", { session })).body).toEqual({ deleted: 1, remaining: 0 })
  })
})

describe("the purge of the trash", () => {
  it("destroys a trashed message once its trashPurgeAt passed, pinned or not, and not before", async () => {
    const { session, alias, ids } = await mailbox("pro", 3, { trashRetentionDays: 2 })
    expect((await h.request(`/messages/${ids[0]}`, { method: "PATCH", session, body: { pinned: true } })).status).toBe(200)
    for (const id of ids.slice(0, 2)) expect((await remove(id, "", { session })).status).toBe(204)
    const purgeAt = (await detail(h, { session }, ids[0]!)).trashPurgeAt!
    // Earlier tests' mail may fall due too; what matters is which of these messages are left.
    h.clock.set(Date.parse(purgeAt) - 1000)
    await h.worker.purgeExpired()
    expect(await exists(ids[0]!)).toBe(true)
    expect(await exists(ids[1]!)).toBe(true)
    h.clock.set(Date.parse(purgeAt))
    expect(await h.worker.purgeExpired()).toBeGreaterThanOrEqual(2)
    expect(await exists(ids[0]!)).toBe(false)
    expect(await exists(ids[1]!)).toBe(false)
    expect(await exists(ids[2]!)).toBe(true)
    const size = (await detail(h, { session }, ids[2]!)).sizeBytes
    expect((await aliasOf(h, { session }, alias.id)).storageUsedBytes).toBe(size)
    expect(await accountUsed(session.accountId)).toBe(size)
  })

  it("keeps the purge date fixed at deletion: a later downgrade does not bring it forward", async () => {
    const { session, ids } = await mailbox("pro", 1, { trashRetentionDays: 5 })
    expect((await remove(ids[0]!, "", { session })).status).toBe(204)
    const purgeAt = (await detail(h, { session }, ids[0]!)).trashPurgeAt!
    await h.query("UPDATE accounts SET overrides = '{}'::jsonb, plan = 'premium' WHERE id = $1", [session.accountId])
    h.clock.set(Date.parse(purgeAt) - 60_000)
    await h.worker.purgeExpired()
    expect(await exists(ids[0]!)).toBe(true)
    expect(expectShape(MessageDetail, (await h.request(`/messages/${ids[0]}`, { session })).body).trashPurgeAt).toBe(purgeAt)
  })
})
