/**
 * GET /messages pages (spec 4.5, 2.12; issue #5): keyset cursors over (receivedAt, id), newest
 * and oldest first, across 250 messages while more arrive, for the list and a search; the
 * cursor's rules (signed, bound to its filters, not to the page size); sort=oldest; dateFrom and
 * dateTo as inclusive bounds; limit; excludeShared; and the two ways a one-word search finds its
 * page (store/src/messages/Messages.ts `list`: a walk of the mailbox in list order, or every match read
 * and sorted), which must give the same pages. Expected pages are computed from what each
 * fixture sent; the harness clock stamps receivedAt, so mail sent without moving it ties.
 */
import { MessagePage } from "@burnbox/domain"
import { claimAlias, expectProblem, expectShape, type Harness, injectMail, type MailInput, processed, type Session, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 7505 })
})
afterAll(() => h.close())

/** A message as a fixture sent it: what expected pages are computed from. */
interface Sent {
  readonly id: number
  /** Epoch milliseconds: the harness clock when it was injected. */
  readonly receivedAt: number
  readonly text: string
}

/** Injects `mails` at the clock's present time (so they tie, ordered by id) and waits for the pipeline. */
const arrive = async (session: Session, aliasId: number, mails: ReadonlyArray<MailInput>): Promise<Array<Sent>> => {
  const receivedAt = h.clock.now().getTime()
  const ids: Array<number> = []
  for (const mail of mails) ids.push(await injectMail(h, { session }, aliasId, mail))
  const sent: Array<Sent> = []
  for (const [n, id] of ids.entries()) {
    expect(Date.parse((await processed(h, { session }, id)).receivedAt)).toBe(receivedAt)
    sent.push({ id, receivedAt, text: mails[n]!.text ?? "" })
  }
  return sent
}

/** The ids in list order: receivedAt then id, descending for newest (the default), ascending for oldest. */
const inOrder = (messages: Iterable<Sent>, sort: "newest" | "oldest" = "newest") => {
  const newest = [...messages].sort((a, b) => b.receivedAt - a.receivedAt || b.id - a.id).map((m) => m.id)
  return sort === "newest" ? newest : newest.toReversed()
}

const has = (word: string) => (m: Sent) => m.text.split(" ").includes(word)

type Query = Readonly<Record<string, string | number | undefined>>

const listPath = (query: Query) => {
  const params = new URLSearchParams()
  for (const [key, value] of Object.entries(query)) if (value !== undefined) params.set(key, String(value))
  return `/messages?${params}`
}

const page = async (session: Session, query: Query): Promise<MessagePage> => {
  const answer = await h.request(listPath(query), { session })
  expect(answer.status, `${listPath(query)}: ${answer.text}`).toBe(200)
  return expectShape(MessagePage, answer.body)
}

const ids = (p: MessagePage) => p.items.map((m) => m.id)

/**
 * Follows nextCursor from the first page to the last, running `between` before every next page
 * (mail arriving mid-walk). Each page's total must be `total()` at that moment; every page but the
 * last is full, and none after the first is empty.
 */
const walk = async (session: Session, query: Query, total: () => number, between?: () => Promise<void>) => {
  const limit = Number(query.limit ?? 50)
  const seen: Array<number> = []
  let cursor: string | undefined
  for (let pages = 1; ; pages++) {
    const expectedTotal = total()
    const answer = await page(session, { ...query, cursor })
    expect({ query, pages, total: answer.total }).toEqual({ query, pages, total: expectedTotal })
    expect(answer.items.length).toBeLessThanOrEqual(limit)
    if (pages > 1) expect(answer.items.length, `page ${pages} of ${listPath(query)} is empty`).toBeGreaterThan(0)
    seen.push(...ids(answer))
    if (answer.nextCursor === null) return seen
    expect(answer.items.length).toBe(limit)
    expect(pages, "the walk does not end").toBeLessThan(1000)
    cursor = answer.nextCursor
    await between?.()
  }
}

/** Walks and expects exactly `expected`, in order, with `expected.length` as every page's total. */
const expectWalk = async (session: Session, query: Query, expected: ReadonlyArray<number>) =>
  expect({ query, ids: await walk(session, query, () => expected.length) }).toEqual({ query, ids: expected })

const invalidCursor = async (session: Session, query: Query) => {
  const answer = await h.request(listPath(query), { session })
  expectProblem(answer, 422, "validation_failed")
  expect({ query, fields: answer.body.error.fields }).toEqual({ query, fields: { cursor: "invalid_cursor" } })
}

describe("a walk across 250 messages while others arrive", () => {
  let session: Session
  let aliasId: number
  /** Everything the mailbox holds, in the order it was sent. */
  const mailbox: Array<Sent> = []
  const start = Date.parse("2026-11-21T12:00:00.000Z")
  // [messages sharing one receivedAt, its offset from `start` in ms]. Groups larger than a page,
  // instants 1 ms apart, and groups stamped before mail sent ahead of them (higher ids, older
  // receivedAt, some tying with an earlier group) so that id order is not list order.
  const schedule: ReadonlyArray<readonly [number, number]> = [
    [3, 0], [45, 1_000], [1, 1_001], [7, 1_002], [20, 60_000], [1, 61_000], [13, 62_000], [5, 30_000],
    [60, 120_000], [2, 120_001], [8, 180_000], [4, 1_000], [30, 240_000], [40, 240_500], [11, 300_000]
  ]
  const kiwi = () => mailbox.filter(has("kiwi"))
  const latest = () => Math.max(...mailbox.map((m) => m.receivedAt))
  /** One message a second after the newest, as mail arriving while a walk goes on. */
  const arriveLater = async (word: string) => {
    h.clock.set(latest() + 1_000)
    mailbox.push(...await arrive(session, aliasId, [{ subject: "late delivery", text: `${word} late` }]))
  }

  beforeAll(async () => {
    session = await h.signup({ plan: "pro" })
    aliasId = (await claimAlias(h, { session })).id
    let n = 0
    for (const [count, offset] of schedule) {
      h.clock.set(start + offset)
      // Most messages carry "kiwi"; every fifth carries "mango" instead.
      const mails = Array.from({ length: count }, () => ({ subject: `delivery ${n}`, text: `${n++ % 5 === 2 ? "mango" : "kiwi"} note` }))
      mailbox.push(...await arrive(session, aliasId, mails))
    }
    expect(mailbox).toHaveLength(250)
    expect(kiwi()).toHaveLength(200)
  })

  it("newest first, 20 a page: each of the 250 once in (receivedAt, id) descending order; later arrivals stay out and count in total", async () => {
    const before = inOrder(mailbox)
    const seen = await walk(session, { limit: 20 }, () => mailbox.length, () => arriveLater("kiwi"))
    expect(seen).toEqual(before)
    expect(mailbox.length - before.length).toBe(12)
  })

  it("oldest first, 20 a page: each message once in ascending order, ending with the mail that arrived during the walk", async () => {
    const before = mailbox.length
    const seen = await walk(session, { limit: 20, sort: "oldest" }, () => mailbox.length, () => arriveLater("kiwi"))
    const arrived = mailbox.slice(before).map((m) => m.id)
    expect(arrived.length).toBeGreaterThanOrEqual(13)
    expect(seen).toEqual(inOrder(mailbox, "oldest"))
    expect(seen.slice(-arrived.length)).toEqual(arrived)
  })

  it("a search newest first: each match once, later matches stay out, total counts the matches of the moment", async () => {
    const before = inOrder(kiwi())
    let arrivals = 0
    // Arrivals alternate between a match and a message the search leaves out.
    const seen = await walk(session, { q: "kiwi", limit: 20 }, () => kiwi().length, () => arriveLater(arrivals++ % 2 === 0 ? "kiwi" : "mango"))
    expect(seen).toEqual(before)
    expect(arrivals).toBeGreaterThanOrEqual(10)
  })

  it("a search oldest first: each match once, ending with the matches that arrived during the walk", async () => {
    const before = mailbox.length
    let arrivals = 0
    const seen = await walk(session, { q: "kiwi", limit: 20, sort: "oldest" }, () => kiwi().length, () => arriveLater(arrivals++ % 2 === 0 ? "kiwi" : "mango"))
    const arrived = mailbox.slice(before).filter(has("kiwi")).map((m) => m.id)
    expect(arrived.length).toBeGreaterThanOrEqual(5)
    expect(seen).toEqual(inOrder(kiwi(), "oldest"))
    expect(seen.slice(-arrived.length)).toEqual(arrived)
    expect(mailbox.length).toBeLessThanOrEqual(500) // the pro plan's test messages a day
  })
})

describe("cursors, sort, dates, limit and excludeShared on a mailbox of 110 messages", () => {
  let session: Session
  let aliasId: number
  const mailbox: Array<Sent> = []
  // [messages sharing one receivedAt, that instant]: groups 1 ms either side of the boundaries
  // the date tests use, two messages stamped at 14:00:01 after later ones, and a bulk beyond 100.
  const schedule: ReadonlyArray<readonly [number, string]> = [
    [3, "2026-11-21T14:00:00.000Z"], [2, "2026-11-21T14:00:00.999Z"], [4, "2026-11-21T14:00:01.000Z"], [1, "2026-11-21T14:00:01.001Z"],
    [3, "2026-11-21T14:00:02.000Z"], [1, "2026-11-21T14:00:02.001Z"], [2, "2026-11-21T14:00:01.000Z"],
    [40, "2026-11-21T14:01:00.000Z"], [54, "2026-11-21T14:02:00.000Z"]
  ]
  const between = (from: string | undefined, to: string | undefined) =>
    mailbox.filter((m) => (from === undefined || m.receivedAt >= Date.parse(from)) && (to === undefined || m.receivedAt <= Date.parse(to)))

  /** The messages of a date range, all on pages of 100. */
  const expectRange = (query: Query, messages: ReadonlyArray<Sent>) => expectWalk(session, { ...query, limit: 100 }, inOrder(messages))

  beforeAll(async () => {
    session = await h.signup({ plan: "pro" })
    aliasId = (await claimAlias(h, { session })).id
    let n = 0
    for (const [count, instant] of schedule) {
      h.clock.set(Date.parse(instant))
      const mails = Array.from({ length: count }, () => ({ subject: `parcel ${n}`, text: `${n++ % 2 === 0 ? "kiwi" : "mango"} note` }))
      mailbox.push(...await arrive(session, aliasId, mails))
    }
    expect(mailbox).toHaveLength(110)
  })

  describe("cursor rules", () => {
    it("a cursor carries on its own list with any page size: limit is not one of its filters", async () => {
      const expected = inOrder(mailbox)
      const seen: Array<number> = []
      let cursor: string | undefined
      for (const limit of [5, 7, 1, 100]) {
        const answer = await page(session, { limit, cursor })
        expect(answer.total).toBe(110)
        seen.push(...ids(answer))
        cursor = answer.nextCursor ?? undefined
      }
      expect(cursor).toBeUndefined()
      expect(seen).toEqual(expected)
    })

    it("a cursor with one character of its payload or of its signature changed, or a rewritten payload, is 422 naming cursor", async () => {
      const { nextCursor } = await page(session, { limit: 2 })
      const cursor = nextCursor!
      const dot = cursor.indexOf(".")
      expect(dot).toBeGreaterThan(0)
      const changedAt = (index: number) => `${cursor.slice(0, index)}${cursor[index] === "A" ? "B" : "A"}${cursor.slice(index + 1)}`
      for (const index of [0, 5, dot - 1, dot + 1, cursor.length - 1]) await invalidCursor(session, { limit: 2, cursor: changedAt(index) })
      // The payload is readable JSON: pointing it at another message without the signature's key is refused.
      const payload = JSON.parse(Buffer.from(cursor.slice(0, dot), "base64url").toString("utf8")) as { i: number }
      const moved = Buffer.from(JSON.stringify({ ...payload, i: payload.i + 1 })).toString("base64url")
      await invalidCursor(session, { limit: 2, cursor: `${moved}${cursor.slice(dot)}` })
      // The cursor untouched still works.
      expect(ids(await page(session, { limit: 2, cursor }))).toEqual(inOrder(mailbox).slice(2, 4))
    })

    it("strings that were never cursors are 422 naming cursor", async () => {
      const { nextCursor } = await page(session, { limit: 2 })
      const [payload, signature] = nextCursor!.split(".") as [string, string]
      for (const cursor of ["garbage", "", ".", payload, `${payload}.`, `.${signature}`, `${nextCursor}.${signature}`, "eyJyIjoxfQ.c2ln"]) {
        await invalidCursor(session, { cursor })
      }
    })

    it("a cursor used with other filters is 422 naming cursor, and carries on with its own", async () => {
      const reused: ReadonlyArray<readonly [Query, Query]> = [
        [{ q: "kiwi" }, { q: "mango" }],
        [{ q: "kiwi" }, { q: "kiwi mango" }],
        [{ q: "kiwi" }, {}],
        [{ unread: "true" }, {}],
        [{}, { unread: "true" }],
        [{ sort: "newest" }, { sort: "oldest" }],
        [{ sort: "oldest" }, {}],
        [{ dateFrom: "2026-11-21T14:00:01.000Z" }, { dateFrom: "2026-11-21T14:00:02.000Z" }],
        [{ hasAttachment: "false" }, { hasAttachment: "true" }],
        [{ alias: aliasId }, {}]
      ]
      for (const [own, other] of reused) {
        const first = await page(session, { ...own, limit: 2 })
        const cursor = first.nextCursor!
        expect(cursor, JSON.stringify(own)).toEqual(expect.any(String))
        await invalidCursor(session, { ...other, limit: 2, cursor })
        const next = await page(session, { ...own, limit: 2, cursor })
        expect(next.total).toBe(first.total)
        expect(next.items).toHaveLength(2)
      }
    })

    it("a cursor takes the filters as they take effect: defaults written out or a q with spaces around it is the same list", async () => {
      const same: ReadonlyArray<readonly [Query, Query]> = [
        [{}, { sort: "newest", archived: "false", trashed: "false", excludeShared: "false" }],
        [{ sort: "newest" }, {}],
        [{ q: "kiwi" }, { q: "  kiwi " }],
        [{ q: " " }, {}]
      ]
      for (const [own, written] of same) {
        const first = await page(session, { ...own, limit: 2 })
        const next = await page(session, { ...written, limit: 2, cursor: first.nextCursor! })
        expect(next.total, JSON.stringify(written)).toBe(first.total)
        expect(next.items).toHaveLength(2)
      }
    })

    it("a cursor belongs to its account: another account's cursor with the same filters is 422", async () => {
      const other = await h.signup({ plan: "pro" })
      const otherAlias = (await claimAlias(h, { session: other })).id
      await arrive(other, otherAlias, [{ subject: "one" }, { subject: "two" }, { subject: "three" }])
      const theirs = await page(other, { limit: 1 })
      await invalidCursor(session, { limit: 1, cursor: theirs.nextCursor! })
      expect(ids(await page(other, { limit: 1, cursor: theirs.nextCursor! }))).toHaveLength(1)
    })
  })

  it("sort=oldest is the exact reverse of newest, page by page with cursors, for the list, a search and a date range", async () => {
    const cases: ReadonlyArray<readonly [Query, ReadonlyArray<Sent>]> = [
      [{}, mailbox],
      [{ q: "kiwi" }, mailbox.filter(has("kiwi"))],
      [{ dateTo: "2026-11-21T14:00:02.000Z" }, between(undefined, "2026-11-21T14:00:02.000Z")]
    ]
    for (const [query, messages] of cases) {
      const newest = inOrder(messages)
      await expectWalk(session, { ...query, limit: 3 }, newest)
      await expectWalk(session, { ...query, limit: 3, sort: "newest" }, newest)
      await expectWalk(session, { ...query, limit: 3, sort: "oldest" }, newest.toReversed())
    }
    expect(ids(await page(session, { sort: "oldest", limit: 1 }))).toEqual([mailbox[0]!.id])
  })

  describe("dateFrom and dateTo", () => {
    it("dateFrom alone takes in mail received at exactly that instant and after", async () => {
      const from = "2026-11-21T14:00:01.000Z"
      const messages = between(from, undefined)
      expect(messages).toHaveLength(105)
      await expectRange({ dateFrom: from }, messages)
      await expectRange({ dateFrom: "2026-11-21T14:00:01.001Z" }, between("2026-11-21T14:00:01.001Z", undefined))
    })

    it("dateTo alone takes in mail received at exactly that instant and before", async () => {
      const to = "2026-11-21T14:00:01.000Z"
      const messages = between(undefined, to)
      expect(messages).toHaveLength(11)
      await expectRange({ dateTo: to }, messages)
      await expectRange({ dateTo: "2026-11-21T14:00:00.999Z" }, between(undefined, "2026-11-21T14:00:00.999Z"))
    })

    it("together they bound both ends inclusively; the same instant for both is the mail of that instant", async () => {
      const instant = "2026-11-21T14:00:01.000Z"
      await expectRange({ dateFrom: instant, dateTo: instant }, mailbox.filter((m) => m.receivedAt === Date.parse(instant)))
      expect(mailbox.filter((m) => m.receivedAt === Date.parse(instant))).toHaveLength(6)
      const from = "2026-11-21T14:00:00.999Z"
      const to = "2026-11-21T14:00:02.000Z"
      expect(between(from, to)).toHaveLength(12)
      await expectRange({ dateFrom: from, dateTo: to }, between(from, to))
      await expectRange({ dateFrom: from, dateTo: to, q: "kiwi" }, between(from, to).filter(has("kiwi")))
    })

    it("a timestamp with an offset, or without milliseconds, is the same instant as its UTC form", async () => {
      await expectRange({ dateFrom: "2026-11-21T16:00:01+02:00" }, between("2026-11-21T14:00:01.000Z", undefined))
      await expectRange({ dateTo: "2026-11-21T09:00:02.000-05:00" }, between(undefined, "2026-11-21T14:00:02.000Z"))
      await expectRange({ dateFrom: "2026-11-21T14:00:01Z", dateTo: "2026-11-21T14:00:01Z" }, between("2026-11-21T14:00:01.000Z", "2026-11-21T14:00:01.000Z"))
    })

    it("a range that ends before it starts, or after all mail, is empty with total 0", async () => {
      await expectRange({ dateFrom: "2026-11-21T14:00:02.000Z", dateTo: "2026-11-21T14:00:01.000Z" }, [])
      await expectRange({ dateFrom: "2026-11-21T14:02:00.001Z" }, [])
      await expectRange({ dateTo: "2026-11-21T13:59:59.999Z" }, [])
    })

    it("a cursor walk inside a range, two a page, newest and oldest, gives the range once with its total", async () => {
      const range = { dateFrom: "2026-11-21T14:00:00.999Z", dateTo: "2026-11-21T14:00:02.000Z" }
      const expected = inOrder(between(range.dateFrom, range.dateTo))
      await expectWalk(session, { ...range, limit: 2 }, expected)
      await expectWalk(session, { ...range, limit: 2, sort: "oldest" }, expected.toReversed())
    })

    it("a malformed timestamp is 422 naming its field", async () => {
      for (const [field, value] of [["dateFrom", "yesterday"], ["dateTo", "2026-11-21"], ["dateFrom", "2026-11-21 14:00:00Z"]] as const) {
        const answer = await h.request(listPath({ [field]: value }), { session })
        expectProblem(answer, 422, "validation_failed")
        expect(answer.body.error.fields).toEqual({ [field]: "invalid_date_time" })
      }
    })

    it("a timestamp of the right form but no real instant (month 13, February 30, hour 25, second 60, offset +24:00) is 422", async () => {
      const unreal: ReadonlyArray<Query> = [
        { dateFrom: "2026-13-01T00:00:00Z" },
        { dateFrom: "2026-02-30T00:00:00Z" },
        { dateTo: "2026-11-21T25:00:00Z" },
        { q: "kiwi", dateFrom: "2026-11-21T14:00:60Z" },
        { dateTo: "2026-11-21T14:00:00+24:00" }
      ]
      for (const query of unreal) {
        const answer = await h.request(listPath(query), { session })
        expectProblem(answer, 422, "validation_failed")
        expect(answer.body.error.fields, JSON.stringify(query)).toEqual({ [Object.keys(query).find((k) => k !== "q")!]: "invalid_date_time" })
      }
    })

    it("digits past the millisecond count: dateFrom 14:00:01.0005 leaves out 14:00:01.000, dateTo 14:00:01.0005 takes it in", async () => {
      await expectRange({ dateFrom: "2026-11-21T14:00:01.0005Z" }, between("2026-11-21T14:00:01.001Z", undefined))
      await expectRange({ dateFrom: "2026-11-21T14:00:01.000000000Z" }, between("2026-11-21T14:00:01.000Z", undefined))
      await expectRange({ dateTo: "2026-11-21T14:00:01.0005Z" }, between(undefined, "2026-11-21T14:00:01.000Z"))
      await expectRange({ dateTo: "2026-11-21T14:00:00.999999999Z" }, between(undefined, "2026-11-21T14:00:00.999Z"))
    })
  })

  describe("limit", () => {
    it("the default page is 50; limit=1 and limit=100 give that many, each with a cursor to the rest", async () => {
      const expected = inOrder(mailbox)
      for (const [limit, size] of [[undefined, 50], [1, 1], [100, 100]] as const) {
        const answer = await page(session, { limit })
        expect({ limit, ids: ids(answer), total: answer.total }).toEqual({ limit, ids: expected.slice(0, size), total: 110 })
        const rest = await page(session, { limit: 100, cursor: answer.nextCursor! })
        expect(ids(rest)).toEqual(expected.slice(size, size + 100))
      }
    })

    it("limit 0, 101, -1, 1.5, abc and empty are 422 naming limit", async () => {
      // An empty limit reads as 0 (out_of_range); its reason is not pinned here.
      const reasons = { "0": "out_of_range", "101": "out_of_range", "-1": "out_of_range", "1.5": "invalid_type", abc: "invalid_type", "": expect.any(String) }
      for (const [limit, reason] of Object.entries(reasons)) {
        const answer = await h.request(`/messages?limit=${encodeURIComponent(limit)}`, { session })
        expectProblem(answer, 422, "validation_failed")
        expect({ limit, fields: answer.body.error.fields }).toEqual({ limit, fields: { limit: reason } })
      }
    })
  })

  it("excludeShared=true and excludeShared=false list what the plain list does, page by page, with the same total", async () => {
    // Sharing is not built: nothing is shared with this account, so the narrowed set is the whole list.
    for (const excludeShared of ["true", "false"]) {
      await expectWalk(session, { excludeShared, limit: 20 }, inOrder(mailbox))
      await expectWalk(session, { excludeShared, q: "mango", limit: 20, sort: "oldest" }, inOrder(mailbox.filter(has("mango")), "oldest"))
    }
  })
})

describe("a one-word search: the walk of the mailbox and the sorted matches give the same pages", () => {
  // With limit L the walk reads at most 10 × (L+1) rows of the view from the cursor and answers
  // when it finds L+1 matches there; otherwise every match is read and sorted. Fixture, 40
  // messages in ties of three:
  // - apple in all but three: the walk finds its pages, until the end of the mailbox;
  // - bramble in the two oldest only: newest first the walk finds none and falls back; oldest
  //   first it finds both on the first page with limit 1;
  // - cherry in one of the newest 20 of the mailbox and five older (one trashed, one archived):
  //   limit 1 falls back for its first pages, limit 3 finds its first page in 40 rows.
  interface Fruit extends Sent {
    readonly n: number
    readonly aliasId: number
    readonly attachment: boolean
  }
  let session: Session
  let firstAlias: number
  let secondAlias: number
  const fruit: Array<Fruit> = []
  const withoutApple = [5, 17, 30]
  const bramble = [0, 1]
  const cherry = [3, 7, 8, 12, 14, 35]
  const attached = [1, 8, 20, 36, 39]
  const archived = [2, 12, 25, 38]
  const read = [0, 3, 10, 21, 35, 37]
  // 25 is archived too: the archive does not show it either (rule 1).
  const trashed = [4, 8, 25, 36]

  const idOf = (n: number) => fruit[n]!.id

  interface Filters {
    readonly alias?: number
    readonly archived?: "true"
    readonly unread?: "false"
    readonly hasAttachment?: "true" | "false"
  }
  const matching = (words: ReadonlyArray<string>, filters: Filters) =>
    fruit.filter((f) =>
      !trashed.includes(f.n) && archived.includes(f.n) === (filters.archived === "true") && words.every((w) => has(w)(f)) &&
      (filters.alias === undefined || f.aliasId === filters.alias) &&
      (filters.unread === undefined || read.includes(f.n)) &&
      (filters.hasAttachment === undefined || f.attachment === (filters.hasAttachment === "true"))
    )
  /** Every page of `q`, limit 1 and 3, newest and oldest, against the fixture and against `q` as a phrase (always sorted). */
  const expectSearch = async (words: ReadonlyArray<string>, filters: Filters) => {
    for (const limit of [1, 3]) {
      for (const sort of ["newest", "oldest"] as const) {
        const expected = inOrder(matching(words, filters), sort)
        await expectWalk(session, { ...filters, q: words.join(" "), limit, sort }, expected)
        if (words.length === 1) await expectWalk(session, { ...filters, q: `"${words[0]}"`, limit, sort }, expected)
      }
    }
  }

  beforeAll(async () => {
    session = await h.signup({ plan: "pro" })
    firstAlias = (await claimAlias(h, { session })).id
    secondAlias = (await claimAlias(h, { session })).id
    const start = Date.parse("2026-11-21T16:00:00.000Z")
    for (let n = 0; n < 40; n++) {
      if (n % 3 === 0) h.clock.set(start + n * 1_000)
      const text = ["fruit", !withoutApple.includes(n) && "apple", bramble.includes(n) && "bramble", cherry.includes(n) && "cherry"].filter(Boolean).join(" ")
      const aliasId = n % 4 === 0 ? secondAlias : firstAlias
      const attachment = attached.includes(n)
      const mail: MailInput = attachment
        ? { subject: `note ${n}`, text, attachments: [{ filename: "a.txt", contentType: "text/plain", contentBase64: "aGk=" }] }
        : { subject: `note ${n}`, text }
      const [sent] = await arrive(session, aliasId, [mail])
      fruit.push({ ...sent!, n, aliasId, attachment })
    }
    const patch = async (n: number, body: Record<string, unknown>) =>
      expect((await h.request(`/messages/${idOf(n)}`, { method: "PATCH", session, body })).status).toBe(200)
    for (const n of archived) await patch(n, { archived: true })
    for (const n of read) await patch(n, { isRead: true })
    for (const n of trashed) expect((await h.request(`/messages/${idOf(n)}`, { method: "DELETE", session })).status).toBe(204)

    // The fixture does what the comment above says.
    const newestTwenty = inOrder(matching([], {})).slice(0, 20)
    const inNewestTwenty = (word: string) => fruit.filter((f) => newestTwenty.includes(f.id) && has(word)(f)).length
    expect([inNewestTwenty("bramble"), inNewestTwenty("cherry"), matching(["cherry"], {}).length]).toEqual([0, 1, 4])
    expect(inOrder(matching(["bramble"], {}), "oldest")).toEqual(inOrder(matching([], {}), "oldest").slice(0, 2))
  })

  it("a common word, a word only in the two oldest, a rare word: every page with limit 1 and 3, newest and oldest", async () => {
    for (const word of ["apple", "bramble", "cherry"]) await expectSearch([word], {})
  })

  it("the same words with alias, archived=true, unread=false and hasAttachment, alone and together", async () => {
    const filters: ReadonlyArray<Filters> = [
      { alias: firstAlias },
      { alias: secondAlias },
      { archived: "true" },
      { unread: "false" },
      { hasAttachment: "true" },
      { hasAttachment: "false" },
      { alias: firstAlias, unread: "false" },
      { alias: secondAlias, hasAttachment: "false", archived: "true" }
    ]
    for (const word of ["apple", "bramble", "cherry"]) {
      for (const f of filters) await expectSearch([word], f)
    }
  })

  it("several words read every match, and agree with the fixture", async () => {
    await expectSearch(["apple", "cherry"], {})
    await expectSearch(["fruit", "bramble"], {})
    await expectSearch(["apple", "cherry"], { unread: "false" })
  })

  it("a trashed message is in no page of a search for a word it has; the trash's search (subject and sender only) finds no body word", async () => {
    const seen = new Set(await walk(session, { q: "fruit", limit: 3 }, () => matching(["fruit"], {}).length))
    expect(trashed.filter((n) => seen.has(idOf(n)))).toEqual([])
    expect(ids(await page(session, { q: "fruit", archived: "true" }))).toEqual(inOrder(matching(["fruit"], { archived: "true" })))
    expect(await page(session, { q: "apple", trashed: "true" })).toMatchObject({ items: [], total: 0, nextCursor: null })
  })
})
