/**
 * A guest's GET /messages through several shares (issue #31's benchmark, bench:sharing): the
 * store reads the guest's own mail and each shared mailbox apart and merges them (Messages.list,
 * ListSplit), and counts `total` as its own mail's (kept in mailbox_counts for the plain view)
 * plus the shared mailboxes'. Checked against the mail as delivered: every page, newest and
 * oldest first, with cursors, holds exactly the next messages in order, and every total is the
 * number of messages the list holds, with the reader's own marks (archive, read) and trash in
 * play; and so for a search (`q`), whose matches are read part by part too.
 */
import { claimAlias, deliver, type Harness, listIds, type Session, shareMailbox, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let guest: Session
let ownerA: Session
let ownerB: Session
/** Every message the guest reads (its own and its 3 shares'), oldest first. */
let all: Array<number>
let own: Array<number>
let sharedAlias: Array<number>

/** Every page of a list, following nextCursor: the ids in order and each page's total. */
const walk = async (query: string, limit: number) => {
  const ids: Array<number> = []
  const totals = new Set<number>()
  let cursor: string | null = null
  for (let page = 0; page < 50; page++) {
    const answer = await h.request(`/messages?limit=${limit}${query}${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`, { session: guest })
    expect(answer.status, answer.text).toBe(200)
    ids.push(...(answer.body.items as Array<{ id: number }>).map((m) => m.id))
    totals.add(answer.body.total as number)
    cursor = answer.body.nextCursor as string | null
    if (cursor === null) return { ids, totals: [...totals] }
  }
  throw new Error("more than 50 pages")
}

/** `ids` newest first: delivered one after another, a later message is newer (received_at, then id). */
const newestFirst = (ids: ReadonlyArray<number>) => ids.toSorted((a, b) => b - a)

beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 3131 })
  ;[guest, ownerA, ownerB] = await Promise.all([h.signup({ plan: "pro" }), h.signup({ plan: "pro" }), h.signup({ plan: "pro" })])
  const guestAlias = (await claimAlias(h, { session: guest })).id
  const a1 = (await claimAlias(h, { session: ownerA })).id
  const a2 = (await claimAlias(h, { session: ownerA })).id
  const b1 = (await claimAlias(h, { session: ownerB })).id
  // Not shared: never in the guest's list.
  const aPrivate = (await claimAlias(h, { session: ownerA })).id
  sharedAlias = [a1, a2, b1]
  await shareMailbox(h, { session: ownerA }, { session: guest }, { aliasId: a1, email: guest.email, role: "viewer" })
  await shareMailbox(h, { session: ownerA }, { session: guest }, { aliasId: a2, email: guest.email, role: "collaborator" })
  await shareMailbox(h, { session: ownerB }, { session: guest }, { aliasId: b1, email: guest.email, role: "collaborator" })
  all = []
  own = []
  // Interleaved: own mail and each mailbox's arrive in turns, so every page mixes them.
  // Every message has the word zebra; rounds 0 and 2 also quagga (the owners' private mail too, never listed).
  for (let round = 0; round < 3; round++) {
    const text = round % 2 === 0 ? "a zebra and a quagga" : "a zebra"
    own.push(...await deliver(h, { session: guest }, guestAlias, 2, { subject: `own ${round}`, text }))
    all.push(...own.slice(-2))
    all.push(...await deliver(h, { session: ownerA }, a1, 1, { subject: `a1 ${round}`, text }))
    await deliver(h, { session: ownerA }, aPrivate, 1, { subject: `private ${round}`, text })
    all.push(...await deliver(h, { session: ownerA }, a2, 2, { subject: `a2 ${round}`, text }))
    all.push(...await deliver(h, { session: ownerB }, b1, 1, { subject: `b1 ${round}`, text }))
  }
})
afterAll(() => h.close())

describe("a guest's list through 3 shares", () => {
  it("merges its own mail and each shared mailbox's in order, page by page, newest and oldest first, with the whole total", async () => {
    for (const limit of [1, 2, 5, 50]) {
      const newest = await walk("", limit)
      expect(newest.ids, `limit ${limit}`).toEqual(newestFirst(all))
      expect(newest.totals).toEqual([all.length])
      const oldest = await walk("&sort=oldest", limit)
      expect(oldest.ids, `limit ${limit}, oldest`).toEqual(newestFirst(all).toReversed())
      expect(oldest.totals).toEqual([all.length])
    }
    expect(await walk("&excludeShared=true", 2)).toEqual({ ids: newestFirst(own), totals: [own.length] })
  })

  it("finds its own and the shared mail by search, page by page, with the whole total", async () => {
    const quagga = all.filter((_, i) => Math.floor(i / 6) % 2 === 0)
    for (const limit of [1, 4, 50]) {
      expect(await walk("&q=zebra", limit), `limit ${limit}`).toEqual({ ids: newestFirst(all), totals: [all.length] })
      expect(await walk("&q=quagga&sort=oldest", limit), `limit ${limit}`).toEqual({ ids: newestFirst(quagga).toReversed(), totals: [quagga.length] })
      expect(await walk("&q=zebra%20quagga", limit), `limit ${limit}`).toEqual({ ids: newestFirst(quagga), totals: [quagga.length] })
    }
    expect(await walk(`&q=quagga&alias=${sharedAlias[2]}`, 1)).toEqual({ ids: newestFirst(quagga.filter((id) => all.indexOf(id) % 6 === 5)), totals: [2] })
    expect(await walk("&q=quagga&excludeShared=true", 1)).toEqual({ ids: newestFirst(quagga.filter((id) => own.includes(id))), totals: [4] })
    expect(await walk("&q=okapi", 5)).toEqual({ ids: [], totals: [0] })
  })

  it("counts with the guest's own marks and trash, narrowed or not", async () => {
    const sharedOne = all.find((id) => !own.includes(id))!
    const ownOne = own[0]!
    // The guest archives one shared message and one of its own; the owner archives another shared one (the guest's view keeps it).
    for (const id of [sharedOne, ownOne]) expect((await h.request(`/messages/${id}`, { method: "PATCH", session: guest, body: { archived: true } })).status).toBe(200)
    const ownerArchived = all.find((id) => !own.includes(id) && id !== sharedOne)!
    const ownerOf = (await listIds(h, { session: ownerA }, "?limit=100")).ids.includes(ownerArchived) ? ownerA : ownerB
    expect((await h.request(`/messages/${ownerArchived}`, { method: "PATCH", session: ownerOf, body: { archived: true } })).status).toBe(200)
    const inMailbox = all.filter((id) => id !== sharedOne && id !== ownOne)
    expect(await walk("", 3)).toEqual({ ids: newestFirst(inMailbox), totals: [inMailbox.length] })
    expect(await walk("&archived=true", 1)).toEqual({ ids: newestFirst([sharedOne, ownOne]), totals: [2] })
    // In a search too: the guest's own mark on its own mail (kept in the index) and on shared mail (its marks).
    expect(await walk("&q=zebra", 2)).toEqual({ ids: newestFirst(inMailbox), totals: [inMailbox.length] })
    expect(await walk("&q=zebra&archived=true", 1)).toEqual({ ids: newestFirst([sharedOne, ownOne]), totals: [2] })

    // Read marks narrow the view: counted, not kept.
    const read = inMailbox.filter((_, i) => i % 3 === 0)
    for (const id of read) expect((await h.request(`/messages/${id}`, { method: "PATCH", session: guest, body: { isRead: true } })).status).toBe(200)
    const unread = inMailbox.filter((id) => !read.includes(id))
    expect(await walk("&unread=true", 2)).toEqual({ ids: newestFirst(unread), totals: [unread.length] })
    expect(await walk(`&alias=${sharedAlias[1]}&unread=false`, 1)).toEqual({
      ids: newestFirst(read.filter((id) => (all.indexOf(id) % 6) >= 3 && (all.indexOf(id) % 6) < 5)),
      totals: [read.filter((id) => (all.indexOf(id) % 6) >= 3 && (all.indexOf(id) % 6) < 5).length]
    })

    // The guest, a collaborator on b1, trashes one of its messages; and one of its own.
    const b1Mail = all.filter((_, i) => i % 6 === 5)
    const trashed = [b1Mail[0]!, own[1]!]
    for (const id of trashed) expect((await h.request(`/messages/${id}`, { method: "DELETE", session: guest })).status).toBe(204)
    const left = inMailbox.filter((id) => !trashed.includes(id))
    expect(await walk("", 4)).toEqual({ ids: newestFirst(left), totals: [left.length] })
    expect(await walk("&trashed=true", 1)).toEqual({ ids: newestFirst(trashed), totals: [2] })
  })
})
