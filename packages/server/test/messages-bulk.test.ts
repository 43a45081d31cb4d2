/**
 * POST /messages/bulk (spec 2.14, 3.2, 4.5, 8): Session only; ids 1..100, unique; all thirteen
 * actions with BulkMessageResult counting only real changes; outcomes one per id for delete,
 * delete_forever and restore, saying where each message is now; a tag action needs a valid
 * tagId (422); ids the caller cannot see are 404 and nothing changes; maxPinned is 409.
 */
import { BulkMessageResult } from "@burnbox/domain"
import { claimAlias, deliver, detail, expectProblem, expectShape, type Harness, type Session, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let owner: Session
let stranger: Session
let aliasId: number
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 7301 })
  ;[owner, stranger] = await Promise.all([h.signup({ plan: "pro" }), h.signup({ plan: "pro" })])
  aliasId = (await claimAlias(h, { session: owner })).id
})
afterAll(() => h.close())

const bulk = async (body: unknown, session: Session = owner) => h.request("/messages/bulk", { method: "POST", session, body })
const ok = async (body: unknown, session: Session = owner) => {
  const answer = await bulk(body, session)
  expect(answer.status, answer.text).toBe(200)
  return expectShape(BulkMessageResult, answer.body)
}
const counts = (result: typeof BulkMessageResult.Type) => {
  const { outcomes: _, ...rest } = result
  return rest
}
const zero = { updated: 0, deleted: 0, trashed: 0, restored: 0 }

describe("state actions count only real changes, and have no outcomes", () => {
  const pairs = [
    ["mark_read", "mark_unread", "isRead"],
    ["star", "unstar", "starred"],
    ["pin", "unpin", "pinned"],
    ["archive", "unarchive", "archived"]
  ] as const
  for (const [on, off, field] of pairs) {
    it(`${on} then ${off}, each repeated as a no-op`, async () => {
      const ids = await deliver(h, { session: owner }, aliasId, 3)
      // One of the three is already in the requested state.
      expect((await h.request(`/messages/${ids[0]}`, { method: "PATCH", session: owner, body: { [field]: true } })).status).toBe(200)
      const first = await ok({ ids, action: on })
      expect(first).toEqual({ ...zero, updated: 2, outcomes: [] })
      for (const id of ids) expect((await detail(h, { session: owner }, id))[field]).toBe(true)
      expect(await ok({ ids, action: on })).toEqual({ ...zero, outcomes: [] })
      expect(await ok({ ids: [ids[0]!], action: off })).toEqual({ ...zero, updated: 1, outcomes: [] })
      expect(await ok({ ids, action: off })).toEqual({ ...zero, updated: 2, outcomes: [] })
      expect(await ok({ ids, action: off })).toEqual({ ...zero, outcomes: [] })
      for (const id of ids) expect((await detail(h, { session: owner }, id))[field]).toBe(false)
    })
  }

  it("mark_read and mark_unread keep unread the inverse of isRead and the alias's unreadCount in step", async () => {
    const session = await h.signup({ plan: "pro" })
    const alias = await claimAlias(h, { session })
    const ids = await deliver(h, { session }, alias.id, 4)
    const unreadCount = async () => (await h.request("/aliases", { session })).body.items.find((a: { id: number }) => a.id === alias.id).unreadCount
    expect(await unreadCount()).toBe(4)
    await ok({ ids: ids.slice(0, 3), action: "mark_read" }, session)
    expect(await unreadCount()).toBe(1)
    expect((await detail(h, { session }, ids[0]!)).unread).toBe(false)
    await ok({ ids, action: "mark_unread" }, session)
    expect(await unreadCount()).toBe(4)
  })

  it("add_tag and remove_tag count messages that gained or lost the tag", async () => {
    const ids = await deliver(h, { session: owner }, aliasId, 3)
    const tag = (await h.request("/tags", { method: "POST", session: owner, body: { name: "bulk" } })).body.id
    expect(await ok({ ids: [ids[0]!], action: "add_tag", tagId: tag })).toEqual({ ...zero, updated: 1, outcomes: [] })
    expect(await ok({ ids, action: "add_tag", tagId: tag })).toEqual({ ...zero, updated: 2, outcomes: [] })
    expect(await ok({ ids, action: "add_tag", tagId: tag })).toEqual({ ...zero, outcomes: [] })
    expect((await detail(h, { session: owner }, ids[2]!)).tags.map((t) => t.id)).toEqual([tag])
    expect(await ok({ ids: ids.slice(1), action: "remove_tag", tagId: tag })).toEqual({ ...zero, updated: 2, outcomes: [] })
    expect(await ok({ ids, action: "remove_tag", tagId: tag })).toEqual({ ...zero, updated: 1, outcomes: [] })
    expect(await ok({ ids, action: "remove_tag", tagId: tag })).toEqual({ ...zero, outcomes: [] })
  })

  it("pin past maxPinned is 409 and pins nothing", async () => {
    const session = await h.signup({ plan: "pro" })
    const alias = await claimAlias(h, { session })
    await h.query(`UPDATE accounts SET overrides = '{"maxPinned": 2}'::jsonb WHERE id = $1`, [session.accountId])
    const ids = await deliver(h, { session }, alias.id, 3)
    expectProblem(await bulk({ ids, action: "pin" }, session), 409, "max_pinned_reached")
    for (const id of ids) expect((await detail(h, { session }, id)).pinned).toBe(false)
    expect(counts(await ok({ ids: ids.slice(0, 2), action: "pin" }, session))).toEqual({ ...zero, updated: 2 })
  })
})

describe("delete, delete_forever and restore answer one outcome per id", () => {
  it("delete on a plan with a trash: trashed outcomes with their purge date; a repeat keeps the date it had", async () => {
    const ids = await deliver(h, { session: owner }, aliasId, 2)
    const first = await ok({ ids: [ids[0]!], action: "delete" })
    const purgeAt = (await detail(h, { session: owner }, ids[0]!)).trashPurgeAt
    expect(purgeAt).not.toBeNull()
    expect(first).toEqual({ ...zero, deleted: 1, trashed: 1, outcomes: [{ id: ids[0], outcome: "trashed", trashPurgeAt: purgeAt }] })
    h.clock.advance("3 hours")
    const second = await ok({ ids: [ids[1]!, ids[0]!], action: "delete" })
    const otherPurge = (await detail(h, { session: owner }, ids[1]!)).trashPurgeAt
    expect(second).toEqual({
      ...zero,
      deleted: 1,
      trashed: 1,
      outcomes: [
        { id: ids[1], outcome: "trashed", trashPurgeAt: otherPurge },
        { id: ids[0], outcome: "trashed", trashPurgeAt: purgeAt }
      ]
    })
    expect(await ok({ ids, action: "delete" })).toEqual({
      ...zero,
      outcomes: [{ id: ids[0], outcome: "trashed", trashPurgeAt: purgeAt }, { id: ids[1], outcome: "trashed", trashPurgeAt: otherPurge }]
    })
  })

  it("restore: restored outcomes for every id; only those in the trash are counted", async () => {
    const ids = await deliver(h, { session: owner }, aliasId, 3)
    await ok({ ids: ids.slice(0, 2), action: "delete" })
    const result = await ok({ ids, action: "restore" })
    expect(result).toEqual({ ...zero, restored: 2, outcomes: ids.map((id) => ({ id, outcome: "restored", trashPurgeAt: null })) })
    for (const id of ids) expect((await detail(h, { session: owner }, id)).trashed).toBe(false)
    const restoredEvents = await h.query("SELECT data->>'message_id' AS id FROM events WHERE type = 'message.restored' AND account_id = $1", [owner.accountId])
    expect(restoredEvents.map((e) => Number(e.id)).filter((id) => ids.includes(id)).sort()).toEqual(ids.slice(0, 2).sort())
    expect(await ok({ ids, action: "restore" })).toEqual({ ...zero, outcomes: ids.map((id) => ({ id, outcome: "restored", trashPurgeAt: null })) })
  })

  it("delete_forever destroys from the mailbox and the trash; trashed stays zero", async () => {
    const ids = await deliver(h, { session: owner }, aliasId, 2)
    await ok({ ids: [ids[0]!], action: "delete" })
    const result = await ok({ ids, action: "delete_forever" })
    expect(result).toEqual({ ...zero, deleted: 2, outcomes: ids.map((id) => ({ id, outcome: "deleted", trashPurgeAt: null })) })
    for (const id of ids) expect((await h.request(`/messages/${id}`, { session: owner })).status).toBe(404)
    // Destroyed ids are gone: asking again is 404.
    expectProblem(await bulk({ ids, action: "delete_forever" }), 404, "not_found")
  })

  it("delete on a plan without a trash destroys: deleted outcomes, trashed zero", async () => {
    const session = await h.signup({ plan: "pro" })
    const alias = await claimAlias(h, { session })
    const ids = await deliver(h, { session }, alias.id, 2)
    await h.setPlan(session.accountId, "free")
    expect(await ok({ ids, action: "delete" }, session)).toEqual({
      ...zero,
      deleted: 2,
      outcomes: ids.map((id) => ({ id, outcome: "deleted", trashPurgeAt: null }))
    })
    const left = await h.query("SELECT count(*)::int AS n FROM messages WHERE account_id = $1", [session.accountId])
    expect(left[0].n).toBe(0)
    await h.worker.foldCounts()
    const aliasRow = await h.query("SELECT storage_used_bytes, unread_count FROM aliases WHERE id = $1", [alias.id])
    expect(aliasRow[0]).toEqual({ storage_used_bytes: "0", unread_count: 0 })
  })
})

describe("refusals", () => {
  it("refuses a bearer token with 403 session_required", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId)
    const token = await h.createToken(owner, ["read", "delete", "manage-aliases"])
    expectProblem(await h.request("/messages/bulk", { method: "POST", token, body: { ids: [id], action: "mark_read" } }), 403, "session_required")
  })

  it("answers 404 and changes nothing when any id is not the caller's", async () => {
    const ids = await deliver(h, { session: owner }, aliasId, 2)
    const strangerAlias = await claimAlias(h, { session: stranger })
    const [theirs] = await deliver(h, { session: stranger }, strangerAlias.id)
    for (const action of ["mark_read", "delete", "delete_forever", "star"]) {
      expectProblem(await bulk({ ids: [...ids, theirs], action }), 404, "not_found")
      expectProblem(await bulk({ ids: [...ids, 999_999], action }), 404, "not_found")
    }
    for (const id of ids) expect(await detail(h, { session: owner }, id)).toMatchObject({ isRead: false, starred: false, trashed: false })
    expect((await detail(h, { session: stranger }, theirs!)).trashed).toBe(false)
  })

  it("a tag action without a tagId, or with a tag that is not the caller's, is 422 and changes nothing", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId)
    const theirs = (await h.request("/tags", { method: "POST", session: stranger, body: { name: "theirs" } })).body.id
    for (const action of ["add_tag", "remove_tag"]) {
      const missing = await bulk({ ids: [id], action })
      expectProblem(missing, 422, "validation_failed")
      expect(missing.body.error.fields).toEqual({ tagId: "required" })
      for (const tagId of [theirs, 999_999]) {
        const wrong = await bulk({ ids: [id], action, tagId })
        expectProblem(wrong, 422, "validation_failed")
        expect(wrong.body.error.fields).toEqual({ tagId: "unknown_tag" })
      }
    }
    expect((await detail(h, { session: owner }, id!)).tags).toEqual([])
  })

  const invalid: ReadonlyArray<readonly [string, unknown, string]> = [
    ["no ids", { ids: [], action: "star" }, "ids"],
    ["101 ids", { ids: Array.from({ length: 101 }, (_, i) => i + 1), action: "star" }, "ids"],
    ["repeated ids", { ids: [1, 1], action: "star" }, "ids"],
    ["an id of 0", { ids: [0], action: "star" }, "ids.0"],
    ["an unknown action", { ids: [1], action: "explode" }, "action"],
    ["a missing action", { ids: [1] }, "action"],
    ["an unknown field", { ids: [1], action: "star", extra: true }, "extra"]
  ]
  for (const [what, body, field] of invalid) {
    it(`refuses ${what} with 422 naming ${field}`, async () => {
      const answer = await bulk(body)
      expectProblem(answer, 422, "validation_failed")
      expect(Object.keys(answer.body.error.fields)).toContain(field)
    })
  }

  it("takes 100 ids at once", async () => {
    const ids = await deliver(h, { session: owner }, aliasId, 2)
    const fake = Array.from({ length: 98 }, (_, i) => 900_000 + i)
    // 100 ids pass validation; unknown ones make it a 404, proving the list was read whole.
    expectProblem(await bulk({ ids: [...ids, ...fake], action: "star" }), 404, "not_found")
    expect(counts(await ok({ ids, action: "star" }))).toEqual({ ...zero, updated: 2 })
  })
})
