/**
 * A guest's `total` of its shared mailboxes is read from counters, not by counting their mail
 * (issue #31: alias_counts, migration 0025, less the guest's own archive marks on them). Each of
 * the counters' inputs changes here in turn (the guest archives and unarchives, the owner trashes,
 * restores and destroys, mail arrives, a share ends, the alias burns), and after each the guest's
 * totals of the mailbox, the archive and the trash equal the messages the list walks and a plain
 * count in SQL, and alias_counts equals its mailboxes' messages counted.
 */
import { claimAlias, deliver, type Harness, type Session, shareMailbox, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let guest: Session
let owner: Session
let guestAlias: number
let a1: number
let a2: number
let a2Share: number

/** Every page of the guest's list (limit 2), following nextCursor: the ids and each page's total. */
const walk = async (query: string) => {
  const ids: Array<number> = []
  const totals = new Set<number>()
  let cursor: string | null = null
  for (let page = 0; page < 50; page++) {
    const answer = await h.request(`/messages?limit=2${query}${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`, { session: guest })
    expect(answer.status, answer.text).toBe(200)
    ids.push(...(answer.body.items as Array<{ id: number }>).map((m) => m.id))
    totals.add(answer.body.total as number)
    cursor = answer.body.nextCursor as string | null
    if (cursor === null) return { count: ids.length, totals: [...totals] }
  }
  throw new Error("more than 50 pages")
}

/** The guest's view counted in SQL: its own mail and the live shares' mailboxes, in or out of the trash, by its own archive mark. */
const plainCount = async (view: "mailbox" | "archive" | "trash") => {
  const [row] = await h.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM messages m
     WHERE (m.account_id = $1 OR m.alias_id IN (SELECT alias_id FROM shares WHERE guest_id = $1 AND status = 'active' AND suspended_at IS NULL))
       AND (m.trashed_at IS NOT NULL) = $2
       AND ($2 OR EXISTS (SELECT 1 FROM message_states s WHERE s.message_id = m.id AND s.account_id = $1 AND s.archived) = $3)`,
    [guest.accountId, view === "trash", view === "archive"]
  )
  return row!.n
}

/** The guest's three totals equal its lists walked and counted plainly; alias_counts equals the mail of each mailbox. */
const expectTotalsExact = async (step: string, expected: { mailbox: number; archive: number; trash: number }) => {
  for (const [view, query] of [["mailbox", ""], ["archive", "&archived=true"], ["trash", "&trashed=true"]] as const) {
    const walked = await walk(query)
    expect(walked, `${step}: ${view}`).toEqual({ count: expected[view], totals: [expected[view]] })
    expect(await plainCount(view), `${step}: ${view} counted in SQL`).toBe(expected[view])
  }
  await h.worker.foldCounts()
  const drift = await h.query(
    `SELECT c.alias_id, c.in_mailbox, c.trashed, m.in_mailbox AS counted_in_mailbox, m.trashed AS counted_trashed
     FROM alias_counts c FULL JOIN (
       SELECT alias_id, count(*) FILTER (WHERE trashed_at IS NULL)::int AS in_mailbox, count(*) FILTER (WHERE trashed_at IS NOT NULL)::int AS trashed
       FROM messages GROUP BY alias_id) m ON m.alias_id = c.alias_id
     WHERE coalesce(c.in_mailbox, 0) <> coalesce(m.in_mailbox, 0) OR coalesce(c.trashed, 0) <> coalesce(m.trashed, 0)`
  )
  expect(drift, `${step}: alias_counts`).toEqual([])
}

const patch = async (who: Session, id: number, body: object) =>
  expect((await h.request(`/messages/${id}`, { method: "PATCH", session: who, body })).status).toBe(200)

beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 3132 })
  ;[guest, owner] = await Promise.all([h.signup({ plan: "pro" }), h.signup({ plan: "pro" })])
  guestAlias = (await claimAlias(h, { session: guest })).id
  a1 = (await claimAlias(h, { session: owner })).id
  a2 = (await claimAlias(h, { session: owner })).id
  await shareMailbox(h, { session: owner }, { session: guest }, { aliasId: a1, email: guest.email, role: "viewer" })
  a2Share = await shareMailbox(h, { session: owner }, { session: guest }, { aliasId: a2, email: guest.email, role: "collaborator" })
})
afterAll(() => h.close())

describe("a guest's totals of its shared mailboxes, kept by counters", () => {
  it("stay exact as the guest's marks, the owner's trash, new mail and the shares change", async () => {
    const own = await deliver(h, { session: guest }, guestAlias, 2)
    const first = await deliver(h, { session: owner }, a1, 3)
    const second = await deliver(h, { session: owner }, a2, 2)
    await expectTotalsExact("mail arrived", { mailbox: 7, archive: 0, trash: 0 })

    // The guest archives a shared message and one of its own; the owner archives another (not the guest's mark).
    await patch(guest, first[0]!, { archived: true })
    await patch(guest, own[0]!, { archived: true })
    await patch(owner, first[1]!, { archived: true })
    await expectTotalsExact("guest archived", { mailbox: 5, archive: 2, trash: 0 })

    // The owner trashes the message the guest archived and another: an archive mark in the trash is not subtracted twice.
    for (const id of [first[0]!, second[0]!]) expect((await h.request(`/messages/${id}`, { method: "DELETE", session: owner })).status).toBe(204)
    await expectTotalsExact("owner trashed", { mailbox: 4, archive: 1, trash: 2 })

    // The owner restores the archived one: it is in the guest's archive again.
    expect((await h.request(`/messages/${first[0]!}/restore`, { method: "POST", session: owner })).status).toBe(204)
    await expectTotalsExact("owner restored", { mailbox: 4, archive: 2, trash: 1 })

    // The guest unarchives it; the guest (a collaborator on a2) destroys the trashed one for good.
    await patch(guest, first[0]!, { archived: false })
    expect((await h.request(`/messages/${second[0]!}?permanent=1`, { method: "DELETE", session: guest })).status).toBe(204)
    await expectTotalsExact("guest unarchived, trash destroyed", { mailbox: 5, archive: 1, trash: 0 })

    // Mail arrives in a shared mailbox, and in one the guest is no guest of.
    const other = (await claimAlias(h, { session: owner })).id
    await deliver(h, { session: owner }, a2, 2)
    await deliver(h, { session: owner }, other, 1)
    await expectTotalsExact("mail arrived again", { mailbox: 7, archive: 1, trash: 0 })

    // The guest archives a message of a2, then the owner ends that share: neither its mail nor the mark counts.
    await patch(guest, second[1]!, { archived: true })
    await expectTotalsExact("guest archived on a2", { mailbox: 6, archive: 2, trash: 0 })
    expect((await h.request(`/aliases/${a2}/shares/${a2Share}`, { method: "DELETE", session: owner })).status).toBe(204)
    await expectTotalsExact("share of a2 ended", { mailbox: 4, archive: 1, trash: 0 })

    // The owner burns a1: the share ends, and what is left is the guest's own mail.
    expect((await h.request(`/aliases/${a1}/burn`, { method: "POST", session: owner })).status).toBe(200)
    await expectTotalsExact("a1 burned", { mailbox: 1, archive: 1, trash: 0 })
  })
})
