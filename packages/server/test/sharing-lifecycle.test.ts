/**
 * Every way a share stops, and what the guest is told (spec 2.17, 4.4; decisions.md "Sharing a
 * mailbox"), through the API: the owner's plan drops to free (share_suspended, reversible, and it
 * resumes on upgrade), the owner ends the share or burns the alias (share_ended), the guest leaves
 * (guest_left: its marks and tags on the mailbox deleted), and a re-invitation after leaving. An
 * account with no live share is answered exactly as a stranger.
 */
import { RevokedShareGrant, Share } from "@burnbox/domain"
import {
  claimAlias,
  deliver,
  detail,
  expectNoneOf,
  expectProblem,
  expectShape,
  type Harness,
  listIds,
  type Session,
  shareMailbox,
  startHarness
} from "@burnbox/testkit"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let stranger: Session
const label = "lifecycle-label-3c9"

beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 3103 })
  stranger = await h.signup()
})
afterAll(() => h.close())

/** An owner (pro) with a labelled alias holding one message, shared with a new guest as `role`, accepted. */
const sharedMailbox = async (role: "viewer" | "collaborator" = "viewer") => {
  const [owner, guest] = await Promise.all([h.signup({ plan: "pro" }), h.signup()])
  const aliasId = (await claimAlias(h, { session: owner })).id
  expect((await h.request(`/aliases/${aliasId}`, { method: "PATCH", session: owner, body: { label } })).status).toBe(200)
  const shareId = await shareMailbox(h, { session: owner }, { session: guest }, { aliasId, email: guest.email, role })
  const [messageId] = await deliver(h, { session: owner }, aliasId)
  return { owner, guest, aliasId, shareId, messageId: messageId! }
}

const revokedOf = async (guest: Session) => {
  const answer = await h.request("/share-grants/revoked", { session: guest })
  expect(answer.status, answer.text).toBe(200)
  return { answer, items: expectShape(Schema.Struct({ items: Schema.Array(RevokedShareGrant) }), answer.body).items }
}

/** The whole-mailbox item of spec 2.17: everything but the alias id, reason, reversible and dates is null. */
const mailboxStop = (aliasId: number, reason: string, reversible: boolean) => ({
  aliasId,
  aliasAddress: null,
  ownerHandle: null,
  reason,
  reversible,
  kind: "share",
  webhookId: null,
  apiTokenId: null,
  endpointHost: null,
  revokedBy: null
})

/** The guest reaches nothing of the mailbox: its message answers as a stranger's, its list leaves it out. */
const expectNoAccess = async (guest: Session, aliasId: number, messageId: number) => {
  const guests = await h.request(`/messages/${messageId}`, { session: guest })
  const strangers = await h.request(`/messages/${messageId}`, { session: stranger })
  expectProblem(guests, 404, "not_found")
  expect(guests.body).toEqual(strangers.body)
  expect((await listIds(h, { session: guest })).ids).not.toContain(messageId)
  const aliases = await h.request("/aliases", { session: guest })
  expect(aliases.body.items.some((a: { id: number }) => a.id === aliasId)).toBe(false)
}

describe("the owner's plan", () => {
  it("suspends every share on a downgrade to free (share_suspended, reversible) and resumes them on an upgrade", async () => {
    const { aliasId, guest, messageId, owner, shareId } = await sharedMailbox()
    expect((await detail(h, { session: guest }, messageId)).id).toBe(messageId)
    expect((await revokedOf(guest)).items).toEqual([])

    await h.changePlan(owner.accountId, "free")
    await expectNoAccess(guest, aliasId, messageId)
    const { answer, items } = await revokedOf(guest)
    expectNoneOf(answer, [owner.email, label])
    expect(items).toHaveLength(1)
    expect(items[0]).toMatchObject({ ...mailboxStop(aliasId, "share_suspended", true), revokedAt: null })
    expect(items[0]!.endedAt).not.toBeNull()
    const shares = await h.request(`/aliases/${aliasId}/shares`, { session: owner })
    expect(expectShape(Schema.Struct({ items: Schema.Array(Share) }), shares.body).items).toMatchObject([{ id: shareId, status: "suspended" }])
    // Suspended, the owner cannot invite anyone either.
    expectProblem(await h.request(`/aliases/${aliasId}/shares`, { method: "POST", session: owner, body: { email: stranger.email, role: "viewer" } }), 403, "plan_required")

    await h.changePlan(owner.accountId, "premium")
    expect((await detail(h, { session: guest }, messageId)).id).toBe(messageId)
    expect((await revokedOf(guest)).items).toEqual([])
    expect((await h.request(`/aliases/${aliasId}/shares`, { session: owner })).body.items[0].status).toBe("active")
  })
})

describe("the owner ends it", () => {
  it("by ending the share: share_ended, not reversible", async () => {
    const { aliasId, guest, messageId, owner, shareId } = await sharedMailbox()
    expect((await h.request(`/aliases/${aliasId}/shares/${shareId}`, { method: "DELETE", session: owner })).status).toBe(204)
    await expectNoAccess(guest, aliasId, messageId)
    const [item] = (await revokedOf(guest)).items
    expect(item).toMatchObject(mailboxStop(aliasId, "share_ended", false))
    expect(item!.endedAt).not.toBeNull()
    expect(item!.revokedAt).toBe(item!.endedAt)
  })

  it("by burning the alias: share_ended too, and the owner's shares are over", async () => {
    const { aliasId, guest, messageId, owner } = await sharedMailbox("collaborator")
    expect((await h.request(`/aliases/${aliasId}/burn`, { method: "POST", session: owner })).status).toBe(200)
    await expectNoAccess(guest, aliasId, messageId)
    expect((await revokedOf(guest)).items).toMatchObject([mailboxStop(aliasId, "share_ended", false)])
    expect((await h.request(`/aliases/${aliasId}/shares`, { session: owner })).body.items).toEqual([])
  })
})

describe("the guest leaves", () => {
  it("stops at once (204), deletes the guest's marks and tags on the mailbox, keeps the owner's; guest_left", async () => {
    const { aliasId, guest, messageId, owner } = await sharedMailbox()
    const tag = await h.request("/tags", { method: "POST", session: guest, body: { name: "kept-elsewhere" } })
    expect((await h.request(`/messages/${messageId}`, { method: "PATCH", session: guest, body: { isRead: true, starred: true, tagIds: [tag.body.id] } })).status)
      .toBe(200)
    expect((await h.request(`/messages/${messageId}`, { method: "PATCH", session: owner, body: { starred: true } })).status).toBe(200)

    const left = await h.request(`/aliases/${aliasId}/share`, { method: "DELETE", session: guest })
    expect(left.status, left.text).toBe(204)
    await expectNoAccess(guest, aliasId, messageId)
    const marks = await h.query("SELECT count(*)::int AS n FROM message_states WHERE account_id = $1", [guest.accountId])
    const tags = await h.query("SELECT count(*)::int AS n FROM message_tags WHERE account_id = $1", [guest.accountId])
    expect([marks[0].n, tags[0].n]).toEqual([0, 0])
    // The guest's tag itself is its own and stays; the owner's mark stays.
    expect((await h.request("/tags", { session: guest })).body.items.map((t: { name: string }) => t.name)).toEqual(["kept-elsewhere"])
    expect((await detail(h, { session: owner }, messageId)).starred).toBe(true)
    const [item] = (await revokedOf(guest)).items
    expect(item).toMatchObject(mailboxStop(aliasId, "guest_left", false))
    // The owner sees the guest gone.
    expect((await h.request(`/aliases/${aliasId}/shares`, { session: owner })).body.items).toEqual([])
    expect((await h.request("/aliases", { session: owner })).body.items.find((a: { id: number }) => a.id === aliasId).guestCount).toBe(0)
  })

  it("answers an account with no live share exactly as a stranger: a second leave, the owner, a stranger", async () => {
    const { aliasId, guest, owner } = await sharedMailbox()
    expect((await h.request(`/aliases/${aliasId}/share`, { method: "DELETE", session: guest })).status).toBe(204)
    const again = await h.request(`/aliases/${aliasId}/share`, { method: "DELETE", session: guest })
    const strangers = await h.request(`/aliases/${aliasId}/share`, { method: "DELETE", session: stranger })
    const owners = await h.request(`/aliases/${aliasId}/share`, { method: "DELETE", session: owner })
    const missing = await h.request(`/aliases/999999/share`, { method: "DELETE", session: stranger })
    expectProblem(again, 404, "not_found")
    for (const answer of [strangers, owners, missing]) expect(answer.body).toEqual(again.body)
  })

  it("may be invited again: access returns with fresh marks, and the old stop is no longer reported", async () => {
    const { aliasId, guest, messageId, owner } = await sharedMailbox()
    expect((await h.request(`/messages/${messageId}`, { method: "PATCH", session: guest, body: { isRead: true } })).status).toBe(200)
    expect((await h.request(`/aliases/${aliasId}/share`, { method: "DELETE", session: guest })).status).toBe(204)
    expect((await revokedOf(guest)).items).toHaveLength(1)
    await shareMailbox(h, { session: owner }, { session: guest }, { aliasId, email: guest.email, role: "viewer" })
    const seen = await detail(h, { session: guest }, messageId)
    expect(seen.isRead).toBe(false)
    expect((await revokedOf(guest)).items).toEqual([])
  })

  it("takes a bearer token with manage-aliases; read alone is 403", async () => {
    const { aliasId, guest, messageId } = await sharedMailbox()
    await h.setPlan(guest.accountId, "pro")
    const read = await h.createToken(guest, ["read"], "guest reader")
    const manage = await h.createToken(guest, ["manage-aliases"], "guest manager")
    expect((await h.request(`/messages/${messageId}`, { token: read })).status).toBe(200)
    expect((await h.request("/share-grants/revoked", { token: read })).status).toBe(200)
    expectProblem(await h.request(`/aliases/${aliasId}/share`, { method: "DELETE", token: read }), 403, "insufficient_scope")
    expect((await h.request(`/aliases/${aliasId}/share`, { method: "DELETE", token: manage })).status).toBe(204)
    expectProblem(await h.request(`/messages/${messageId}`, { token: read }), 404, "not_found")
  })
})
