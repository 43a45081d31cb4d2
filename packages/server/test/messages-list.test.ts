/**
 * GET /messages filters (spec 4.5) and their `total` (2.12: exactly the filtered set of the
 * page): each reader-state filter, the `is:` terms of `q`, alias, domain, tag, hasAttachment and
 * full-text terms, alone and combined, newest first, and a cursor walk whose pages add up to the
 * total with no duplicate and no gap.
 */
import { claimAlias, deliver, type Harness, listIds, type Session, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let session: Session
/** ids by role, each delivered in this order (so newest first is the reverse) */
let m: Record<"plain" | "read" | "starred" | "pinned" | "archived" | "tagged" | "attached" | "other", number>
let aliasId: number
let otherAliasId: number
let tagId: number
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 7501 })
  session = await h.signup({ plan: "pro" })
  aliasId = (await claimAlias(h, { session })).id
  otherAliasId = (await claimAlias(h, { session })).id
  const one = async (subject: string, extra: Record<string, unknown> = {}, alias = aliasId) =>
    (await deliver(h, { session }, alias, 1, { subject, text: `body of ${subject}`, ...extra }))[0]!
  m = {
    plain: await one("plain walrus"),
    read: await one("read walrus"),
    starred: await one("starred narwhal"),
    pinned: await one("pinned narwhal"),
    archived: await one("archived walrus"),
    tagged: await one("tagged narwhal"),
    attached: await one("attached walrus", { attachments: [{ filename: "a.txt", contentType: "text/plain", contentBase64: "aGk=" }] }),
    other: await one("other narwhal", {}, otherAliasId)
  }
  const patch = async (id: number, body: Record<string, unknown>) =>
    expect((await h.request(`/messages/${id}`, { method: "PATCH", session, body })).status).toBe(200)
  await patch(m.read, { isRead: true })
  await patch(m.starred, { starred: true })
  await patch(m.pinned, { pinned: true })
  await patch(m.archived, { archived: true })
  const tag = await h.request("/tags", { method: "POST", session, body: { name: "Flagged" } })
  tagId = tag.body.id
  await patch(m.tagged, { tagIds: [tagId] })
})
afterAll(() => h.close())

const newestFirst = (...ids: Array<number>) => [...ids].sort((a, b) => b - a)
const expectList = async (query: string, ids: Array<number>) =>
  expect({ query, ...(await listIds(h, { session }, `?${query}`)) }).toEqual({ query, ids: newestFirst(...ids), total: ids.length })

/** Follows nextCursor one message a page: each of `ids` once, newest first, and the same total on every page. */
const expectCursorWalk = async (query: string, ids: Array<number>) => {
  const expected = newestFirst(...ids)
  const seen: Array<number> = []
  let cursor: string | null = null
  do {
    const answer: { status: number; text: string; body: { total: number; items: Array<{ id: number }>; nextCursor: string | null } } =
      await h.request(`/messages?${query}limit=1${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`, { session })
    expect(answer.status, answer.text).toBe(200)
    expect(answer.body.total).toBe(expected.length)
    seen.push(...answer.body.items.map((item) => item.id))
    cursor = answer.body.nextCursor
  } while (cursor !== null)
  expect(seen).toEqual(expected)
}

describe("filters and their total", () => {
  it("the mailbox leaves out the archive, and archived=true is the archive", async () => {
    const { archived, ...rest } = m
    await expectList("", Object.values(rest))
    await expectList("archived=true", [archived])
  })

  it("reader state: unread, starred, pinned, both ways, and as is: terms", async () => {
    const inMailbox = Object.values(m).filter((id) => id !== m.archived)
    await expectList("unread=false", [m.read])
    await expectList("unread=true", inMailbox.filter((id) => id !== m.read))
    await expectList("starred=true", [m.starred])
    await expectList("starred=false", inMailbox.filter((id) => id !== m.starred))
    await expectList("pinned=true", [m.pinned])
    await expectList(`q=${encodeURIComponent("is:starred")}`, [m.starred])
    await expectList(`q=${encodeURIComponent("is:pinned narwhal")}`, [m.pinned])
    await expectList(`q=${encodeURIComponent("is:unread walrus")}`, [m.plain, m.attached])
  })

  it("alias, domain, tag, hasAttachment and full text, alone and together", async () => {
    await expectList(`alias=${otherAliasId}`, [m.other])
    await expectList("domain=BURNBOX.test&starred=true", [m.starred])
    await expectList("domain=elsewhere.test", [])
    await expectList(`tag=${tagId}`, [m.tagged])
    await expectList("hasAttachment=true", [m.attached])
    await expectList(`q=walrus`, [m.plain, m.read, m.attached])
    await expectList(`q=${encodeURIComponent("walrus -attached")}`, [m.plain, m.read])
    await expectList(`q=narwhal&alias=${aliasId}`, [m.starred, m.pinned, m.tagged])
    await expectList("q=walrus&archived=true", [m.archived])
    await expectList(`q=${encodeURIComponent("tag:flagged narwhal")}`, [m.tagged])
  })

  it("a cursor walk of one message a page gives each message once and the same total on every page", async () => {
    await expectCursorWalk("", Object.values(m).filter((id) => id !== m.archived))
  })

  it("the search index holds exactly the processed mail outside the trash, through trash, restore and destroy", async () => {
    // A trashed message keeps its row (its words, for a restore) outside every index of the table.
    const indexed = async () =>
      (await h.query<{ id: number }>("SELECT id FROM message_search WHERE account_id = $1 AND trashed_at IS NULL ORDER BY id", [session.accountId]))
        .map((r) => r.id)
    const processedOutsideTrash = async () =>
      (await h.query<{ id: number }>(
        "SELECT id FROM messages WHERE account_id = $1 AND trashed_at IS NULL AND processing_status = 'processed' ORDER BY id",
        [session.accountId]
      )).map((r) => r.id)
    const all = Object.values(m).sort((a, b) => a - b)
    expect(await indexed()).toEqual(all)
    const [extra] = await deliver(h, { session }, aliasId, 1, { subject: "extra walrus" })
    expect(await indexed()).toEqual([...all, extra!])
    const remove = async (id: number, query = "") => expect((await h.request(`/messages/${id}${query}`, { method: "DELETE", session })).status).toBe(204)
    await remove(extra!)
    expect(await indexed()).toEqual(all)
    await expectList("q=extra", [])
    expect((await h.request(`/messages/${extra}/restore`, { method: "POST", session })).status).toBe(204)
    expect(await indexed()).toEqual([...all, extra!])
    await expectList("q=extra", [extra!])
    await remove(extra!, "?permanent=1")
    expect(await indexed()).toEqual(all)
    expect(await indexed()).toEqual(await processedOutsideTrash())
    expect(await h.query("SELECT id FROM message_search WHERE id = $1", [extra])).toEqual([])
  })

  it("a search's total stays exact as its matches move to the trash and back, into the archive and out", async () => {
    const found = await deliver(h, { session }, aliasId, 3, { subject: "okapi sighting" })
    const [a, b, c] = found as [number, number, number]
    const remove = async (id: number) => expect((await h.request(`/messages/${id}`, { method: "DELETE", session })).status).toBe(204)
    const restore = async (id: number) => expect((await h.request(`/messages/${id}/restore`, { method: "POST", session })).status).toBe(204)
    const archive = async (id: number, archived: boolean) =>
      expect((await h.request(`/messages/${id}`, { method: "PATCH", session, body: { archived } })).status).toBe(200)
    await expectList("q=okapi", [a, b, c])
    await remove(a)
    await expectList("q=okapi", [b, c])
    await expectList(`q=${encodeURIComponent("okapi sighting")}`, [b, c])
    await expectList("trashed=true&q=okapi", [a])
    await archive(b, true)
    await expectList("q=okapi", [c])
    await expectList("q=okapi&archived=true", [b])
    const archivedInIndex = async () =>
      (await h.query<{ id: number }>("SELECT id FROM message_search WHERE archived AND id = ANY($1) ORDER BY id", [found])).map((r) => r.id)
    expect(await archivedInIndex()).toEqual([b])
    await restore(a)
    await archive(b, false)
    await expectList("q=okapi", [a, b, c])
    await expectList(`q=${encodeURIComponent("\"okapi sighting\"")}`, [a, b, c])
    await expectList("trashed=true&q=okapi", [])
    expect(await archivedInIndex()).toEqual([])
    for (const id of found) await remove(id)
  })

  it("from:, to:, subject: and only excluded words, read from messages, still find the words in the search index", async () => {
    await expectList(`q=${encodeURIComponent("subject:walrus plain")}`, [m.plain])
    await expectList(`q=${encodeURIComponent("subject:walrus -plain")}`, [m.read, m.attached])
    await expectList(`q=${encodeURIComponent("from:example.com narwhal")}`, [m.starred, m.pinned, m.tagged, m.other])
    await expectList(`q=${encodeURIComponent("-walrus")}`, [m.starred, m.pinned, m.tagged, m.other])
    await expectList(`q=${encodeURIComponent("-walrus -narwhal")}`, [])
  })

  it("a search's cursor walk gives each match once with the same total; no match is total 0", async () => {
    await expectCursorWalk("q=walrus&", [m.plain, m.read, m.attached])
    await expectList("q=nosuchwordanywhere", [])
  })

  it("keeps every message's words out of line, so a page of the index holds many rows", async () => {
    const rows = await h.query<{ id: number; inline: boolean }>(
      "SELECT id, pg_column_toast_chunk_id(search) IS NULL AS inline FROM message_search WHERE account_id = $1 ORDER BY id",
      [session.accountId]
    )
    expect(rows.length).toBeGreaterThan(0)
    for (const row of rows) expect(row).toMatchObject({ inline: false })
  })
})
