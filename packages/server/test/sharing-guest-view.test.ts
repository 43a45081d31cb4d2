/**
 * A guest's view of a shared mailbox (spec 2.7, 4.5, 5 rule 7; decisions.md "Sharing a mailbox"),
 * through the API with an owner, a viewer, a collaborator and a stranger:
 * - GET /aliases and the bootstrap list the shared alias with role, shared, ownerHandle,
 *   guestCount 0 and the owner's trash, and none of the owner's label, note, storage or timer
 *   state; the owner's alias carries its guestCount;
 * - GET /messages (and search, and wait) include shared mail unless excludeShared=true;
 * - marks and tags are each reader's own; the owner's unread count is the owner's;
 * - a collaborator deletes, restores and empties the trash under the owner's trash mode, a viewer
 *   may not; neither manages the alias;
 * - the owner's email, label and note appear in no answer the guest sees, the guests' emails in
 *   none the owner sees.
 */
import { Alias, MessagePage } from "@burnbox/domain"
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
let owner: Session
let viewer: Session
let collaborator: Session
let stranger: Session
let aliasId: number
let ownerHandle: string
let shared: Array<number>
let viewerOwn: number
const label = "owner-label-5d2e"
const note = "owner-note-8a1b"

const Aliases = Schema.Struct({ items: Schema.Array(Alias) })
const aliasesOf = async (session: Session) => {
  const answer = await h.request("/aliases", { session })
  expect(answer.status, answer.text).toBe(200)
  return { answer, items: expectShape(Aliases, answer.body).items }
}
const ownerSecrets = () => [owner.email, label, note]

beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 3102 })
  ;[owner, viewer, collaborator, stranger] = await Promise.all([h.signup({ plan: "pro" }), h.signup({ plan: "pro" }), h.signup(), h.signup()])
  aliasId = (await claimAlias(h, { session: owner })).id
  expect((await h.request(`/aliases/${aliasId}`, { method: "PATCH", session: owner, body: { label, note } })).status).toBe(200)
  await shareMailbox(h, { session: owner }, { session: viewer }, { aliasId, email: viewer.email, role: "viewer" })
  await shareMailbox(h, { session: owner }, { session: collaborator }, { aliasId, email: collaborator.email, role: "collaborator" })
  ownerHandle = (await h.request("/bootstrap", { session: owner })).body.user.handle
  shared = await deliver(h, { session: owner }, aliasId, 3, { subject: "shared zebra mail", text: "the shared body" })
  const own = await claimAlias(h, { session: viewer })
  viewerOwn = (await deliver(h, { session: viewer }, own.id, 1, { subject: "viewer's own mail" }))[0]!
})
afterAll(() => h.close())

describe("the alias list", () => {
  it("shows the guest the shared alias with its role, ownerHandle, guestCount 0 and the owner's trash; nothing of the owner's", async () => {
    const { answer, items } = await aliasesOf(viewer)
    expectNoneOf(answer, ownerSecrets())
    const alias = items.find((a) => a.id === aliasId)
    expect(alias).toMatchObject({
      role: "viewer",
      shared: true,
      ownerHandle,
      guestCount: 0,
      label: null,
      note: null,
      storageUsedBytes: 0,
      selfDestructAt: null,
      selfDestructSuspended: false,
      expiringNotifiedAt: null,
      pushEnabled: false,
      trash: { enabled: true, retentionDays: 30 }
    })
    expect(alias!.unreadCount).toBe(3)
    expect((await aliasesOf(collaborator)).items.find((a) => a.id === aliasId)?.role).toBe("collaborator")
    expect((await aliasesOf(stranger)).items.some((a) => a.id === aliasId)).toBe(false)
  })

  it("shows the owner its alias with the number of guests, and no guest's email", async () => {
    const { answer, items } = await aliasesOf(owner)
    expectNoneOf(answer, [viewer.email, collaborator.email])
    expect(items.find((a) => a.id === aliasId)).toMatchObject({ role: "owner", shared: false, ownerHandle: null, guestCount: 2, label, note })
  })

  it("is the bootstrap's too", async () => {
    const answer = await h.request("/bootstrap", { session: viewer })
    expectNoneOf(answer, ownerSecrets())
    expect(answer.body.aliases.find((a: { id: number }) => a.id === aliasId)).toMatchObject({ role: "viewer", shared: true, ownerHandle })
  })
})

describe("reading shared mail", () => {
  it("lists it with the guest's own mail, and leaves it out with excludeShared=true", async () => {
    const all = await listIds(h, { session: viewer })
    expect(all.ids.toSorted()).toEqual([...shared, viewerOwn].toSorted())
    expect(all.total).toBe(4)
    const own = await listIds(h, { session: viewer }, "?excludeShared=true")
    expect(own).toEqual({ ids: [viewerOwn], total: 1 })
    expect((await listIds(h, { session: viewer }, `?alias=${aliasId}`)).total).toBe(3)
    const answer = await h.request("/messages", { session: viewer })
    expectShape(MessagePage, answer.body)
    expectNoneOf(answer, ownerSecrets())
    expect(answer.body.items.find((m: { id: number }) => m.id === shared[0]).alias.label).toBeNull()
    // The owner's list is its own mail as before, with its label.
    const ownerList = await h.request("/messages", { session: owner })
    expect(ownerList.body.total).toBe(3)
    expect(ownerList.body.items[0].alias.label).toBe(label)
  })

  it("pages through shared and own mail with cursors", async () => {
    const first = await h.request("/messages?limit=2", { session: viewer })
    const second = await h.request(`/messages?limit=2&cursor=${encodeURIComponent(first.body.nextCursor)}`, { session: viewer })
    expect(second.status, second.text).toBe(200)
    const ids = [...first.body.items, ...second.body.items].map((m: { id: number }) => m.id)
    expect(ids.toSorted()).toEqual([...shared, viewerOwn].toSorted())
    expect(second.body.nextCursor).toBeNull()
  })

  it("finds it by search", async () => {
    expect((await listIds(h, { session: viewer }, "?q=zebra")).total).toBe(3)
    expect((await listIds(h, { session: viewer }, "?q=zebra&excludeShared=true")).total).toBe(0)
    expect((await listIds(h, { session: stranger }, "?q=zebra")).total).toBe(0)
  })

  it("reads a message, its raw bytes; a stranger gets 404", async () => {
    const seen = await detail(h, { session: viewer }, shared[0]!)
    expect(seen.alias.label).toBeNull()
    expect((await h.request(`/messages/${shared[0]}/raw`, { session: viewer })).status).toBe(200)
    expectProblem(await h.request(`/messages/${shared[0]}`, { session: stranger }), 404, "not_found")
    expectProblem(await h.request(`/messages/${shared[0]}/raw`, { session: stranger }), 404, "not_found")
    expectNoneOf(await h.request(`/messages/${shared[0]}`, { session: viewer }), ownerSecrets())
  })

  it("answers a guest's wait when mail arrives in the shared mailbox", async () => {
    const waiting = h.request(`/messages?alias=${aliasId}&q=giraffe&wait=20`, { session: viewer })
    await new Promise((resolve) => setTimeout(resolve, 300))
    const [id] = await deliver(h, { session: owner }, aliasId, 1, { subject: "giraffe arrives" })
    const answer = await waiting
    expect(answer.status, answer.text).toBe(200)
    expect(answer.body.items.map((m: { id: number }) => m.id)).toEqual([id])
    shared.push(id!)
  })
})

describe("each reader's own marks and tags", () => {
  it("keeps the guest's read, starred and pinned marks from the owner, and the owner's from the guest", async () => {
    const id = shared[0]!
    const marked = await h.request(`/messages/${id}`, { method: "PATCH", session: viewer, body: { isRead: true, starred: true, pinned: true } })
    expect(marked.status, marked.text).toBe(200)
    const ownerView = await detail(h, { session: owner }, id)
    expect([ownerView.isRead, ownerView.starred, ownerView.pinned]).toEqual([false, false, false])
    expect((await h.request(`/messages/${id}`, { method: "PATCH", session: owner, body: { archived: true } })).status).toBe(200)
    const guestView = await detail(h, { session: viewer }, id)
    expect([guestView.isRead, guestView.starred, guestView.pinned, guestView.archived]).toEqual([true, true, true, false])
    // The owner's unread count is the owner's; the guest's alias view counts the guest's own.
    expect((await aliasesOf(owner)).items.find((a) => a.id === aliasId)!.unreadCount).toBe(shared.length)
    expect((await aliasesOf(viewer)).items.find((a) => a.id === aliasId)!.unreadCount).toBe(shared.length - 1)
    expect((await listIds(h, { session: viewer }, "?starred=true")).ids).toEqual([id])
    expect((await listIds(h, { session: owner }, "?starred=true")).ids).toEqual([])
    // Archived by the owner only: still in the guest's mailbox, in the owner's archive.
    expect((await listIds(h, { session: viewer }, `?alias=${aliasId}`)).ids).toContain(id)
    expect((await listIds(h, { session: owner }, "?archived=true")).ids).toEqual([id])
    expect((await h.request(`/messages/${id}`, { method: "PATCH", session: owner, body: { archived: false } })).status).toBe(200)
  })

  it("searches with each reader's own archive: the owner's archiving leaves the guest's search as it was", async () => {
    const id = shared[1]!
    expect((await h.request(`/messages/${id}`, { method: "PATCH", session: owner, body: { archived: true } })).status).toBe(200)
    expect((await listIds(h, { session: viewer }, "?q=zebra")).ids).toContain(id)
    expect((await listIds(h, { session: viewer }, "?q=zebra&archived=true")).ids).toEqual([])
    expect((await listIds(h, { session: owner }, "?q=zebra&archived=true")).ids).toEqual([id])
    expect((await h.request(`/messages/${id}`, { method: "PATCH", session: viewer, body: { archived: true } })).status).toBe(200)
    expect((await listIds(h, { session: viewer }, "?q=zebra&archived=true")).ids).toEqual([id])
    expect((await listIds(h, { session: viewer }, "?q=zebra")).ids).not.toContain(id)
    for (const session of [owner, viewer]) expect((await h.request(`/messages/${id}`, { method: "PATCH", session, body: { archived: false } })).status).toBe(200)
  })

  it("caps a guest's pins by the guest's own plan (free: 3), whatever the owner's", async () => {
    const pins = shared.slice(0, 4)
    for (const id of pins.slice(0, 3)) {
      expect((await h.request(`/messages/${id}`, { method: "PATCH", session: collaborator, body: { pinned: true } })).status).toBe(200)
    }
    const fourth = await h.request(`/messages/${pins[3]}`, { method: "PATCH", session: collaborator, body: { pinned: true } })
    expectProblem(fourth, 409, "max_pinned_reached")
    expect(fourth.body.error.message).toContain("3")
    // The owner's pins are the owner's: none of the collaborator's shows.
    expect((await listIds(h, { session: owner }, "?pinned=true")).ids).toEqual([])
    for (const id of pins.slice(0, 3)) {
      expect((await h.request(`/messages/${id}`, { method: "PATCH", session: collaborator, body: { pinned: false } })).status).toBe(200)
    }
  })

  it("tags with the guest's own tags, seen and counted by the guest only", async () => {
    const tag = await h.request("/tags", { method: "POST", session: viewer, body: { name: "from-shared" } })
    expect(tag.status, tag.text).toBe(201)
    const id = shared[1]!
    const tagged = await h.request(`/messages/${id}`, { method: "PATCH", session: viewer, body: { tagIds: [tag.body.id] } })
    expect(tagged.status, tagged.text).toBe(200)
    expect((await detail(h, { session: viewer }, id)).tags.map((t) => t.name)).toEqual(["from-shared"])
    expect((await detail(h, { session: owner }, id)).tags).toEqual([])
    const tags = await h.request("/tags", { session: viewer })
    expect(tags.body.items.find((t: { id: number }) => t.id === tag.body.id).messageCount).toBe(1)
    expect((await listIds(h, { session: viewer }, `?tag=${tag.body.id}`)).ids).toEqual([id])
    // The owner's tags are not the guest's to use.
    const ownerTag = await h.request("/tags", { method: "POST", session: owner, body: { name: "owner-only" } })
    expectProblem(await h.request(`/messages/${id}`, { method: "PATCH", session: viewer, body: { tagIds: [ownerTag.body.id] } }), 422, "validation_failed")
  })
})

describe("roles", () => {
  it("refuses a viewer's delete, restore and empty trash as not found, and changes nothing", async () => {
    const id = shared[2]!
    expectProblem(await h.request(`/messages/${id}`, { method: "DELETE", session: viewer }), 404, "not_found")
    expectProblem(await h.request(`/messages/${id}/restore`, { method: "POST", session: viewer }), 404, "not_found")
    expectProblem(await h.request(`/messages/trash/empty?alias=${aliasId}`, { method: "POST", session: viewer }), 404, "not_found")
    const bulk = await h.request("/messages/bulk", { method: "POST", session: viewer, body: { ids: [id], action: "delete" } })
    expectProblem(bulk, 404, "not_found")
    expect((await detail(h, { session: owner }, id)).trashed).toBe(false)
  })

  it("lets a collaborator delete to the owner's trash, restore, and empty the trash", async () => {
    const id = shared[2]!
    const deleted = await h.request(`/messages/${id}`, { method: "DELETE", session: collaborator })
    expect(deleted.status, deleted.text).toBe(204)
    // The owner's plan (pro) has a trash, whatever the collaborator's (free) has.
    const trashed = await detail(h, { session: owner }, id)
    expect(trashed.trashed).toBe(true)
    expect(trashed.trashPurgeAt).not.toBeNull()
    expect((await listIds(h, { session: owner }, "?trashed=true")).ids).toEqual([id])
    expect((await listIds(h, { session: collaborator }, "?trashed=true")).ids).toEqual([id])
    expect((await h.request(`/messages/${id}/restore`, { method: "POST", session: collaborator })).status).toBe(204)
    expect((await detail(h, { session: owner }, id)).trashed).toBe(false)
    expect((await h.request(`/messages/${id}`, { method: "DELETE", session: collaborator })).status).toBe(204)
    const emptied = await h.request(`/messages/trash/empty?alias=${aliasId}`, { method: "POST", session: collaborator })
    expect(emptied.status, emptied.text).toBe(200)
    expect(emptied.body).toEqual({ deleted: 1, remaining: 0 })
    expectProblem(await h.request(`/messages/${id}`, { session: owner }), 404, "not_found")
    shared.splice(2, 1)
  })

  it("lets neither guest manage the alias: label, note, pause, burn, timer and shares are the owner's (404)", async () => {
    for (const guest of [viewer, collaborator]) {
      expectProblem(await h.request(`/aliases/${aliasId}`, { method: "PATCH", session: guest, body: { label: "mine now" } }), 404, "not_found")
      expectProblem(await h.request(`/aliases/${aliasId}/pause`, { method: "POST", session: guest }), 404, "not_found")
      expectProblem(await h.request(`/aliases/${aliasId}/burn`, { method: "POST", session: guest }), 404, "not_found")
      expectProblem(await h.request(`/aliases/${aliasId}`, { method: "DELETE", session: guest }), 404, "not_found")
      expectProblem(await h.request(`/aliases/${aliasId}/timer`, { method: "DELETE", session: guest }), 404, "not_found")
      expectProblem(await h.request(`/aliases/${aliasId}/shares`, { session: guest }), 404, "not_found")
    }
    expect((await aliasesOf(owner)).items.find((a) => a.id === aliasId)).toMatchObject({ status: "active", label })
  })
})

describe("when the share ends", () => {
  it("answers the former guest exactly as a stranger", async () => {
    const guest = await h.signup()
    const shareId = await shareMailbox(h, { session: owner }, { session: guest }, { aliasId, email: guest.email, role: "viewer" })
    expect((await detail(h, { session: guest }, shared[0]!)).id).toBe(shared[0])
    expect((await h.request(`/aliases/${aliasId}/shares/${shareId}`, { method: "DELETE", session: owner })).status).toBe(204)
    const former = await h.request(`/messages/${shared[0]}`, { session: guest })
    const strangers = await h.request(`/messages/${shared[0]}`, { session: stranger })
    expectProblem(former, 404, "not_found")
    expect(former.body).toEqual(strangers.body)
    expect((await listIds(h, { session: guest })).total).toBe(0)
    expect((await aliasesOf(guest)).items).toEqual([])
  })

  it("reaches nothing while only invited", async () => {
    const guest = await h.signup()
    const invited = await h.request(`/aliases/${aliasId}/shares`, { method: "POST", session: owner, body: { email: guest.email, role: "viewer" } })
    expect(invited.status).toBe(201)
    expectProblem(await h.request(`/messages/${shared[0]}`, { session: guest }), 404, "not_found")
    expect((await listIds(h, { session: guest })).total).toBe(0)
  })
})
