/**
 * Mail rules (decisions.md "Mail rules", issue #34): GET/POST/PATCH/DELETE /rules, the
 * mailRuleCount cap and a downgrade, every field rule's 422, and the pipeline's rules step for
 * test mail and SMTP mail alike: each match field and action, order and `stop`, a deleted tag,
 * guests' marks untouched, a `tag`-mode webhook and a `tag:` search that see the rule's tags.
 */
import { Rule, RuleList } from "@burnbox/domain"
import {
  claimAlias,
  type DeliveryWorker,
  detail,
  deliver,
  expectProblem,
  expectShape,
  fakeMail,
  type Harness,
  listIds,
  sendMail,
  type Session,
  shareMailbox,
  startDeliveryWorker,
  startHarness
} from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let worker: DeliveryWorker
beforeAll(async () => {
  h = await startHarness({ webhookAllowPrivate: true }, undefined, { seed: 3434 })
  worker = await startDeliveryWorker(h)
})
afterAll(async () => {
  await worker.close()
  await h.close()
})

const createRule = async (session: Session, body: Record<string, unknown>) => {
  const answer = await h.request("/rules", { method: "POST", session, body })
  expect(answer.status, answer.text).toBe(201)
  return expectShape(Rule, answer.body)
}

const createTag = async (session: Session, name: string) => {
  const answer = await h.request("/tags", { method: "POST", session, body: { name } })
  expect(answer.status, answer.text).toBe(201)
  return answer.body.id as number
}

/** A pro account with one alias. */
const mailbox = async (plan: "premium" | "pro" = "pro") => {
  const session = await h.signup({ plan })
  const alias = await claimAlias(h, { session })
  return { session, alias }
}

const tagNames = (message: { readonly tags: ReadonlyArray<{ readonly name: string }> }) => message.tags.map((t) => t.name).sort()

describe("the /rules resource", () => {
  it("creates, lists in position order, changes and deletes a rule; GET answers the plan's limit", async () => {
    const { session } = await mailbox()
    const tag = await createTag(session, "shop")
    const second = await createRule(session, { name: "second", position: 5, actions: [{ type: "star" }] })
    const first = await createRule(session, {
      name: "Shop mail",
      position: 1,
      match: { from: "shop.example", hasOtp: true },
      actions: [{ type: "tag", tagId: tag }, { type: "mark_read" }],
      stop: true
    })
    expect(first).toMatchObject({
      name: "Shop mail",
      enabled: true,
      position: 1,
      aliasId: null,
      match: { from: "shop.example", hasOtp: true },
      actions: [{ type: "tag", tagId: tag }, { type: "mark_read" }],
      stop: true
    })
    expect(Object.keys(first).sort()).toEqual(["actions", "aliasId", "createdAt", "enabled", "id", "match", "name", "position", "stop", "updatedAt"])
    const list = expectShape(RuleList, (await h.request("/rules", { session })).body)
    expect(list.items.map((r) => r.id)).toEqual([first.id, second.id])
    expect(list.limit).toBe(50)

    const patched = await h.request(`/rules/${second.id}`, { method: "PATCH", session, body: { position: 0, enabled: false, match: { subject: "Invoice" } } })
    expect(patched.status, patched.text).toBe(200)
    expect(patched.body).toMatchObject({ id: second.id, name: "second", position: 0, enabled: false, match: { subject: "Invoice" }, actions: [{ type: "star" }] })
    expect((await h.request<{ items: Array<{ id: number }> }>("/rules", { session })).body.items.map((r) => r.id)).toEqual([second.id, first.id])

    expect((await h.request(`/rules/${second.id}`, { method: "DELETE", session })).status).toBe(204)
    expectProblem(await h.request(`/rules/${second.id}`, { method: "DELETE", session }), 404, "not_found")
    expectProblem(await h.request(`/rules/${second.id}`, { method: "PATCH", session, body: { name: "x" } }), 404, "not_found")
    // Another account's rule is not found either.
    const { session: stranger } = await mailbox()
    expectProblem(await h.request(`/rules/${first.id}`, { method: "PATCH", session: stranger, body: { name: "x" } }), 404, "not_found")
    expect((await h.request("/rules", { session: stranger })).body.items).toEqual([])
  })

  it("takes a bearer token with manage-aliases; read lists only", async () => {
    const { session } = await mailbox()
    const manage = await h.createToken(session, ["manage-aliases"])
    const read = await h.createToken(session, ["read"])
    const created = await h.request("/rules", { method: "POST", token: manage, body: { name: "by token", actions: [{ type: "archive" }] } })
    expect(created.status, created.text).toBe(201)
    expect((await h.request("/rules", { token: read })).body.items.map((r: { id: number }) => r.id)).toEqual([created.body.id])
    expect((await h.request("/rules", { method: "POST", token: read, body: { name: "no", actions: [{ type: "star" }] } })).status).toBe(403)
    expect((await h.request(`/rules/${created.body.id}`, { method: "DELETE", token: read })).status).toBe(403)
  })

  it("answers every field rule with 422 naming the field", async () => {
    const { session } = await mailbox()
    const { session: stranger, alias: strangersAlias } = await mailbox()
    const strangersTag = await createTag(stranger, "theirs")
    const ok = { name: "x", actions: [{ type: "star" }] }
    const cases: Array<[Record<string, unknown>, Record<string, string>]> = [
      [{ ...ok, name: "" }, { name: "too_short" }],
      [{ ...ok, name: "x".repeat(81) }, { name: "too_long" }],
      [{ actions: ok.actions }, { name: "required" }],
      [{ name: "x" }, { actions: "required" }],
      [{ ...ok, actions: [] }, { actions: "too_short" }],
      [{ ...ok, actions: Array.from({ length: 6 }, () => ({ type: "star" })) }, { actions: "too_long" }],
      [{ ...ok, position: -1 }, { position: "too_small" }],
      [{ ...ok, position: 1.5 }, { position: "invalid_type" }],
      [{ ...ok, enabled: "yes" }, { enabled: "invalid_type" }],
      [{ ...ok, stop: 1 }, { stop: "invalid_type" }],
      [{ ...ok, aliasId: 0 }, { aliasId: "too_small" }],
      [{ ...ok, match: { from: "" } }, { "match.from": "too_short" }],
      [{ ...ok, match: { subject: "s".repeat(201) } }, { "match.subject": "too_long" }],
      [{ ...ok, match: { body: 7 } }, { "match.body": "invalid_type" }],
      [{ ...ok, match: { hasOtp: "true" } }, { "match.hasOtp": "invalid_type" }],
      [{ ...ok, match: { cc: "x" } }, { "match.cc": "unknown_field" }],
      [{ ...ok, colour: "red" }, { colour: "unknown_field" }],
      [{ ...ok, aliasId: strangersAlias.id }, { aliasId: "unknown_alias" }],
      [{ ...ok, actions: [{ type: "tag", tagId: strangersTag }] }, { actions: "unknown_tag" }]
    ]
    for (const [body, fields] of cases) {
      const answer = await h.request("/rules", { method: "POST", session, body })
      expectProblem(answer, 422, "validation_failed")
      expect(answer.body.error.fields, JSON.stringify(body)).toEqual(fields)
    }
    for (const actions of [[{ type: "explode" }], [{ type: "tag" }], [{ type: "tag", tagId: "1" }]]) {
      const answer = await h.request("/rules", { method: "POST", session, body: { ...ok, actions } })
      expectProblem(answer, 422, "validation_failed")
      expect(Object.keys(answer.body.error.fields).every((field) => field.startsWith("actions")), answer.text).toBe(true)
    }
    const rule = await createRule(session, ok)
    const patch = await h.request(`/rules/${rule.id}`, { method: "PATCH", session, body: { name: "", match: { to: "" } } })
    expectProblem(patch, 422, "validation_failed")
    expect(patch.body.error.fields).toEqual({ name: "too_short", "match.to": "too_short" })
    expect(await h.query("SELECT count(*)::int AS n FROM mail_rules WHERE account_id = $1", [session.accountId])).toEqual([{ n: 1 }])
  })
})

describe("the mailRuleCount cap", () => {
  it("refuses a rule over the plan's cap with 409; free has none", async () => {
    const { session } = await mailbox("premium")
    for (let i = 0; i < 10; i++) await createRule(session, { name: `r${i}`, actions: [{ type: "star" }] })
    expectProblem(await h.request("/rules", { method: "POST", session, body: { name: "eleventh", actions: [{ type: "star" }] } }), 409, "rule_limit_reached")
    const free = await h.signup({ plan: "free" })
    expectProblem(await h.request("/rules", { method: "POST", session: free, body: { name: "one", actions: [{ type: "star" }] } }), 409, "rule_limit_reached")
    expect((await h.request("/rules", { session: free })).body).toEqual({ items: [], limit: 0 })
  })

  it("a downgrade keeps every rule and runs the first mailRuleCount in position order; an upgrade runs them all again", async () => {
    const { session, alias } = await mailbox("pro")
    const tags: Array<number> = []
    // Written out of position order: rule k (position k) tags "k".
    for (const k of [11, 3, 0, 7, 10, 1, 2, 4, 5, 6, 8, 9]) {
      tags[k] = await createTag(session, `p${k}`)
      await createRule(session, { name: `rule ${k}`, position: k, actions: [{ type: "tag", tagId: tags[k] }] })
    }
    await h.changePlan(session.accountId, "premium")
    expect((await h.request("/rules", { session })).body.items).toHaveLength(12)
    // Test mail is Pro's: premium mail comes over SMTP.
    const capped = await sendMail(h, alias.address, fakeMail({ to: alias.address, subject: "after the downgrade" }))
    expect(tagNames(await detail(h, { session }, capped))).toEqual(Array.from({ length: 10 }, (_, k) => `p${k}`).sort())
    expectProblem(await h.request("/rules", { method: "POST", session, body: { name: "more", actions: [{ type: "star" }] } }), 409, "rule_limit_reached")

    // Deleting a running rule lets the next one in position order run.
    const list = (await h.request<{ items: Array<{ id: number; position: number }> }>("/rules", { session })).body.items
    expect((await h.request(`/rules/${list.find((r) => r.position === 0)!.id}`, { method: "DELETE", session })).status).toBe(204)
    const afterDelete = await sendMail(h, alias.address, fakeMail({ to: alias.address, subject: "after a delete" }))
    expect(tagNames(await detail(h, { session }, afterDelete))).toEqual(Array.from({ length: 10 }, (_, k) => `p${k + 1}`).sort())

    await h.changePlan(session.accountId, "pro")
    const [upgraded] = await deliver(h, { session }, alias.id, 1, { subject: "after the upgrade" })
    expect(tagNames(await detail(h, { session }, upgraded!))).toHaveLength(11)
  })
})

describe("the pipeline's rules step", () => {
  it("matches each field case-insensitively: from, to, subject, body, hasAttachment, hasOtp; all conditions must hold", async () => {
    const { session, alias } = await mailbox()
    const field = async (name: string, match: Record<string, unknown>) => {
      await createRule(session, { name, match, actions: [{ type: "tag", tagId: await createTag(session, name) }] })
    }
    await field("from", { from: "SHOP.example" })
    await field("to", { to: alias.address.split("@")[0]!.toUpperCase() })
    await field("subject", { subject: "invoice" })
    await field("body", { body: "TRACKING NUMBER" })
    await field("attachment", { hasAttachment: true })
    await field("no-attachment", { hasAttachment: false })
    await field("otp", { hasOtp: true })
    await field("all", { from: "shop.example", subject: "invoice", hasOtp: true })
    const other = (await claimAlias(h, { session })).id

    const [plain] = await deliver(h, { session }, alias.id, 1, { from: "Friend <friend@mail.example>", subject: "Hi", text: "nothing here" })
    expect(tagNames(await detail(h, { session }, plain!))).toEqual(["no-attachment", "to"])
    const [shop] = await deliver(h, { session }, other, 1, {
      from: "Shop <orders@shop.example>",
      subject: "Your INVOICE",
      text: "Your tracking number is 1Z999. Code 482913."
    })
    expect(tagNames(await detail(h, { session }, shop!))).toEqual(["all", "body", "from", "no-attachment", "otp", "subject"])
    const [attached] = await deliver(h, { session }, other, 1, {
      subject: "file",
      text: "see attached",
      attachments: [{ filename: "a.txt", contentType: "text/plain", contentBase64: Buffer.from("hello").toString("base64") }]
    })
    expect(tagNames(await detail(h, { session }, attached!))).toEqual(["attachment"])
  })

  it("sets each action on the owner's marks: tag, star, pin, archive, mark_read, trash", async () => {
    const { session, alias } = await mailbox()
    const tag = await createTag(session, "ruled")
    await createRule(session, { name: "marks", match: { subject: "marks" }, actions: [{ type: "tag", tagId: tag }, { type: "star" }, { type: "pin" }, { type: "mark_read" }] })
    await createRule(session, { name: "archive", match: { subject: "archive me" }, actions: [{ type: "archive" }] })
    await createRule(session, { name: "trash", match: { subject: "trash me" }, actions: [{ type: "trash" }] })

    const [marked, archived, trashed] = [
      ...await deliver(h, { session }, alias.id, 1, { subject: "marks" }),
      ...await deliver(h, { session }, alias.id, 1, { subject: "archive me" }),
      ...await deliver(h, { session }, alias.id, 1, { subject: "trash me" })
    ]
    expect(await detail(h, { session }, marked!)).toMatchObject({ isRead: true, starred: true, pinned: true, archived: false, tags: [{ id: tag, name: "ruled" }] })
    expect(await detail(h, { session }, archived!)).toMatchObject({ isRead: false, archived: true, starred: false, pinned: false })
    const trashedDetail = await detail(h, { session }, trashed!)
    expect(trashedDetail.trashedAt).not.toBeNull()
    expect(trashedDetail.trashPurgeAt).not.toBeNull()

    expect((await listIds(h, { session })).ids).toEqual([marked])
    expect((await listIds(h, { session }, "?archived=true")).ids).toEqual([archived])
    expect((await listIds(h, { session }, "?trashed=true")).ids).toEqual([trashed])
    // The alias counts the owner's unread mail outside the trash: only the archived one.
    const aliases = (await h.request<{ items: Array<{ id: number; unreadCount: number }> }>("/aliases", { session })).body.items
    expect(aliases.find((a) => a.id === alias.id)!.unreadCount).toBe(1)
    await h.worker.foldCounts()
    const [counts] = await h.query("SELECT in_mailbox, archived, trashed FROM mailbox_counts WHERE account_id = $1", [session.accountId])
    expect(counts).toEqual({ in_mailbox: 2, archived: 1, trashed: 1 })
  })

  it("skips a pin past maxPinned and a trash on a plan without a trash, and does the rest", async () => {
    const { session, alias } = await mailbox()
    await h.query(`UPDATE accounts SET overrides = '{"maxPinned": 1, "trashRetentionDays": 0}' WHERE id = $1`, [session.accountId])
    await createRule(session, { name: "pin, trash and star", actions: [{ type: "pin" }, { type: "trash" }, { type: "star" }] })
    const [first] = await deliver(h, { session }, alias.id, 1, { subject: "first" })
    const [second] = await deliver(h, { session }, alias.id, 1, { subject: "second" })
    expect(await detail(h, { session }, first!)).toMatchObject({ pinned: true, starred: true, trashedAt: null })
    expect(await detail(h, { session }, second!)).toMatchObject({ pinned: false, starred: true, trashedAt: null })
  })

  it("walks rules in position order: a matching rule with stop ends the walk; a disabled one or one for another alias never runs", async () => {
    const { session, alias } = await mailbox()
    const other = await claimAlias(h, { session })
    const tag = async (name: string) => [{ type: "tag", tagId: await createTag(session, name) }]
    await createRule(session, { name: "late", position: 30, actions: await tag("late") })
    await createRule(session, { name: "stopper", position: 20, match: { subject: "stop" }, actions: await tag("stopper"), stop: true })
    await createRule(session, { name: "stop elsewhere", position: 10, match: { subject: "never" }, actions: await tag("unmatched"), stop: true })
    await createRule(session, { name: "early", position: 0, actions: await tag("early") })
    await createRule(session, { name: "off", position: 1, enabled: false, actions: await tag("off") })
    await createRule(session, { name: "other alias", position: 2, aliasId: other.id, actions: await tag("other") })

    const [stopped] = await deliver(h, { session }, alias.id, 1, { subject: "please stop" })
    expect(tagNames(await detail(h, { session }, stopped!))).toEqual(["early", "stopper"])
    const [walked] = await deliver(h, { session }, alias.id, 1, { subject: "go on" })
    expect(tagNames(await detail(h, { session }, walked!))).toEqual(["early", "late"])
    const [elsewhere] = await deliver(h, { session }, other.id, 1, { subject: "go on" })
    expect(tagNames(await detail(h, { session }, elsewhere!))).toEqual(["early", "late", "other"])
  })

  it("skips a rule's deleted tag and still does the rest; changing a rule does not touch stored mail", async () => {
    const { session, alias } = await mailbox()
    const kept = await createTag(session, "kept")
    const gone = await createTag(session, "gone")
    const rule = await createRule(session, { name: "two tags", actions: [{ type: "tag", tagId: gone }, { type: "tag", tagId: kept }, { type: "star" }] })
    expect((await h.request(`/tags/${gone}`, { method: "DELETE", session })).status).toBe(204)
    const [id] = await deliver(h, { session }, alias.id, 1)
    expect(await detail(h, { session }, id!)).toMatchObject({ starred: true, tags: [{ id: kept, name: "kept" }] })
    expect((await h.request(`/rules/${rule.id}`, { method: "PATCH", session, body: { actions: [{ type: "archive" }] } })).status).toBe(200)
    expect(await detail(h, { session }, id!)).toMatchObject({ starred: true, archived: false, tags: [{ id: kept, name: "kept" }] })
  })

  it("runs on SMTP mail like on test mail, and a tag: search finds the message once it is processed", async () => {
    const { session, alias } = await mailbox()
    await createTag(session, "decoy")
    const tag = await createTag(session, "smtp-ruled")
    await createRule(session, { name: "smtp", match: { from: "shop.example", subject: "verification" }, actions: [{ type: "tag", tagId: tag }] })
    const id = await sendMail(h, alias.address, fakeMail({ to: alias.address, code: "482913" }))
    expect(tagNames(await detail(h, { session }, id))).toEqual(["smtp-ruled"])
    expect((await listIds(h, { session }, "?q=tag:smtp-ruled")).ids).toEqual([id])
    expect((await listIds(h, { session }, "?q=tag:decoy")).ids).toEqual([])
  })

  it("sets only the owner's marks, never a guest's", async () => {
    const { session: owner, alias } = await mailbox()
    const guest = await h.signup({ plan: "pro" })
    await shareMailbox(h, { session: owner }, { session: guest }, { aliasId: alias.id, email: guest.email, role: "collaborator" })
    const tag = await createTag(owner, "owners")
    await createRule(owner, { name: "owner's", actions: [{ type: "tag", tagId: tag }, { type: "mark_read" }, { type: "star" }] })
    await createRule(guest, { name: "guest's rule does not reach the owner's mailbox", actions: [{ type: "pin" }] })
    const [id] = await deliver(h, { session: owner }, alias.id, 1)
    expect(await detail(h, { session: owner }, id!)).toMatchObject({ isRead: true, starred: true, pinned: false, tags: [{ id: tag }] })
    expect(await detail(h, { session: guest }, id!)).toMatchObject({ isRead: false, starred: false, pinned: false, tags: [] })
    expect(await h.query("SELECT account_id FROM message_states WHERE message_id = $1", [id])).toEqual([{ account_id: owner.accountId }])
  })

  it("keeps the alias's unreadCount equal to a plain count through rules, a guest's reads, trash, restore, a permanent delete and the fold", async () => {
    const { session: owner, alias } = await mailbox()
    const guest = await h.signup({ plan: "pro" })
    await shareMailbox(h, { session: owner }, { session: guest }, { aliasId: alias.id, email: guest.email, role: "collaborator" })
    await createRule(owner, { name: "receipts", match: { subject: "receipt" }, actions: [{ type: "mark_read" }] })
    await createRule(owner, { name: "junk", match: { subject: "junk" }, actions: [{ type: "trash" }] })
    const plain = async () => {
      const [row] = await h.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM messages m WHERE m.alias_id = $1 AND m.trashed_at IS NULL
           AND NOT EXISTS (SELECT 1 FROM message_states s WHERE s.message_id = m.id AND s.account_id = m.account_id AND s.is_read)`,
        [alias.id]
      )
      return row!.n
    }
    const expectExact = async (expected: number) => {
      const items = (await h.request<{ items: Array<{ id: number; unreadCount: number }> }>("/aliases", { session: owner })).body.items
      expect([items.find((a) => a.id === alias.id)!.unreadCount, await plain()]).toEqual([expected, expected])
    }
    const act = async (path: string, method: string, body?: Record<string, unknown>, session = owner) => {
      const answer = await h.request(path, { method, session, ...(body === undefined ? {} : { body }) })
      expect(answer.status, answer.text).toBeLessThan(300)
    }

    const [receipt, hello, otherReceipt, otherHello, junk] = [
      ...await deliver(h, { session: owner }, alias.id, 1, { subject: "receipt 1" }),
      ...await deliver(h, { session: owner }, alias.id, 1, { subject: "hello" }),
      ...await deliver(h, { session: owner }, alias.id, 1, { subject: "receipt 2" }),
      ...await deliver(h, { session: owner }, alias.id, 1, { subject: "hello again" }),
      ...await deliver(h, { session: owner }, alias.id, 1, { subject: "junk" })
    ]
    expect((await detail(h, { session: owner }, junk!)).trashedAt).not.toBeNull()
    await expectExact(2)
    await act(`/messages/${hello}`, "PATCH", { isRead: true }, guest) // a guest's read mark is its own
    await expectExact(2)
    await act(`/messages/${junk}/restore`, "POST") // the rule's trash, undone: unread again
    await expectExact(3)
    await act(`/messages/${receipt}`, "DELETE") // read by a rule: the count does not move
    await act(`/messages/${receipt}/restore`, "POST")
    await expectExact(3)
    await act(`/messages/${otherReceipt}`, "PATCH", { isRead: false })
    await expectExact(4)
    // One fold takes ingest's deltas and the rules step's corrections (whichever Mailstore's own fold left): the row alone is exact.
    await h.worker.foldCounts()
    await expectExact(4)
    const [folded] = await h.query<{ unread_count: number; left: number }>(
      "SELECT unread_count, (SELECT count(*)::int FROM mail_count_deltas WHERE alias_id = $1) AS left FROM aliases WHERE id = $1",
      [alias.id]
    )
    expect(folded).toEqual({ unread_count: 4, left: 0 })
    await act(`/messages/${otherHello}?permanent=1`, "DELETE")
    await expectExact(3)
    await h.worker.foldCounts()
    const [row] = await h.query<{ unread_count: number }>("SELECT unread_count FROM aliases WHERE id = $1", [alias.id])
    expect(row!.unread_count).toBe(3)
  })

  it("feeds a tag-mode webhook: the endpoint gets the message a rule tagged, and not one it did not", async () => {
    const { session, alias } = await mailbox()
    const tag = await createTag(session, "hooked")
    await createRule(session, { name: "hook", match: { subject: "deploy" }, actions: [{ type: "tag", tagId: tag }] })
    const endpoint = await h.request("/webhooks", {
      method: "POST",
      session,
      body: { name: "tagged", url: "https://127.0.0.1:9/hook", subscription: { mode: "tag", tag_id: tag } }
    })
    expect(endpoint.status, endpoint.text).toBe(201)
    const [tagged, untagged] = [
      ...await deliver(h, { session }, alias.id, 1, { subject: "deploy finished" }),
      ...await deliver(h, { session }, alias.id, 1, { subject: "newsletter" })
    ]
    await worker.dispatch()
    const sent = await h.query<{ message_id: number }>(
      `SELECT (e.data->>'message_id')::int AS message_id FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
       WHERE d.webhook_id = $1 AND d.event_type = 'message.received'`,
      [endpoint.body.webhook.id]
    )
    expect(sent.map((r) => r.message_id)).toEqual([tagged])
    expect(untagged).not.toBe(tagged)
  })
})
