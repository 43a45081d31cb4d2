/**
 * How a share starts (decisions.md, "Sharing a mailbox"): the owner invites an existing account
 * by email with a role (Session + CSRF or bearer manage-aliases), the invited account lists its
 * invitations and accepts or declines; the owner lists, changes and ends shares. An unknown email
 * answers exactly as a mailbox the caller does not own; 409 for a second share with one account
 * and past five guests; 403 plan_required below premium. Handles (`word-word-NNNN`) are given the
 * first time an account takes part and are all the other side sees: no email, label or note.
 */
import { HandlePattern, Share, ShareInvitation } from "@burnbox/domain"
import { type Caller, claimAlias, expectNoneOf, expectProblem, expectShape, type Harness, type Session, startHarness } from "@burnbox/testkit"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let owner: Session
let guest: Session
let other: Session
let aliasId: number
const label = "owner-private-label-7c1"
const note = "owner-private-note-9f3"

beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 3101 })
  ;[owner, guest, other] = await Promise.all([h.signup({ plan: "pro" }), h.signup(), h.signup()])
  aliasId = (await claimAlias(h, { session: owner })).id
  const labelled = await h.request(`/aliases/${aliasId}`, { method: "PATCH", session: owner, body: { label, note } })
  expect(labelled.status, labelled.text).toBe(200)
})
afterAll(() => h.close())

const invite = (body: unknown, who: Caller = { session: owner }, id = aliasId) =>
  h.request(`/aliases/${id}/shares`, { method: "POST", ...who, body })
const sharesOf = async (id = aliasId, who: Caller = { session: owner }) => {
  const answer = await h.request(`/aliases/${id}/shares`, { ...who })
  expect(answer.status, answer.text).toBe(200)
  return expectShape(Schema.Struct({ items: Schema.Array(Share) }), answer.body).items
}
const invitationsOf = async (who: Caller) => {
  const answer = await h.request("/shares/invitations", { ...who })
  expect(answer.status, answer.text).toBe(200)
  return expectShape(Schema.Struct({ items: Schema.Array(ShareInvitation) }), answer.body).items
}
const handleOf = async (session: Session) => (await h.request("/bootstrap", { session })).body.user.handle as string | null

describe("an invitation", () => {
  let shareId: number

  it("is created for an existing account by email: 201 Share, pending, with the guest's handle and nothing else of it", async () => {
    expect(await handleOf(guest)).toBeNull()
    const answer = await invite({ email: guest.email, role: "viewer" })
    expect(answer.status, answer.text).toBe(201)
    const share = expectShape(Share, answer.body)
    expect(share).toMatchObject({ role: "viewer", status: "pending", acceptedAt: null })
    expect(share.guestHandle).toMatch(HandlePattern)
    expectNoneOf(answer, [guest.email])
    shareId = share.id
    // Both sides now take part in sharing: each has a handle, shown in its cookie bootstrap.
    expect(await handleOf(guest)).toBe(share.guestHandle)
    const ownerHandle = await handleOf(owner)
    expect(ownerHandle).toMatch(HandlePattern)
    expect(ownerHandle).not.toBe(share.guestHandle)
  })

  it("is listed to the invited account with the alias address, the owner's handle and the role; never the owner's email, label or note", async () => {
    const answer = await h.request("/shares/invitations", { session: guest })
    expectNoneOf(answer, [owner.email, label, note])
    const items = await invitationsOf({ session: guest })
    expect(items).toHaveLength(1)
    expect(items[0]).toMatchObject({ id: shareId, ownerHandle: await handleOf(owner), role: "viewer" })
    expect(items[0]!.aliasAddress).toMatch(/@burnbox\.test$/)
    expect(await invitationsOf({ session: other })).toEqual([])
  })

  it("is a 409 a second time for the same account, and for the owner itself", async () => {
    expectProblem(await invite({ email: guest.email, role: "collaborator" }), 409, "already_shared")
    expectProblem(await invite({ email: guest.email.toUpperCase(), role: "viewer" }), 409, "already_shared")
    expectProblem(await invite({ email: owner.email, role: "viewer" }), 409, "already_shared")
  })

  it("answers an unknown email exactly as a mailbox the caller does not own", async () => {
    const unknown = await invite({ email: "nobody-here@example.com", role: "viewer" })
    const stranger = await invite({ email: guest.email, role: "viewer" }, { session: other })
    const missing = await invite({ email: guest.email, role: "viewer" }, { session: owner }, 999_999)
    expectProblem(unknown, 404, "not_found")
    expect(stranger.status).toBe(404)
    expect(stranger.body).toEqual(unknown.body)
    expect(missing.body).toEqual(unknown.body)
  })

  it("validates its body: 422 for an unknown role, an invalid email, extra fields", async () => {
    expectProblem(await invite({ email: guest.email, role: "owner" }), 422, "validation_failed")
    expectProblem(await invite({ email: "not-an-email", role: "viewer" }), 422, "validation_failed")
    expectProblem(await invite({ email: guest.email, role: "viewer", note: "x" }), 422, "validation_failed")
  })

  it("is accepted by the invited account only: 204, then the owner sees the share active with acceptedAt", async () => {
    expectProblem(await h.request(`/shares/invitations/${shareId}/accept`, { method: "POST", session: other }), 404, "not_found")
    const accepted = await h.request(`/shares/invitations/${shareId}/accept`, { method: "POST", session: guest })
    expect(accepted.status, accepted.text).toBe(204)
    const [share] = await sharesOf()
    expect(share).toMatchObject({ id: shareId, status: "active" })
    expect(share!.acceptedAt).not.toBeNull()
    expect(await invitationsOf({ session: guest })).toEqual([])
    // Accepted once; a second answer finds no pending invitation.
    expectProblem(await h.request(`/shares/invitations/${shareId}/accept`, { method: "POST", session: guest }), 404, "not_found")
    expectProblem(await h.request(`/shares/invitations/${shareId}/decline`, { method: "POST", session: guest }), 404, "not_found")
  })

  it("changes role by the owner only (PATCH), 404 for a stranger and for an unknown share", async () => {
    const changed = await h.request(`/aliases/${aliasId}/shares/${shareId}`, { method: "PATCH", session: owner, body: { role: "collaborator" } })
    expect(changed.status, changed.text).toBe(200)
    expect(expectShape(Share, changed.body)).toMatchObject({ id: shareId, role: "collaborator", status: "active" })
    expectProblem(await h.request(`/aliases/${aliasId}/shares/${shareId}`, { method: "PATCH", session: other, body: { role: "viewer" } }), 404, "not_found")
    expectProblem(await h.request(`/aliases/${aliasId}/shares/${shareId}`, { method: "PATCH", session: guest, body: { role: "viewer" } }), 404, "not_found")
    expectProblem(await h.request(`/aliases/${aliasId}/shares/999999`, { method: "PATCH", session: owner, body: { role: "viewer" } }), 404, "not_found")
    expectProblem(await h.request(`/aliases/${aliasId}/shares/${shareId}`, { method: "PATCH", session: owner, body: { role: "owner" } }), 422, "validation_failed")
  })

  it("lists the shares to the owner only", async () => {
    expectProblem(await h.request(`/aliases/${aliasId}/shares`, { session: other }), 404, "not_found")
    expectProblem(await h.request(`/aliases/${aliasId}/shares`, { session: guest }), 404, "not_found")
    const answer = await h.request(`/aliases/${aliasId}/shares`, { session: owner })
    expectNoneOf(answer, [guest.email])
  })

  it("is ended by the owner (DELETE, 204): gone from the list; a second DELETE is 404; it can be offered again", async () => {
    expectProblem(await h.request(`/aliases/${aliasId}/shares/${shareId}`, { method: "DELETE", session: guest }), 404, "not_found")
    const ended = await h.request(`/aliases/${aliasId}/shares/${shareId}`, { method: "DELETE", session: owner })
    expect(ended.status, ended.text).toBe(204)
    expect(await sharesOf()).toEqual([])
    expectProblem(await h.request(`/aliases/${aliasId}/shares/${shareId}`, { method: "DELETE", session: owner }), 404, "not_found")
    const again = await invite({ email: guest.email, role: "viewer" })
    expect(again.status, again.text).toBe(201)
    // The handle is the account's for good.
    expect(again.body.guestHandle).toBe(await handleOf(guest))
    expect(again.body.id).not.toBe(shareId)
  })
})

describe("declining", () => {
  it("ends the invitation (204); the owner no longer lists it and may invite again", async () => {
    const alias = await claimAlias(h, { session: owner })
    const offered = await invite({ email: other.email, role: "viewer" }, { session: owner }, alias.id)
    expect(offered.status, offered.text).toBe(201)
    const declined = await h.request(`/shares/invitations/${offered.body.id}/decline`, { method: "POST", session: other })
    expect(declined.status, declined.text).toBe(204)
    expect(await sharesOf(alias.id)).toEqual([])
    expect(await invitationsOf({ session: other })).toEqual([])
    expect((await invite({ email: other.email, role: "viewer" }, { session: owner }, alias.id)).status).toBe(201)
  })
})

describe("limits and plans", () => {
  it("allows five guests per mailbox, invited or accepted; a sixth is 409 guest_limit_reached", async () => {
    const alias = await claimAlias(h, { session: owner })
    const guests = await Promise.all(Array.from({ length: 6 }, () => h.signup()))
    for (const g of guests.slice(0, 5)) expect((await invite({ email: g.email, role: "viewer" }, { session: owner }, alias.id)).status).toBe(201)
    expectProblem(await invite({ email: guests[5]!.email, role: "viewer" }, { session: owner }, alias.id), 409, "guest_limit_reached")
    // Ending one makes room.
    const [first] = await sharesOf(alias.id)
    expect((await h.request(`/aliases/${alias.id}/shares/${first!.id}`, { method: "DELETE", session: owner })).status).toBe(204)
    expect((await invite({ email: guests[5]!.email, role: "viewer" }, { session: owner }, alias.id)).status).toBe(201)
  })

  it("needs a premium or pro owner: 403 plan_required on free, for a known and an unknown email alike", async () => {
    const free = await h.signup({ plan: "free" })
    const alias = await claimAlias(h, { session: free })
    const known = await invite({ email: guest.email, role: "viewer" }, { session: free }, alias.id)
    expectProblem(known, 403, "plan_required")
    expect(known.body.error.message).toContain("shared mailboxes")
    const unknown = await invite({ email: "nobody-either@example.com", role: "viewer" }, { session: free }, alias.id)
    expect(unknown.body).toEqual(known.body)
    await h.setPlan(free.accountId, "premium")
    expect((await invite({ email: guest.email, role: "viewer" }, { session: free }, alias.id)).status).toBe(201)
  })
})

describe("access", () => {
  it("takes a bearer token with manage-aliases; read alone is 403 insufficient_scope", async () => {
    const alias = await claimAlias(h, { session: owner })
    const manage = await h.createToken(owner, ["manage-aliases"], "sharing")
    const read = await h.createToken(owner, ["read"], "reading")
    expectProblem(await invite({ email: guest.email, role: "viewer" }, { token: read }, alias.id), 403, "insufficient_scope")
    const answer = await invite({ email: guest.email, role: "viewer" }, { token: manage }, alias.id)
    expect(answer.status, answer.text).toBe(201)
    expect((await sharesOf(alias.id, { token: manage })).map((s) => s.id)).toEqual([answer.body.id])
  })

  it("refuses a session without its CSRF token", async () => {
    const alias = await claimAlias(h, { session: owner })
    const answer = await h.request(`/aliases/${alias.id}/shares`, { method: "POST", session: owner, withoutCsrf: true, body: { email: guest.email, role: "viewer" } })
    expect(answer.status).toBe(403)
    expect((await sharesOf(alias.id)).length).toBe(0)
  })

  it("keeps every handle given out, also when its account goes, so none is given twice", async () => {
    const alias = await claimAlias(h, { session: owner })
    const gone = await h.signup()
    const answer = await invite({ email: gone.email, role: "viewer" }, { session: owner }, alias.id)
    expect(answer.status, answer.text).toBe(201)
    await h.query("DELETE FROM accounts WHERE id = $1", [gone.accountId])
    const kept = await h.query("SELECT 1 FROM issued_handles WHERE handle = $1", [answer.body.guestHandle])
    expect(kept).toHaveLength(1)
    // The shares of a gone account went with it.
    expect(await sharesOf(alias.id)).toEqual([])
  })

  it("gives every account its own handle, never another's", async () => {
    const handles = await Promise.all([owner, guest, other].map(handleOf))
    for (const handle of handles) expect(handle).toMatch(HandlePattern)
    expect(new Set(handles).size).toBe(3)
    const issued = await h.query<{ n: number }>("SELECT count(*)::int AS n FROM issued_handles")
    expect(issued[0]!.n).toBeGreaterThanOrEqual(3)
  })
})
