import { describe, expect, it } from "@effect/vitest"
import {
  deliveriesFor,
  type DispatchEndpoint,
  dispatchable,
  eventAccounts,
  messagesToTag,
  messagesToText,
  type OutboxEvent,
  selectEndpoints
} from "../src/webhooks/index.ts"
import { RequestTimeHtmlMaxChars } from "../src/mail/limits.ts"
import { TextPartPayloadMaxChars } from "../src/mail/sanitize.ts"
import { storedWebhookTextBody } from "../src/mail/worked.ts"
import { pgText } from "../src/platform/PgText.ts"
import { payloadTextBody } from "../src/webhooks/textBody.ts"
import { endpointHostOf, subscriptionReaches } from "../src/sharing/Share.ts"

const t0 = new Date("2026-09-01T10:00:00.000Z")
const later = new Date("2026-09-01T10:00:01.000Z")

const event = (overrides: Partial<OutboxEvent> & Pick<OutboxEvent, "id">): OutboxEvent => ({
  accountId: 1,
  aliasId: 7,
  type: "message.received",
  time: later,
  data: { message_id: 100, alias: { id: 7, address: "a@burnbox.test", label: "Signup" } },
  ...overrides
})

const endpoint = (overrides: Partial<DispatchEndpoint> & Pick<DispatchEndpoint, "id">): DispatchEndpoint => ({
  accountId: 1,
  subscription: { mode: "all" },
  includeTextBody: false,
  includeMessageRestored: false,
  createdAt: t0,
  ...overrides
})

const decode = (payload: Uint8Array) => JSON.parse(new TextDecoder().decode(payload))

describe("dispatch", () => {
  it("takes events in outbox order (time, then id) and leaves webhook.test events out", () => {
    const events = dispatchable([
      event({ id: "evt_B", time: later }),
      event({ id: "evt_T", type: "webhook.test", time: t0 }),
      event({ id: "evt_C", time: t0 }),
      event({ id: "evt_A", time: later, accountId: 2 })
    ])
    expect(events.map((e) => e.id)).toEqual(["evt_C", "evt_A", "evt_B"])
    expect(eventAccounts(events)).toEqual([1, 2])
  })

  it("reads tags only when an endpoint of an event's account selects by tag", () => {
    const events = [event({ id: "evt_1" }), event({ id: "evt_2", accountId: 2, data: { message_id: 200 } })]
    expect(messagesToTag(events, [endpoint({ id: 1 })])).toEqual([])
    expect(messagesToTag(events, [endpoint({ id: 1, subscription: { mode: "tag", tag_id: 5 } })])).toEqual([100])
    // Accounts without endpoints contribute nothing.
    expect(messagesToTag(events, [endpoint({ id: 1, accountId: 3, subscription: { mode: "tag", tag_id: 5 } })])).toEqual([])
  })

  it("selects per subscription, with the reader's tags, and never an endpoint newer than the event", () => {
    const events = [event({ id: "evt_1" }), event({ id: "evt_2", type: "alias.claimed", data: { alias: { label: "signup" } } })]
    const endpoints = [
      endpoint({ id: 1 }),
      endpoint({ id: 2, subscription: { mode: "tag", tag_id: 5 } }),
      endpoint({ id: 3, subscription: { mode: "label", label: "SIGNUP" } }),
      endpoint({ id: 4, createdAt: new Date(later.getTime() + 1) }),
      endpoint({ id: 5, accountId: 2 })
    ]
    const selections = selectEndpoints(events, endpoints, [
      { messageId: 100, accountId: 1, tagId: 5 },
      // Another reader's tag on the same message does not count.
      { messageId: 100, accountId: 9, tagId: 6 }
    ])
    expect(selections.map((s) => [s.event.id, s.messageId, s.endpoints.map((e) => e.id)])).toEqual([
      ["evt_1", 100, [1, 2, 3]],
      ["evt_2", null, [1, 3]]
    ])
    const untagged = selectEndpoints(events, endpoints, [{ messageId: 100, accountId: 9, tagId: 5 }])
    expect(untagged[0]!.endpoints.map((e) => e.id)).toEqual([1, 3])
  })

  it("builds one payload per selected endpoint, with the text body only for endpoints that asked", () => {
    const events = [event({ id: "evt_1" }), event({ id: "evt_2", type: "message.otp_extracted", data: { message_id: 100 } })]
    const endpoints = [endpoint({ id: 1 }), endpoint({ id: 2, includeTextBody: true }), endpoint({ id: 3, includeTextBody: true })]
    const selections = selectEndpoints(events, endpoints, [])
    // Only message.received carries a text body.
    expect(messagesToText(selections)).toEqual([100])
    const deliveries = deliveriesFor(selections, [{ id: 100, textBody: "Your code\r\nis 123456\u0007", htmlOriginal: null }])
    expect(deliveries.map((d) => [d.webhookId, d.eventId, d.eventType])).toEqual([
      [1, "evt_1", "message.received"],
      [2, "evt_1", "message.received"],
      [3, "evt_1", "message.received"],
      [1, "evt_2", "message.otp_extracted"],
      [2, "evt_2", "message.otp_extracted"],
      [3, "evt_2", "message.otp_extracted"]
    ])
    expect(deliveries.every((d) => d.accountId === 1 && d.time === later)).toBe(true)
    const [plain, withText, sameText] = deliveries
    expect(decode(plain!.payload)).toEqual({
      id: "evt_1",
      type: "message.received",
      time: later.toISOString(),
      api_version: "2026-08-31",
      shared_mailbox: false,
      owner_handle: null,
      data: { message_id: 100, alias: { id: 7, address: "a@burnbox.test", label: "Signup" } }
    })
    expect(decode(withText!.payload).data.text_body).toBe("Your code\nis 123456")
    // Serialized once per event: the endpoints that asked share the same bytes.
    expect(sameText!.payload).toBe(withText!.payload)
    expect(decode(deliveries[4]!.payload).data).toEqual({ message_id: 100 })
  })

  it("falls back to the HTML's text, and to an empty text when the message is gone", () => {
    const selections = selectEndpoints(
      [event({ id: "evt_1" }), event({ id: "evt_2", data: { message_id: 101 } })],
      [endpoint({ id: 1, includeTextBody: true })],
      []
    )
    expect(messagesToText(selections)).toEqual([100, 101])
    const deliveries = deliveriesFor(selections, [{ id: 100, textBody: "  ", htmlOriginal: "<p>Hello <b>there</b></p>" }])
    expect(decode(deliveries[0]!.payload).data.text_body).toBe("Hello there")
    expect(decode(deliveries[1]!.payload).data.text_body).toBe("")
  })

  it("takes the text body the pipeline made, reading no HTML; a row without one falls back to its text part, or to a small HTML", () => {
    const messages = [100, 101, 102, 103]
    const selections = selectEndpoints(
      messages.map((id) => event({ id: `evt_${id}`, data: { message_id: id } })),
      [endpoint({ id: 1, includeTextBody: true })],
      []
    )
    const hostile = `${"<b>".repeat(300_000)}deep`
    const deliveries = deliveriesFor(selections, [
      // The HTML would never be read: what the pipeline stored is the text body.
      { id: 100, webhookTextBody: "made in the thread", textBody: null, htmlOriginal: hostile },
      { id: 101, webhookTextBody: null, textBody: "the text part", htmlOriginal: hostile },
      { id: 102, webhookTextBody: null, textBody: null, htmlOriginal: "<p>small &amp; plain</p>" },
      // Too large to read on the main thread (RequestTimeHtmlMaxChars), or past the limits.
      { id: 103, webhookTextBody: null, textBody: null, htmlOriginal: `<p>large</p>${" ".repeat(RequestTimeHtmlMaxChars)}` }
    ])
    expect(deliveries.map((d) => decode(d.payload).data.text_body)).toEqual(["made in the thread", "the text part", "small & plain", ""])
    expect(decode(deliveriesFor(selections, [{ id: 100, webhookTextBody: null, textBody: null, htmlOriginal: hostile }])[0]!.payload).data.text_body).toBe("")
  })

  it("a text part's text_body is the same bytes whether the pipeline stored its copy (before #36) or the text part makes it at dispatch", () => {
    const selections = selectEndpoints([event({ id: "evt_1" })], [endpoint({ id: 1, includeTextBody: true })], [])
    const texts = [
      "Your code\r\nis 123456\u0007",
      "a NUL\u0000 inside",
      "a lone \ud800 surrogate",
      "\u0000\u0000",
      "x\r\n".repeat(20_000),
      `${"y".repeat(32_767)}😀 cut inside the pair`,
      `${"z".repeat(TextPartPayloadMaxChars)} longer than dispatch reads`
    ]
    const stored = texts.map((raw) => {
      // As the pipeline makes them (mail/analyze.ts, worked.ts): the text part, and its payload.
      const textBody = pgText(raw)
      const made = payloadTextBody(raw)
      const payloadOf = (webhookTextBody: string | null) =>
        Buffer.from(deliveriesFor(selections, [{ id: 100, webhookTextBody, textBody, htmlOriginal: null }])[0]!.payload)
      const kept = storedWebhookTextBody(textBody, made)
      expect(payloadOf(kept).equals(payloadOf(pgText(made))), JSON.stringify(raw.slice(0, 40))).toBe(true)
      return kept === null
    })
    // Only the one too long to read at dispatch, and the one whose text part is NULs only, keep a copy.
    expect(stored).toEqual([true, true, true, false, true, true, false])
  })

  it("writes nothing for an event no endpoint selects", () => {
    const selections = selectEndpoints([event({ id: "evt_1", type: "message.restored" })], [endpoint({ id: 1 })], [])
    expect(selections.map((s) => s.endpoints.length)).toEqual([0])
    expect(deliveriesFor(selections, [])).toEqual([])
  })
})

describe("dispatch to a shared mailbox's guests (spec 6.5, rule 6)", () => {
  const guests = [{ aliasId: 7, guestId: 2, ownerHandle: "brisk-heron-0093" }]

  it("selects a live guest's endpoints on the guest's view: no owner label, the guest's own tags", () => {
    const events = [event({ id: "evt_1" })]
    const endpoints = [
      endpoint({ id: 1 }),
      endpoint({ id: 2, accountId: 2 }),
      endpoint({ id: 3, accountId: 2, subscription: { mode: "label", label: "Signup" } }),
      endpoint({ id: 4, accountId: 2, subscription: { mode: "tag", tag_id: 9 } }),
      endpoint({ id: 5, accountId: 2, subscription: { mode: "aliases", alias_ids: [8] } })
    ]
    expect(messagesToTag(events, endpoints, guests)).toEqual([100])
    const [selection] = selectEndpoints(events, endpoints, [{ messageId: 100, accountId: 2, tagId: 9 }, { messageId: 100, accountId: 1, tagId: 9 }], guests)
    expect(selection!.endpoints.map((e) => e.id)).toEqual([1])
    expect(selection!.guestEndpoints!.map((g) => g.endpoint.id)).toEqual([2, 4])
    // Without the guest's tag, its tag endpoint does not select the event (the owner's tag is not the guest's).
    const [untagged] = selectEndpoints(events, endpoints, [{ messageId: 100, accountId: 1, tagId: 9 }], guests)
    expect(untagged!.guestEndpoints!.map((g) => g.endpoint.id)).toEqual([2])
  })

  it("sends a guest's endpoint the envelope with shared_mailbox, owner_handle and no label; the owner's is unchanged", () => {
    const selections = selectEndpoints([event({ id: "evt_1" })], [endpoint({ id: 1 }), endpoint({ id: 2, accountId: 2 })], [], guests)
    const [owners, guests_] = deliveriesFor(selections, []).toSorted((a, b) => a.webhookId - b.webhookId)
    expect(decode(owners!.payload)).toMatchObject({ shared_mailbox: false, owner_handle: null, data: { alias: { label: "Signup" } } })
    expect(decode(guests_!.payload)).toMatchObject({ shared_mailbox: true, owner_handle: "brisk-heron-0093", data: { alias: { id: 7, label: null } } })
    expect(guests_!.accountId).toBe(2)
    // The owner's timer is the owner's: alias.expiring goes to the owner's endpoints only.
    const expiring = selectEndpoints([event({ id: "evt_2", type: "alias.expiring", data: { alias: { id: 7, address: "a@burnbox.test", label: "Signup" } } })],
      [endpoint({ id: 1 }), endpoint({ id: 2, accountId: 2 })], [], guests)
    expect(expiring.map((s) => [s.endpoints.map((e) => e.id), s.guestEndpoints ?? []])).toEqual([[[1], []]])
  })

  it("leaves out a guest endpoint the owner revoked, and another of that guest at the same URL", () => {
    const endpoints = [endpoint({ id: 2, accountId: 2, url: "https://hooks.example/x" }), endpoint({ id: 3, accountId: 2, url: "https://hooks.example/x" })]
    const revoked = [{ aliasId: 7, guestId: 2, webhookId: 2, url: "https://hooks.example/x" }]
    const [selection] = selectEndpoints([event({ id: "evt_1" })], endpoints, [], guests, revoked)
    expect(selection!.guestEndpoints ?? []).toEqual([])
    // On another mailbox the revocation does not apply.
    const [elsewhere] = selectEndpoints([event({ id: "evt_2", aliasId: 8 })], endpoints, [], [{ ...guests[0]!, aliasId: 8 }], revoked)
    expect(elsewhere!.guestEndpoints!.map((g) => g.endpoint.id)).toEqual([2, 3])
  })

  it("a guest endpoint reaches a mailbox unless it selects by label or lists other aliases", () => {
    expect(subscriptionReaches({ mode: "all" }, 7)).toBe(true)
    expect(subscriptionReaches({ mode: "otp" }, 7)).toBe(true)
    expect(subscriptionReaches({ mode: "tag", tag_id: 1 }, 7)).toBe(true)
    expect(subscriptionReaches({ mode: "aliases", alias_ids: [7, 8] }, 7)).toBe(true)
    expect(subscriptionReaches({ mode: "aliases", alias_ids: [8] }, 7)).toBe(false)
    expect(subscriptionReaches({ mode: "label", label: "Signup" }, 7)).toBe(false)
    expect(endpointHostOf("https://hooks.example.com/secret/path?token=1")).toBe("hooks.example.com")
  })
})
