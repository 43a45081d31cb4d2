/**
 * Mail stored before migration 0028 (issue #36 item 7): raw bytes as received, a webhook
 * text_body copy in every row, the HTML as received beside its renderings. `burnbox admin storage compact` converts it while the service
 * runs, a batch per transaction, resumable; old and new rows read the same at every moment.
 */
import { claimAlias, fakeMailRequest, type Harness, injectMail, processed, type Session, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let owner: Session
let ids: Array<number> = []
let htmlOnly: number
const htmlOf = new Map<number, string>()

beforeAll(async () => {
  h = await startHarness({ webhookAllowPrivate: true }, undefined, { seed: 7528 })
  owner = await h.signup({ plan: "pro" })
  const alias = await claimAlias(h, { session: owner })
  for (let i = 0; i < 5; i++) {
    const request = fakeMailRequest({ subject: `old ${i}`, code: `90${i}123`, html: i % 2 === 0 })
    const id = await injectMail(h, { session: owner }, alias.id, request)
    if (request.html !== null) htmlOf.set(id, request.html!)
    ids.push(id)
  }
  const request = fakeMailRequest({ subject: "html only", text: null, html: "<p>Only <b>HTML</b> here</p>" })
  htmlOnly = await injectMail(h, { session: owner }, alias.id, request)
  htmlOf.set(htmlOnly, request.html!)
  ids.push(htmlOnly)
  ids = ids.sort((a, b) => a - b)
  for (const id of ids) await processed(h, { session: owner }, id)
})
afterAll(() => h.close())

/** What a reader gets of each message: detail, raw bytes and HTML, as bytes. */
const responses = async () => {
  const out: Array<string> = []
  for (const id of ids) {
    for (const path of [`/messages/${id}`, `/messages/${id}/raw`, `/messages/${id}/html`]) {
      const response = await fetch(`${h.baseUrl}${path}`, { headers: { cookie: `service_session=${owner.cookie}` } })
      out.push(`${path} ${response.status} ${Buffer.from(await response.arrayBuffer()).toString("base64")}`)
    }
  }
  return out
}

/** Each message's raw row and webhook text_body copy, as stored. */
const stored = async () =>
  Promise.all(ids.map(async (id) => {
    const [row] = await h.query<{ webhook_text_body: string | null; html_original: string | null }>(
      "SELECT webhook_text_body, html_original FROM messages WHERE id = $1", [id])
    const raw = (await h.storedRaw(id))!
    return { id, zstd: raw.zstd, storedBytes: raw.storedBytes, size: raw.raw.byteLength, webhookText: row!.webhook_text_body, html: row!.html_original }
  }))

describe("the conversion of mail stored before migration 0028", () => {
  it("is stored compressed, without the webhook text copy its text part makes again", async () => {
    const rows = await stored()
    expect(rows.every((r) => r.zstd)).toBe(true)
    expect(rows.filter((r) => r.webhookText !== null).map((r) => r.id)).toEqual([htmlOnly])
    expect(rows.every((r) => r.html === null)).toBe(true)
  })

  it("converts old-format rows in resumable batches while every response stays the same", async () => {
    const fresh = await responses()
    // The same mail as the code before #36 stored it: raw bytes as received, a text_body copy in every row.
    for (const id of ids) {
      const raw = (await h.storedRaw(id))!.raw
      await h.query("UPDATE message_raw SET raw = $2, zstd = false WHERE message_id = $1", [id, raw])
    }
    for (const [id, html] of htmlOf) await h.query("UPDATE messages SET html_original = $2 WHERE id = $1", [id, html])
    await h.query(`
      UPDATE messages SET webhook_text_body = regexp_replace(replace(text_body, E'\\r\\n', E'\\n'), '[\\x01-\\x08\\x0b-\\x1f\\x7f]', '', 'g')
      WHERE id = ANY($1::int4[]) AND webhook_text_body IS NULL`, [ids])
    await h.query("UPDATE storage_compaction SET up_to = $1, after_id = 0, raws_compressed = 0, raw_bytes_before = 0, raw_bytes_after = 0, texts_dropped = 0, started_at = NULL, finished_at = NULL", [ids[ids.length - 1]])
    const old = await stored()
    expect(old.every((r) => !r.zstd && r.webhookText !== null)).toBe(true)
    expect(old.filter((r) => r.html !== null).map((r) => r.id)).toEqual([...htmlOf.keys()].sort((a, b) => a - b))
    expect(await responses()).toEqual(fresh)

    const before = await h.cli(["admin", "storage", "status"])
    expect(before.code, before.stderr).toBe(0)
    expect(before.json).toMatchObject({ afterId: 0, done: false, rawsRemaining: ids.length, rawsCompressed: 0, finishedAt: null })

    // Two batches of two messages, then stopped: a part converted, the rest as it was.
    const partly = await h.cli(["admin", "storage", "compact", "--batch", "2", "--batches", "2"])
    expect(partly.code, partly.stderr).toBe(0)
    expect(partly.json).toMatchObject({ afterId: ids[3], done: false, rawsCompressed: 4, rawsRemaining: ids.length - 4 })
    expect((await stored()).map((r) => r.zstd)).toEqual(ids.map((_, i) => i < 4))
    expect(await responses()).toEqual(fresh)

    // Resumed where it stopped, to the end.
    const rest = await h.cli(["admin", "storage", "compact", "--batch", "2"])
    expect(rest.code, rest.stderr).toBe(0)
    expect(rest.json).toMatchObject({
      afterId: ids[ids.length - 1],
      done: true,
      rawsRemaining: 0,
      rawsCompressed: ids.length,
      textsDropped: ids.length - 1,
      htmlOriginalsDropped: htmlOf.size
    })
    expect(rest.json.rawBytesAfter).toBeLessThan(rest.json.rawBytesBefore)
    expect(rest.json.finishedAt).not.toBeNull()
    const converted = await stored()
    expect(converted.every((r) => r.zstd)).toBe(true)
    // The HTML-only message keeps its text_body: made from the HTML, it needs the parser.
    expect(converted.filter((r) => r.webhookText !== null).map((r) => r.id)).toEqual([htmlOnly])
    expect(converted.every((r) => r.html === null)).toBe(true)
    expect(await responses()).toEqual(fresh)

    // Done: another run changes nothing.
    const again = await h.cli(["admin", "storage", "compact"])
    expect(again.json).toMatchObject({ done: true, rawsCompressed: ids.length })
  })
})

describe("the events dispatched before migration 0035", () => {
  it("that no endpoint received are deleted in resumable batches; those with a delivery or still queued stay, and every answer stays the same", async () => {
    const endpoint = await h.request("/webhooks", { method: "POST", session: owner, body: { name: "old", url: "https://127.0.0.1:9/hook", subscription: { mode: "all" } } })
    expect(endpoint.status, endpoint.text).toBe(201)
    const webhookId = endpoint.body.webhook?.id ?? endpoint.body.id
    // As dispatch left them before: three events without a delivery, one with, one still queued.
    const eventIds = [1, 2, 3, 4, 5].map((n) => `evt_${"0".repeat(25)}${n}`)
    for (const id of eventIds) {
      await h.query("INSERT INTO events (id, account_id, type, time, data) VALUES ($1, $2, 'alias.claimed', now() - interval '40 days', '{}')", [id, owner.accountId])
    }
    await h.query("DELETE FROM events_pending WHERE id = ANY($1::text[])", [eventIds.slice(0, 4)])
    await h.query(
      `INSERT INTO webhook_deliveries (webhook_id, account_id, event_id, event_type, payload, next_attempt_at, created_at)
       VALUES ($1, $2, $3, 'alias.claimed', '\\x7b7d', now(), now())`,
      [webhookId, owner.accountId, eventIds[3]]
    )
    const queuedBefore = await h.query<{ n: number }>("SELECT count(*)::int AS n FROM events_pending")
    await h.query("UPDATE storage_compaction SET events_up_to = (SELECT max(id) FROM events), events_after_id = '', events_deleted = 0, finished_at = NULL")
    const deliveries = async () => {
      const response = await fetch(`${h.baseUrl}/webhooks/${webhookId}/deliveries`, { headers: { cookie: `service_session=${owner.cookie}` } })
      return `${response.status} ${await response.text()}`
    }
    const fresh = [await responses(), await deliveries()]
    expect(fresh[1]).toMatch(new RegExp(`^200 .*"eventId":"${eventIds[3]}"`))
    const left = async () => (await h.query<{ id: string }>("SELECT id FROM events WHERE id = ANY($1::text[]) ORDER BY id", [eventIds])).map((r) => r.id)

    const before = await h.cli(["admin", "storage", "status"])
    expect(before.json).toMatchObject({ done: false, eventsDone: false, eventsAfterId: "", eventsDeleted: 0 })

    // One batch of two events, then stopped.
    const partly = await h.cli(["admin", "storage", "compact", "--batch", "2", "--batches", "1"])
    expect(partly.code, partly.stderr).toBe(0)
    expect(partly.json).toMatchObject({ done: false, eventsDone: false, eventsAfterId: eventIds[1], eventsDeleted: 2, finishedAt: null })
    expect(await left()).toEqual(eventIds.slice(2))
    expect([await responses(), await deliveries()]).toEqual(fresh)

    // Resumed where it stopped, to the end.
    const rest = await h.cli(["admin", "storage", "compact", "--batch", "2"])
    expect(rest.code, rest.stderr).toBe(0)
    expect(rest.json).toMatchObject({ done: true, eventsDone: true, eventsDeleted: 3 })
    expect(rest.json.finishedAt).not.toBeNull()
    expect(await left()).toEqual([eventIds[3], eventIds[4]])
    expect(await h.query<{ n: number }>("SELECT count(*)::int AS n FROM events_pending")).toEqual(queuedBefore)
    expect([await responses(), await deliveries()]).toEqual(fresh)
  })
})
