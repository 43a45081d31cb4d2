/**
 * Hostile input on every endpoint of the messages group (spec 4.5, 7): each answer is a page or
 * a Problem, never a 500, a hang or a crash, and a refused change leaves stored mail as it was.
 * Each table lists a request and what it must answer: 200 (the input is odd but valid, e.g. search
 * text full of operators) or a status with its Problem code and, for 422, the field it names.
 */
import { MessagePage } from "@burnbox/domain"
import { type Answer, claimAlias, deliver, expectProblem, expectShape, type Harness, type Session, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let owner: Session
let stranger: Session
let token: string
/** The owner's messages: a plain one, one with HTML and an attachment. */
let plain: number
let rich: number
let attachmentId: number
let strangers: number
/** Words of the plain message whose text form as a search holds a quote after `(` or `!`. */
const urlWords = ["http://example.com/a('b", "x.org/a(b)!'c'd", "http://h.example/p?q=!'x"]

const deliverOne = async (...args: Parameters<typeof deliver>) => (await deliver(...args))[0]!

beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 7511 })
  owner = await h.signup({ plan: "pro" })
  stranger = await h.signup({ plan: "pro" })
  token = await h.createToken(owner, ["read", "delete"])
  const aliasId = (await claimAlias(h, { session: owner })).id
  plain = await deliverOne(h, { session: owner }, aliasId, 1, {
    subject: "plain kiwi",
    text: `kiwi 100% _under\\score, see ${urlWords.join(" and ")}`
  })
  rich = await deliverOne(h, { session: owner }, aliasId, 1, {
    subject: "rich",
    html: "<p>hello <img src=\"https://example.com/a.png\"></p>",
    attachments: [{ filename: "note.txt", contentType: "text/plain", contentBase64: Buffer.from("note").toString("base64") }]
  })
  const detail = await h.request(`/messages/${rich}`, { session: owner })
  attachmentId = detail.body.attachments[0].id
  const strangerAlias = (await claimAlias(h, { session: stranger })).id
  strangers = await deliverOne(h, { session: stranger }, strangerAlias, 1)
}, 60_000)
afterAll(() => h.close())

/** What a request must answer: 200, or a Problem with its status, code and (422) the field named. */
type Expected = 200 | readonly [status: number, code: string, field?: string]

const expectAnswer = (label: string, answer: Answer, expected: Expected) => {
  expect(answer.status, `${label}: ${answer.status} ${answer.text.slice(0, 300)}`).not.toBe(500)
  if (expected === 200) {
    expect(answer.status, `${label}: ${answer.text.slice(0, 300)}`).toBe(200)
    return
  }
  const [status, code, field] = expected
  expect({ label, status: answer.status, code: answer.body?.error?.code }).toEqual({ label, status, code })
  expectProblem(answer, status, code)
  if (field !== undefined) expect({ label, fields: Object.keys(answer.body.error.fields ?? {}) }).toEqual({ label, fields: [field] })
}

/** Every row of every table the account's mail is stored in, to compare before and after refused changes. */
const storedMail = () =>
  h.query(`SELECT json_build_object(
    'messages', (SELECT json_agg(m ORDER BY m.id) FROM (SELECT id, alias_id, subject, trashed_at, trash_purge_at, expires_at, size_bytes FROM messages) m),
    'states', (SELECT json_agg(s ORDER BY s.message_id, s.account_id) FROM message_states s),
    'tags', (SELECT json_agg(t ORDER BY t.message_id, t.tag_id) FROM message_tags t),
    'raw', (SELECT json_agg(md5(r.raw) ORDER BY r.message_id) FROM message_raw r),
    'attachments', (SELECT count(*) FROM attachments),
    'preferences', (SELECT json_agg(p ORDER BY p.account_id, p.sender) FROM remote_image_preferences p)
  ) AS mail`).then((rows) => rows[0].mail)

const beyondInt4 = "2147483648"
const huge = "99999999999999999999"

describe("GET /messages: query parameters", () => {
  // [query string as sent, expected]
  const search: ReadonlyArray<readonly [string, Expected]> = [
    ["q=%22unbalanced", 200],
    ["q=%22%22", 200],
    ["q=%22", 200],
    ["q=-", 200],
    ["q=-%20--%20---", 200],
    ["q=tag%3A", 200],
    ["q=tag%3A%22", 200],
    ["q=tag%3Anope", 200],
    ["q=-tag%3A%22two%20words", 200],
    ["q=subject%3A%22", 200],
    ["q=is%3A%20has%3A%20from%3A%20to%3A", 200],
    ["q=is%3Aweird%20has%3Aweird", 200],
    ["q=before%3A", 200],
    ["q=before%3A9999-12-31%20after%3A0001-01-01", 200],
    ["q=before%3A2024-02-30", [422, "validation_failed", "q"]],
    ["q=after%3A0000-01-01", [422, "validation_failed", "q"]],
    ["q=after%3A-1", [422, "validation_failed", "q"]],
    ["q=before%3A2024-1-1", [422, "validation_failed", "q"]],
    ["q=-after%3A99999-01-01", [422, "validation_failed", "q"]],
    [`q=${"x".repeat(512)}`, 200],
    [`q=${"x".repeat(513)}`, [422, "validation_failed", "q"]],
    [`q=${"%F0%9F%94%A5".repeat(256)}`, 200],
    [`q=${"%F0%9F%94%A5".repeat(257)}`, [422, "validation_failed", "q"]],
    [`q=${Array.from({ length: 32 }, (_, i) => `w${i}`).join("+")}`, 200],
    [`q=${Array.from({ length: 33 }, (_, i) => `w${i}`).join("+")}`, [422, "validation_failed", "q"]],
    [`q=${"a+".repeat(200)}`, [422, "validation_failed", "q"]],
    ["q=kiwi%00", 200],
    ["q=%00", 200],
    ["q=from%3A%00", 200],
    ["q=tag%3A%00x", 200],
    ["q=%ED%A0%80", 200],
    ["q=%uD800", 200],
    ["q=kiwi%ED%A0%80%ED%B0%80", 200],
    ["q=%F0%9F%94%A5%20%F0%9F%91%8D", 200],
    ["q=%5C", 200],
    ["q=%5C%5C%20a%5Cb%20%5C%22", 200],
    ["q=%25", 200],
    ["q=_", 200],
    ["q=100%25", 200],
    ["q=%26%20%7C%20!%20%3A%20*%20(%20)%20%3C-%3E%20'", 200],
    ["q=kiwi%3A*", 200],
    ["q=!kiwi%20%26%20(a%20%7C%20b)", 200],
    ["q=a%3C-%3Eb%20a%3C2%3Eb", 200],
    ["q='kiwi'%3AA", 200],
    ["q=%22a%20%26%20b%22", 200],
    ["q=from%3A%25%20subject%3A_%20to%3A%5C", 200],
    ["q=%20%20%20", 200],
    ["q=%09%0A%0D", 200],
    ...urlWords.map((word): readonly [string, Expected] => [`q=${encodeURIComponent(word)}`, 200]),
    [`q=${encodeURIComponent("\"see http://example.com/a('b\" -x.org/a(b)!'c'd h.example/a\\'(b")}`, 200]
  ]

  it("q: odd syntax is searched as text; only a bad length, term count or date is refused, naming q", async () => {
    for (const [query, expected] of search) {
      for (const trashed of ["false", "true"]) {
        const path = `/messages?${query}&trashed=${trashed}`
        const answer = await h.request(path, { session: owner })
        expectAnswer(path, answer, expected)
        if (expected === 200) expectShape(MessagePage, answer.body)
      }
    }
  })

  it("q finds what it says: a URL word with a quote after ( or ! finds its message; % is no wildcard", async () => {
    for (const word of urlWords) {
      const answer = await h.request(`/messages?q=${encodeURIComponent(word)}`, { session: owner })
      expect({ word, status: answer.status, ids: answer.body.items?.map((m: { id: number }) => m.id) }).toEqual({ word, status: 200, ids: [plain] })
    }
    const percent = await h.request("/messages?q=subject%3A%25", { session: owner })
    expect({ status: percent.status, items: percent.body.items }).toEqual({ status: 200, items: [] })
  })

  it("dateFrom and dateTo take any RFC 3339 offset (up to ±23:59), to the microsecond", async () => {
    // The harness clock stamps every message with the same instant.
    const at = Date.parse((await h.request(`/messages/${plain}`, { session: owner })).body.receivedAt)
    /** `at` written at an offset of +23:59 or -23:59, plus `micros` microseconds. */
    const shifted = (sign: 1 | -1, micros: number) => {
      const local = new Date(at + sign * (23 * 60 + 59) * 60_000).toISOString().slice(0, 23)
      return `${local}${String(micros).padStart(3, "0")}${sign === 1 ? "+" : "-"}23:59`
    }
    const count = async (query: string) => {
      const answer = await h.request(`/messages?${query}`, { session: owner })
      expect(answer.status, `${query}: ${answer.text}`).toBe(200)
      return answer.body.total as number
    }
    for (const sign of [1, -1] as const) {
      expect(await count(`dateFrom=${encodeURIComponent(shifted(sign, 0))}`)).toBe(2)
      expect(await count(`dateFrom=${encodeURIComponent(shifted(sign, 1))}`)).toBe(0)
      expect(await count(`dateTo=${encodeURIComponent(shifted(sign, 0))}`)).toBe(2)
    }
  })

  const filters: ReadonlyArray<readonly [string, Expected]> = [
    ...["alias", "tag"].flatMap((name): ReadonlyArray<readonly [string, Expected]> => [
      [`${name}=0`, [422, "validation_failed", name]],
      [`${name}=-1`, [422, "validation_failed", name]],
      [`${name}=1.5`, [422, "validation_failed", name]],
      [`${name}=abc`, [422, "validation_failed", name]],
      [`${name}=`, [422, "validation_failed", name]],
      [`${name}=NaN`, [422, "validation_failed", name]],
      [`${name}=Infinity`, [422, "validation_failed", name]],
      [`${name}=${beyondInt4}`, 200],
      [`${name}=9999999999999`, 200],
      [`${name}=${huge}`, [422, "validation_failed", name]],
      // Decimal digits only: what JavaScript would also read as a number is not an id here.
      ...["1.0", "1e3", "%201", "%2B1", "0x10"].map((value): readonly [string, Expected] => [`${name}=${value}`, [422, "validation_failed", name]])
    ]),
    ["domain=", 200],
    ["domain=%00", 200],
    ["domain=%ED%A0%80", 200],
    ["domain=%25", 200],
    ["domain=%F0%9F%94%A5.example", 200],
    [`domain=${"d".repeat(253)}`, 200],
    [`domain=${"d".repeat(254)}`, [422, "validation_failed", "domain"]],
    ...["unread", "hasAttachment", "starred", "pinned", "archived", "trashed", "excludeShared"].flatMap((name) =>
      ["TRUE", "1", "", "yes", "null"].map((value): readonly [string, Expected] => [`${name}=${value}`, [422, "validation_failed", name]])
    ),
    ["limit=0", [422, "validation_failed", "limit"]],
    ["limit=101", [422, "validation_failed", "limit"]],
    ["limit=-1", [422, "validation_failed", "limit"]],
    ["limit=1.5", [422, "validation_failed", "limit"]],
    ["limit=1e1", [422, "validation_failed", "limit"]],
    ["limit=", [422, "validation_failed", "limit"]],
    ["limit=1&limit=2", [422, "validation_failed", "limit"]],
    ["alias=1&alias=2", [422, "validation_failed", "alias"]],
    ["q=a&q=b", [422, "validation_failed", "q"]],
    ["sort=NEWEST", [422, "validation_failed", "sort"]],
    ["sort=", [422, "validation_failed", "sort"]],
    ["dateFrom=2026-02-30T00:00:00Z", [422, "validation_failed", "dateFrom"]],
    ["dateFrom=2026-01-01", [422, "validation_failed", "dateFrom"]],
    ["dateFrom=", [422, "validation_failed", "dateFrom"]],
    ["dateTo=2026-01-01T24:00:00Z", [422, "validation_failed", "dateTo"]],
    ["dateTo=yesterday", [422, "validation_failed", "dateTo"]],
    ["dateFrom=0001-01-01T00:00:00%2B23:59", 200],
    ["dateTo=9999-12-31T23:59:59-23:59", 200],
    ["dateFrom=2026-01-01T00:00:00.123456789Z", 200],
    ["cursor=", [422, "validation_failed", "cursor"]],
    ["cursor=garbage", [422, "validation_failed", "cursor"]],
    ["cursor=.", [422, "validation_failed", "cursor"]],
    ["cursor=a.b.c", [422, "validation_failed", "cursor"]],
    ["cursor=%00.%00", [422, "validation_failed", "cursor"]],
    [`cursor=${"c".repeat(1025)}`, [422, "validation_failed", "cursor"]],
    ["unknown=1&another", 200],
    ["__proto__=1&constructor=x", 200]
  ]

  it("filters: an invalid value is a 422 naming its parameter; an odd but valid one a page", async () => {
    for (const [query, expected] of filters) {
      const path = `/messages?${query}`
      expectAnswer(path, await h.request(path, { token }), expected)
    }
  })
})

/** Path ids that are not a message of the caller. */
const badIds: ReadonlyArray<readonly [string, Expected]> = [
  ["0", [422, "validation_failed", "id"]],
  ["-1", [422, "validation_failed", "id"]],
  ["abc", [422, "validation_failed", "id"]],
  ["1.5", [422, "validation_failed", "id"]],
  ["1e3", [422, "validation_failed", "id"]],
  ["1.0", [422, "validation_failed", "id"]],
  ["0x10", [422, "validation_failed", "id"]],
  [beyondInt4, [404, "not_found"]],
  [huge, [422, "validation_failed", "id"]],
  ["%00", [422, "validation_failed", "id"]]
]

/** The reads of a message by its id. */
const reads = (id: string) => [`/messages/${id}`, `/messages/${id}/raw`, `/messages/${id}/html`]

/** A request of the change tables: a JSON body, or raw bytes with a content type. */
const json = (method: string, path: string, body: unknown) => ({ method, path, body })
const raw = (method: string, path: string, rawBody: string, contentType = "application/json") => ({
  method,
  path,
  rawBody,
  headers: { "content-type": contentType }
})
type Request = { method: string; path: string; body?: unknown; rawBody?: string; headers?: Record<string, string> }

describe("/messages/{id} and its subresources: ids and query values", () => {
  it("reads: a bad id is a 422 naming id, an unknown or a stranger's id a 404", async () => {
    for (const [id, expected] of [...badIds, [String(strangers), [404, "not_found"]] as const]) {
      for (const path of reads(id)) expectAnswer(path, await h.request(path, { token }), expected)
    }
  })

  it("attachments: bad message or attachment ids, and bad remote/confirm values", async () => {
    const cases: ReadonlyArray<readonly [string, Expected]> = [
      ...badIds.flatMap(([id, expected]): ReadonlyArray<readonly [string, Expected]> => {
        /** The same answer, naming the attachment route's own parameter instead of `id`. */
        const naming = (field: string): Expected => (expected !== 200 && expected[2] === "id" ? [422, "validation_failed", field] : expected)
        return [
          [`/messages/${id}/attachments/${attachmentId}`, naming("messageId")],
          [`/messages/${rich}/attachments/${id}`, naming("attachmentId")],
          [`/messages/${rich}/attachments/${id}/preview`, naming("attachmentId")]
        ]
      }),
      [`/messages/${strangers}/attachments/${attachmentId}`, [404, "not_found"]],
      [`/messages/${rich}/attachments/${attachmentId}?confirm=0`, [422, "validation_failed", "confirm"]],
      [`/messages/${rich}/attachments/${attachmentId}?confirm=yes`, [422, "validation_failed", "confirm"]],
      [`/messages/${rich}/attachments/${attachmentId}?confirm=1&confirm=1`, [422, "validation_failed", "confirm"]],
      [`/messages/${rich}/attachments/${attachmentId}?confirm=1`, 200],
      [`/messages/${rich}/html?remote=2`, [422, "validation_failed", "remote"]],
      [`/messages/${rich}/html?remote=true`, [422, "validation_failed", "remote"]],
      [`/messages/${rich}/html?remote=`, [422, "validation_failed", "remote"]],
      [`/messages/${rich}/html?remote=1&remote=0`, [422, "validation_failed", "remote"]],
      [`/messages/${rich}/html?remote=1`, 200],
      [`/messages/${plain}/html`, [404, "not_found"]]
    ]
    for (const [path, expected] of cases) expectAnswer(path, await h.request(path, { token }), expected)
  })
})

/** Refused changes: built when called, once the fixtures have their ids. */
const changeCases = (): ReadonlyArray<readonly [Request, Expected]> => [
  // PATCH /messages/{id}
  ...badIds.map(([id, expected]) => [json("PATCH", `/messages/${id}`, { isRead: true }), expected] as const),
  [json("PATCH", `/messages/${strangers}`, { isRead: true }), [404, "not_found"]],
  [json("PATCH", `/messages/${plain}`, { isRead: "yes" }), [422, "validation_failed", "isRead"]],
  [json("PATCH", `/messages/${plain}`, { isRead: 1 }), [422, "validation_failed", "isRead"]],
  [json("PATCH", `/messages/${plain}`, { starred: null }), [422, "validation_failed", "starred"]],
  [json("PATCH", `/messages/${plain}`, { isRead: true, extra: 1 }), [422, "validation_failed", "extra"]],
  [raw("PATCH", `/messages/${plain}`, "{\"isRead\":true,\"__proto__\":{\"x\":1}}"), [422, "validation_failed", "body"]],
  [json("PATCH", `/messages/${plain}`, { tagIds: [0] }), [422, "validation_failed", "tagIds.0"]],
  [json("PATCH", `/messages/${plain}`, { tagIds: [1.5] }), [422, "validation_failed", "tagIds.0"]],
  [json("PATCH", `/messages/${plain}`, { tagIds: ["1"] }), [422, "validation_failed", "tagIds.0"]],
  [json("PATCH", `/messages/${plain}`, { tagIds: [Number(beyondInt4)] }), [422, "validation_failed", "tagIds"]],
  [json("PATCH", `/messages/${plain}`, { tagIds: [1e20] }), [422, "validation_failed", "tagIds.0"]],
  [json("PATCH", `/messages/${plain}`, { tagIds: [1, 1] }), [422, "validation_failed", "tagIds"]],
  [json("PATCH", `/messages/${plain}`, { tagIds: Array.from({ length: 51 }, (_, i) => i + 1) }), [422, "validation_failed", "tagIds"]],
  [json("PATCH", `/messages/${plain}`, { tagIds: null }), [422, "validation_failed", "tagIds"]],
  [json("PATCH", `/messages/${plain}`, { tagIds: "1" }), [422, "validation_failed", "tagIds"]],
  [json("PATCH", `/messages/${plain}`, null), [422, "validation_failed", "body"]],
  [json("PATCH", `/messages/${plain}`, []), [422, "validation_failed", "body"]],
  [json("PATCH", `/messages/${plain}`, "isRead"), [422, "validation_failed", "body"]],
  [raw("PATCH", `/messages/${plain}`, "{\"isRead\": tru"), [422, "validation_failed", "body"]],
  [raw("PATCH", `/messages/${plain}`, ""), [422, "validation_failed", "body"]],
  [raw("PATCH", `/messages/${plain}`, `{"isRead":${"[".repeat(100_000)}${"]".repeat(100_000)}}`), [422, "validation_failed", "isRead"]],
  [raw("PATCH", `/messages/${plain}`, `{"isRead":true,"pad":"${"x".repeat(1024 * 1024)}"}`), [413, "payload_too_large"]],
  [raw("PATCH", `/messages/${plain}`, "{\"isRead\":true}", "text/plain"), [415, "unsupported_media_type"]],
  [raw("PATCH", `/messages/${plain}`, "isRead=true", "application/x-www-form-urlencoded"), [415, "unsupported_media_type"]],
  // POST /messages/bulk
  [json("POST", "/messages/bulk", { ids: [plain, plain], action: "delete" }), [422, "validation_failed", "ids"]],
  [json("POST", "/messages/bulk", { ids: [0], action: "delete" }), [422, "validation_failed", "ids.0"]],
  [json("POST", "/messages/bulk", { ids: [-1], action: "delete" }), [422, "validation_failed", "ids.0"]],
  [json("POST", "/messages/bulk", { ids: [], action: "delete" }), [422, "validation_failed", "ids"]],
  [json("POST", "/messages/bulk", { ids: Array.from({ length: 101 }, (_, i) => i + 1), action: "delete" }), [422, "validation_failed", "ids"]],
  [json("POST", "/messages/bulk", { ids: [String(plain)], action: "delete" }), [422, "validation_failed", "ids.0"]],
  [json("POST", "/messages/bulk", { ids: [1e20], action: "delete" }), [422, "validation_failed", "ids.0"]],
  [json("POST", "/messages/bulk", { ids: [plain, Number(beyondInt4)], action: "delete_forever" }), [404, "not_found"]],
  [json("POST", "/messages/bulk", { ids: [plain, strangers], action: "delete_forever" }), [404, "not_found"]],
  [json("POST", "/messages/bulk", { ids: plain, action: "delete" }), [422, "validation_failed", "ids"]],
  [json("POST", "/messages/bulk", { ids: null, action: "delete" }), [422, "validation_failed", "ids"]],
  [json("POST", "/messages/bulk", { action: "delete" }), [422, "validation_failed", "ids"]],
  [json("POST", "/messages/bulk", { ids: [plain], action: "explode" }), [422, "validation_failed", "action"]],
  [json("POST", "/messages/bulk", { ids: [plain], action: "DELETE" }), [422, "validation_failed", "action"]],
  [json("POST", "/messages/bulk", { ids: [plain], action: null }), [422, "validation_failed", "action"]],
  [json("POST", "/messages/bulk", { ids: [plain] }), [422, "validation_failed", "action"]],
  [json("POST", "/messages/bulk", { ids: [plain], action: "add_tag" }), [422, "validation_failed", "tagId"]],
  [json("POST", "/messages/bulk", { ids: [plain], action: "add_tag", tagId: 0 }), [422, "validation_failed", "tagId"]],
  [json("POST", "/messages/bulk", { ids: [plain], action: "add_tag", tagId: "1" }), [422, "validation_failed", "tagId"]],
  [json("POST", "/messages/bulk", { ids: [plain], action: "add_tag", tagId: 1e20 }), [422, "validation_failed", "tagId"]],
  [json("POST", "/messages/bulk", { ids: [plain], action: "add_tag", tagId: Number(beyondInt4) }), [422, "validation_failed", "tagId"]],
  [json("POST", "/messages/bulk", { ids: [plain], action: "remove_tag", tagId: Number(beyondInt4) }), [422, "validation_failed", "tagId"]],
  [json("POST", "/messages/bulk", { ids: [plain], action: "delete", extra: true }), [422, "validation_failed", "extra"]],
  [raw("POST", "/messages/bulk", "{\"ids\": [1,"), [422, "validation_failed", "body"]],
  [raw("POST", "/messages/bulk", "{\"ids\":[1],\"action\":\"delete\"}", "text/plain"), [415, "unsupported_media_type"]],
  // DELETE, restore, empty trash, remote-image preference
  ...badIds.map(([id, expected]) => [{ method: "DELETE", path: `/messages/${id}` }, expected] as const),
  ...badIds.map(([id, expected]) => [{ method: "POST", path: `/messages/${id}/restore` }, expected] as const),
  [{ method: "DELETE", path: `/messages/${strangers}?permanent=1` }, [404, "not_found"]],
  [{ method: "DELETE", path: `/messages/${plain}?permanent=maybe` }, [422, "validation_failed", "permanent"]],
  [{ method: "DELETE", path: `/messages/${plain}?permanent=TRUE` }, [422, "validation_failed", "permanent"]],
  [{ method: "DELETE", path: `/messages/${plain}?permanent=` }, [422, "validation_failed", "permanent"]],
  [{ method: "DELETE", path: `/messages/${plain}?permanent=1&permanent=1` }, [422, "validation_failed", "permanent"]],
  [{ method: "POST", path: "/messages/trash/empty?alias=0" }, [422, "validation_failed", "alias"]],
  [{ method: "POST", path: "/messages/trash/empty?alias=abc" }, [422, "validation_failed", "alias"]],
  [{ method: "POST", path: "/messages/trash/empty?alias=" }, [422, "validation_failed", "alias"]],
  [{ method: "POST", path: `/messages/trash/empty?alias=${huge}` }, [422, "validation_failed", "alias"]],
  [{ method: "POST", path: `/messages/trash/empty?alias=${beyondInt4}` }, [404, "not_found"]],
  [{ method: "POST", path: "/messages/trash/empty?alias=1&alias=2" }, [422, "validation_failed", "alias"]],
  ...badIds.map(([id, expected]) => [json("PUT", `/messages/${id}/remote-images/preference`, { alwaysLoad: true }), expected] as const),
  [json("PUT", `/messages/${strangers}/remote-images/preference`, { alwaysLoad: true }), [404, "not_found"]],
  [json("PUT", `/messages/${rich}/remote-images/preference`, { alwaysLoad: "true" }), [422, "validation_failed", "alwaysLoad"]],
  [json("PUT", `/messages/${rich}/remote-images/preference`, { alwaysLoad: null }), [422, "validation_failed", "alwaysLoad"]],
  [json("PUT", `/messages/${rich}/remote-images/preference`, {}), [422, "validation_failed", "alwaysLoad"]],
  [json("PUT", `/messages/${rich}/remote-images/preference`, { alwaysLoad: true, sender: "x@y.z" }), [422, "validation_failed", "sender"]],
  [json("PUT", `/messages/${rich}/remote-images/preference`, null), [422, "validation_failed", "body"]],
  [raw("PUT", `/messages/${rich}/remote-images/preference`, "{alwaysLoad:true}"), [422, "validation_failed", "body"]],
  [raw("PUT", `/messages/${rich}/remote-images/preference`, "{\"alwaysLoad\":true}", "text/plain"), [415, "unsupported_media_type"]],
  // Methods the paths do not have
  [{ method: "PUT", path: `/messages/${plain}` }, [405, "method_not_allowed"]],
  [{ method: "GET", path: "/messages/bulk" }, [422, "validation_failed", "id"]],
  [{ method: "DELETE", path: "/messages" }, [405, "method_not_allowed"]]
]

describe("changes: refused requests change nothing", () => {
  let before: unknown
  beforeAll(async () => {
    before = await storedMail()
  })

  it("every refused change is a Problem, and stored mail is unchanged after all of them", async () => {
    for (const [request, expected] of changeCases()) {
      const label = `${request.method} ${request.path} ${(request.rawBody ?? JSON.stringify(request.body) ?? "").slice(0, 120)}`
      const answer = await h.request(request.path, { ...request, session: owner })
      expectAnswer(label, answer, expected)
    }
    expect(await storedMail()).toEqual(before)
  })
})
