/**
 * Reader state, PATCH /messages/{id} (spec 2.13, 4.5, 5, 7, 8): a bearer token may change only
 * isRead; a session also starred, pinned, archived and tagIds (at most 50, unique, its own
 * tags); maxPinned is 409; unread is always the inverse of isRead; the alias's unreadCount and
 * the tags' messageCount follow, outside the trash; the weak ETag changes with the state.
 */
import { MessageState, TagWithCount } from "@burnbox/domain"
import { aliasOf, claimAlias, deliver, detail, expectProblem, expectShape, type Harness, listIds, type Session, startHarness } from "@burnbox/testkit"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let owner: Session
let stranger: Session
let readToken: string
let aliasId: number
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 7101 })
  ;[owner, stranger] = await Promise.all([h.signup({ plan: "pro" }), h.signup({ plan: "pro" })])
  readToken = await h.createToken(owner, ["read"])
  aliasId = (await claimAlias(h, { session: owner })).id
})
afterAll(() => h.close())

const patch = (id: number, body: unknown, who: { token: string } | { session: Session } = { session: owner }) =>
  h.request(`/messages/${id}`, { method: "PATCH", ...who, body })

const createTag = async (name: string, session: Session = owner) => {
  const answer = await h.request("/tags", { method: "POST", session, body: { name } })
  expect(answer.status, answer.text).toBe(201)
  return answer.body.id as number
}

const tagCounts = async () => {
  const list = expectShape(Schema.Struct({ items: Schema.Array(TagWithCount) }), (await h.request("/tags", { session: owner })).body)
  return Object.fromEntries(list.items.map((t) => [t.name, t.messageCount]))
}

describe("isRead over a bearer token", () => {
  it("marks read and unread, answering MessageState; unread is the inverse; the alias's unreadCount follows", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId)
    const before = (await aliasOf(h, { session: owner }, aliasId)).unreadCount
    const read = await patch(id!, { isRead: true }, { token: readToken })
    expect(read.status, read.text).toBe(200)
    expect(expectShape(MessageState, read.body)).toEqual({ isRead: true, starred: false, pinned: false, archived: false, tags: [] })
    const seen = await detail(h, { token: readToken }, id!)
    expect([seen.isRead, seen.unread]).toEqual([true, false])
    expect((await aliasOf(h, { session: owner }, aliasId)).unreadCount).toBe(before - 1)
    // Marking read again changes nothing, so the counter does not move twice.
    expect((await patch(id!, { isRead: true }, { token: readToken })).status).toBe(200)
    expect((await aliasOf(h, { session: owner }, aliasId)).unreadCount).toBe(before - 1)
    const unread = await patch(id!, { isRead: false }, { token: readToken })
    expect(unread.body.isRead).toBe(false)
    const again = await detail(h, { token: readToken }, id!)
    expect([again.isRead, again.unread]).toEqual([false, true])
    expect((await aliasOf(h, { session: owner }, aliasId)).unreadCount).toBe(before)
  })

  for (const field of ["starred", "pinned", "archived", "tagIds"] as const) {
    it(`refuses ${field} from a bearer token with 403 session_required_for_field and changes nothing`, async () => {
      const [id] = await deliver(h, { session: owner }, aliasId)
      const value = field === "tagIds" ? [] : true
      const answer = await patch(id!, { isRead: true, [field]: value }, { token: readToken })
      expectProblem(answer, 403, "session_required_for_field")
      expect(answer.body.error.message).toContain(field)
      const seen = await detail(h, { session: owner }, id!)
      expect([seen.isRead, seen.starred, seen.pinned, seen.archived]).toEqual([false, false, false, false])
    })
  }

  it("needs the read scope", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId)
    const deleteOnly = await h.createToken(owner, ["delete"], "delete only")
    const answer = await patch(id!, { isRead: true }, { token: deleteOnly })
    expectProblem(answer, 403, "insufficient_scope")
    expect(answer.headers.get("www-authenticate")).toContain("insufficient_scope")
  })
})

describe("a session's full state", () => {
  it("sets starred, pinned, archived and tags together; the answer is exactly MessageState with tags by name", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId)
    const [zeta, alpha] = [await createTag("zeta"), await createTag("Alpha")]
    const answer = await patch(id!, { isRead: true, starred: true, pinned: true, archived: true, tagIds: [zeta, alpha] })
    expect(answer.status, answer.text).toBe(200)
    expect(expectShape(MessageState, answer.body)).toEqual({
      isRead: true,
      starred: true,
      pinned: true,
      archived: true,
      tags: [{ id: alpha, name: "Alpha", color: null }, { id: zeta, name: "zeta", color: null }]
    })
    const seen = await detail(h, { session: owner }, id!)
    expect(seen.tags.map((t) => t.name)).toEqual(["Alpha", "zeta"])
    // Archived mail leaves the default list and appears under archived=true.
    expect((await listIds(h, { session: owner })).ids).not.toContain(id)
    expect((await listIds(h, { session: owner }, "?archived=true&starred=true&pinned=true")).ids).toContain(id)
    // tagIds replaces the set; an empty list clears it.
    expect((await patch(id!, { tagIds: [zeta] })).body.tags.map((t: { id: number }) => t.id)).toEqual([zeta])
    expect((await patch(id!, { tagIds: [] })).body.tags).toEqual([])
    // An empty patch answers the state unchanged.
    expect((await patch(id!, {})).body).toMatchObject({ isRead: true, starred: true, pinned: true, archived: true, tags: [] })
  })

  it("counts a tag's messages outside the trash only", async () => {
    const tag = await createTag("counted")
    const ids = await deliver(h, { session: owner }, aliasId, 3)
    for (const id of ids) expect((await patch(id, { tagIds: [tag] })).status).toBe(200)
    expect((await tagCounts())["counted"]).toBe(3)
    expect((await h.request(`/messages/${ids[0]}`, { method: "DELETE", session: owner })).status).toBe(204)
    expect((await tagCounts())["counted"]).toBe(2)
    expect((await h.request(`/messages/${ids[0]}/restore`, { method: "POST", session: owner })).status).toBe(204)
    expect((await tagCounts())["counted"]).toBe(3)
  })

  const refusals: ReadonlyArray<readonly [string, () => Promise<unknown>, string]> = [
    ["more than 50 tagIds", async () => ({ tagIds: Array.from({ length: 51 }, (_, i) => i + 1) }), "tagIds"],
    ["a repeated tag id", async () => ({ tagIds: [1, 1] }), "tagIds"],
    ["a tag id of 0", async () => ({ tagIds: [0] }), "tagIds.0"],
    ["a non-boolean flag", async () => ({ starred: "yes" }), "starred"],
    ["an unknown field", async () => ({ isRead: true, colour: "red" }), "colour"]
  ]
  for (const [what, body, field] of refusals) {
    it(`refuses ${what} with 422 naming ${field}`, async () => {
      const [id] = await deliver(h, { session: owner }, aliasId)
      const answer = await patch(id!, await body())
      expectProblem(answer, 422, "validation_failed")
      expect(Object.keys(answer.body.error.fields)).toContain(field)
    })
  }

  it("refuses another account's tag, or one that does not exist, with 422 and changes nothing", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId)
    const mine = await createTag("mine")
    const theirs = await createTag("theirs", stranger)
    for (const tagIds of [[mine, theirs], [mine, 999_999]]) {
      const answer = await patch(id!, { starred: true, tagIds })
      expectProblem(answer, 422, "validation_failed")
      expect(answer.body.error.fields).toEqual({ tagIds: "unknown_tag" })
    }
    const seen = await detail(h, { session: owner }, id!)
    expect([seen.starred, seen.tags]).toEqual([false, []])
  })

  it("answers 409 once the plan's maxPinned is reached, and pins again after an unpin", async () => {
    const session = await h.signup({ plan: "pro" })
    const alias = await claimAlias(h, { session })
    await h.query(`UPDATE accounts SET overrides = '{"maxPinned": 2}'::jsonb WHERE id = $1`, [session.accountId])
    const ids = await deliver(h, { session }, alias.id, 3)
    expect((await patch(ids[0]!, { pinned: true }, { session })).status).toBe(200)
    expect((await patch(ids[1]!, { pinned: true }, { session })).status).toBe(200)
    // Re-pinning a pinned message is not a new pin.
    expect((await patch(ids[1]!, { pinned: true }, { session })).status).toBe(200)
    const refused = await patch(ids[2]!, { pinned: true, starred: true }, { session })
    expectProblem(refused, 409, "max_pinned_reached")
    expect((await detail(h, { session }, ids[2]!)).starred).toBe(false)
    expect((await patch(ids[0]!, { pinned: false }, { session })).status).toBe(200)
    expect((await patch(ids[2]!, { pinned: true }, { session })).status).toBe(200)
  })
})

describe("whose state", () => {
  it("is the reader's own: another account gets 404 and the owner's marks stay as they were", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId)
    expectProblem(await patch(id!, { isRead: true }, { session: stranger }), 404, "not_found")
    expectProblem(await patch(999_999, { isRead: true }), 404, "not_found")
    expect((await detail(h, { session: owner }, id!)).isRead).toBe(false)
    const rows = await h.query("SELECT account_id FROM message_states WHERE message_id = $1", [id])
    expect(rows).toEqual([])
    await patch(id!, { isRead: true, starred: true })
    const after = await h.query("SELECT account_id, is_read, starred FROM message_states WHERE message_id = $1", [id])
    expect(after).toEqual([{ account_id: owner.accountId, is_read: true, starred: true }])
  })

  it("refuses a session PATCH without its CSRF header", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId)
    const answer = await h.request(`/messages/${id}`, { method: "PATCH", session: owner, withoutCsrf: true, body: { isRead: true } })
    expectProblem(answer, 403, "invalid_csrf_token")
  })
})

describe("weak ETags follow the state (spec 7, 304)", () => {
  it("answers 304 for the current tag, and a new tag once the state changed", async () => {
    const [id] = await deliver(h, { session: owner }, aliasId)
    const first = await h.request(`/messages/${id}`, { token: readToken })
    const etag = first.headers.get("etag")!
    expect(etag).toMatch(/^W\/"/)
    const same = await h.request(`/messages/${id}`, { token: readToken, headers: { "if-none-match": etag } })
    expect(same.status).toBe(304)
    expect(same.text).toBe("")
    await patch(id!, { isRead: true }, { token: readToken })
    const changed = await h.request(`/messages/${id}`, { token: readToken, headers: { "if-none-match": etag } })
    expect(changed.status).toBe(200)
    expect(changed.headers.get("etag")).not.toBe(etag)
    expect((await h.request(`/messages/${id}`, { token: readToken, headers: { "if-none-match": changed.headers.get("etag")! } })).status).toBe(304)
  })
})
