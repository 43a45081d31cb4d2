/**
 * `total` of the plain mailbox, the archive and the trash comes from per-account counts kept by
 * triggers (migration 0007; mail arriving as deltas, 0029), not from counting rows (issue 5). Spec 2.12: total describes
 * exactly the filtered set of the page. After every path that changes which view a message is
 * in, the kept counts must equal a real count of the rows, and the API's `total` must equal the
 * total of the same set counted row by row (a no-op narrowing filter forces the counting).
 */
import { BulkMessageResult } from "@burnbox/domain"
import { claimAlias, deliver, expectShape, type Harness, listIds, type Session, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
const dayMs = 86_400_000
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 7401 })
})
afterAll(() => h.close())

interface Counts {
  readonly in_mailbox: number
  readonly archived: number
  readonly trashed: number
}

/** What the rows say: the three views counted from messages and the owner's marks. */
const realCounts = async (accountId: number): Promise<Counts> => {
  const [row] = await h.query<Counts>(
    `SELECT count(*) FILTER (WHERE m.trashed_at IS NULL)::int AS in_mailbox,
            count(*) FILTER (WHERE m.trashed_at IS NULL AND s.archived)::int AS archived,
            count(*) FILTER (WHERE m.trashed_at IS NOT NULL)::int AS trashed
     FROM messages m LEFT JOIN message_states s ON s.message_id = m.id AND s.account_id = m.account_id
     WHERE m.account_id = $1`,
    [accountId]
  )
  return row!
}

/** The kept counts: the mailbox_counts row plus the deltas of mail not folded into it yet (migration 0029). */
const keptCounts = async (accountId: number): Promise<Counts> => {
  const [row] = await h.query<Counts>(
    `SELECT (c.in_mailbox + coalesce((SELECT sum(d.in_mailbox) FROM mail_count_deltas d WHERE d.account_id = c.account_id), 0))::int AS in_mailbox,
            c.archived,
            (c.trashed + coalesce((SELECT sum(d.trashed) FROM mail_count_deltas d WHERE d.account_id = c.account_id), 0))::int AS trashed
     FROM mailbox_counts c WHERE c.account_id = $1`,
    [accountId]
  )
  return row ?? { in_mailbox: 0, archived: 0, trashed: 0 }
}

/** A filter that narrows nothing but makes the service count rows. */
const counting = "dateFrom=1970-01-01T00:00:00Z"

/** The kept counts equal the rows, and each view's total equals its counted total; answers the counts. */
const expectExact = async (session: Session): Promise<Counts> => {
  const real = await realCounts(session.accountId)
  expect(await keptCounts(session.accountId)).toEqual(real)
  for (const [view, expected] of [["", real.in_mailbox - real.archived], ["archived=true", real.archived], ["trashed=true", real.trashed]] as const) {
    const kept = await listIds(h, { session }, `?${view}`)
    const counted = await listIds(h, { session }, `?${view}${view === "" ? "" : "&"}${counting}`)
    expect({ view, total: kept.total }).toEqual({ view, total: expected })
    expect({ view, total: counted.total }).toEqual({ view, total: expected })
  }
  return real
}

const mailbox = async (count: number) => {
  const session = await h.signup({ plan: "pro" })
  const alias = await claimAlias(h, { session })
  const ids = await deliver(h, { session }, alias.id, count)
  return { session, alias, ids }
}

const patch = async (session: Session, id: number, body: Record<string, unknown>) => {
  const answer = await h.request(`/messages/${id}`, { method: "PATCH", session, body })
  expect(answer.status, answer.text).toBe(200)
}
const bulk = async (session: Session, body: Record<string, unknown>) => {
  const answer = await h.request("/messages/bulk", { method: "POST", session, body })
  expect(answer.status, answer.text).toBe(200)
  return expectShape(BulkMessageResult, answer.body)
}
const remove = async (session: Session, id: number, query = "") => {
  const answer = await h.request(`/messages/${id}${query}`, { method: "DELETE", session })
  expect(answer.status, answer.text).toBe(204)
}
const restore = async (session: Session, id: number) => {
  const answer = await h.request(`/messages/${id}/restore`, { method: "POST", session })
  expect(answer.status, answer.text).toBe(204)
}

describe("the kept counts follow every change of view", () => {
  it("arrival: each delivered message counts in the mailbox", async () => {
    const { session } = await mailbox(3)
    expect(await expectExact(session)).toEqual({ in_mailbox: 3, archived: 0, trashed: 0 })
  })

  it("archive and unarchive, one at a time and in bulk, including no-ops", async () => {
    const { session, ids } = await mailbox(4)
    await patch(session, ids[0]!, { archived: true })
    expect(await expectExact(session)).toEqual({ in_mailbox: 4, archived: 1, trashed: 0 })
    await patch(session, ids[0]!, { archived: true })
    await patch(session, ids[1]!, { starred: true })
    expect(await expectExact(session)).toEqual({ in_mailbox: 4, archived: 1, trashed: 0 })
    await bulk(session, { ids, action: "archive" })
    expect(await expectExact(session)).toEqual({ in_mailbox: 4, archived: 4, trashed: 0 })
    await bulk(session, { ids: ids.slice(0, 3), action: "unarchive" })
    expect(await expectExact(session)).toEqual({ in_mailbox: 4, archived: 1, trashed: 0 })
    await patch(session, ids[3]!, { archived: false })
    expect(await expectExact(session)).toEqual({ in_mailbox: 4, archived: 0, trashed: 0 })
  })

  it("trash and restore carry an archived message's mark out of the archive and back", async () => {
    const { session, ids } = await mailbox(3)
    await patch(session, ids[0]!, { archived: true })
    await remove(session, ids[0]!)
    await remove(session, ids[1]!)
    expect(await expectExact(session)).toEqual({ in_mailbox: 1, archived: 0, trashed: 2 })
    // A repeated plain DELETE leaves the trash as it is; archiving in the trash changes no view.
    await remove(session, ids[0]!)
    await patch(session, ids[1]!, { archived: true })
    expect(await expectExact(session)).toEqual({ in_mailbox: 1, archived: 0, trashed: 2 })
    await restore(session, ids[0]!)
    await restore(session, ids[2]!)
    expect(await expectExact(session)).toEqual({ in_mailbox: 2, archived: 1, trashed: 1 })
    expect((await bulk(session, { ids, action: "delete" })).trashed).toBe(2)
    expect(await expectExact(session)).toEqual({ in_mailbox: 0, archived: 0, trashed: 3 })
    expect((await bulk(session, { ids, action: "restore" })).restored).toBe(3)
    expect(await expectExact(session)).toEqual({ in_mailbox: 3, archived: 2, trashed: 0 })
  })

  it("destroying: DELETE ?permanent=1, bulk delete_forever, and trash/empty, archived or not", async () => {
    const { session, ids } = await mailbox(6)
    await bulk(session, { ids: ids.slice(0, 3), action: "archive" })
    await remove(session, ids[0]!, "?permanent=1")
    expect(await expectExact(session)).toEqual({ in_mailbox: 5, archived: 2, trashed: 0 })
    await remove(session, ids[1]!)
    await remove(session, ids[3]!)
    expect(await expectExact(session)).toEqual({ in_mailbox: 3, archived: 1, trashed: 2 })
    await bulk(session, { ids: [ids[1]!, ids[2]!], action: "delete_forever" })
    expect(await expectExact(session)).toEqual({ in_mailbox: 2, archived: 0, trashed: 1 })
    const emptied = await h.request("/messages/trash/empty", { method: "POST", session })
    expect(emptied.body).toEqual({ deleted: 1, remaining: 0 })
    expect(await expectExact(session)).toEqual({ in_mailbox: 2, archived: 0, trashed: 0 })
  })

  it("a plan without a trash destroys on DELETE", async () => {
    const { session, ids } = await mailbox(2)
    await patch(session, ids[0]!, { archived: true })
    await h.setPlan(session.accountId, "free")
    await remove(session, ids[0]!)
    expect(await expectExact(session)).toEqual({ in_mailbox: 1, archived: 0, trashed: 0 })
  })

  it("the retention purge and the purge of the trash", async () => {
    const { session, ids } = await mailbox(3)
    await patch(session, ids[0]!, { archived: true })
    await h.query("UPDATE accounts SET overrides = $1::jsonb WHERE id = $2", [JSON.stringify({ trashRetentionDays: 1 }), session.accountId])
    await remove(session, ids[1]!)
    expect(await expectExact(session)).toEqual({ in_mailbox: 2, archived: 1, trashed: 1 })
    h.clock.advance(2 * dayMs)
    await h.worker.purgeExpired()
    expect(await expectExact(session)).toEqual({ in_mailbox: 2, archived: 1, trashed: 0 })
    // Test mail expires after seven days.
    h.clock.advance(6 * dayMs)
    while ((await h.worker.purgeExpired()) > 0) { /* earlier tests' mail may fall due as well */ }
    expect(await expectExact(session)).toEqual({ in_mailbox: 0, archived: 0, trashed: 0 })
  })

  it("quota eviction at arrival takes the trash first, then the oldest, archived or not", async () => {
    const { session, alias, ids } = await mailbox(3)
    const size = (await h.query<{ size: number }>("SELECT max(size_bytes)::int AS size FROM messages WHERE account_id = $1", [session.accountId]))[0]!.size
    await patch(session, ids[0]!, { archived: true })
    await remove(session, ids[2]!)
    expect(await expectExact(session)).toEqual({ in_mailbox: 2, archived: 1, trashed: 1 })
    // Room for three messages: the fourth evicts the trashed one, the fifth the oldest (archived).
    await h.query("UPDATE accounts SET overrides = $1::jsonb WHERE id = $2", [JSON.stringify({ storageQuotaBytes: 3 * size + 10 }), session.accountId])
    await deliver(h, { session }, alias.id, 1)
    expect(await expectExact(session)).toEqual({ in_mailbox: 3, archived: 1, trashed: 0 })
    await deliver(h, { session }, alias.id, 1)
    expect(await expectExact(session)).toEqual({ in_mailbox: 3, archived: 0, trashed: 0 })
  })

  it("rows removed underneath: a mark deleted while its message stays, an alias deleted with its mail", async () => {
    const { session, alias, ids } = await mailbox(3)
    await bulk(session, { ids: ids.slice(0, 2), action: "archive" })
    await remove(session, ids[2]!)
    await h.query("DELETE FROM message_states WHERE message_id = $1", [ids[0]])
    expect(await expectExact(session)).toEqual({ in_mailbox: 2, archived: 1, trashed: 1 })
    await h.query("DELETE FROM aliases WHERE id = $1", [alias.id])
    expect(await expectExact(session)).toEqual({ in_mailbox: 0, archived: 0, trashed: 0 })
  })

  it("another reader's marks do not count in the owner's archive", async () => {
    const { session, ids } = await mailbox(2)
    const guest = await h.signup({ plan: "pro" })
    await h.query("INSERT INTO message_states (message_id, account_id, archived) VALUES ($1, $2, true)", [ids[0], guest.accountId])
    expect(await expectExact(session)).toEqual({ in_mailbox: 2, archived: 0, trashed: 0 })
    await h.query("UPDATE message_states SET archived = false WHERE account_id = $1", [guest.accountId])
    await h.query("DELETE FROM message_states WHERE account_id = $1", [guest.accountId])
    expect(await expectExact(session)).toEqual({ in_mailbox: 2, archived: 0, trashed: 0 })
  })

  it("an account that never received mail has totals of 0", async () => {
    const session = await h.signup({ plan: "pro" })
    expect(await expectExact(session)).toEqual({ in_mailbox: 0, archived: 0, trashed: 0 })
  })
})
