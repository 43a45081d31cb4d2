/**
 * The Mercure hub (issue #32, decisions.md "Realtime"): a browser session subscribes to its own
 * topic at {site_url}/.well-known/mercure and hears what changed (never a body); a reconnect
 * with Last-Event-ID receives what it missed; other topics are refused; updates published by
 * another process (its own pool and LISTEN) reach this one's subscribers. Updates committed
 * together reach each subscriber whole (one write per pull), each with its own topic; a subscriber
 * that stops reading is sent events.missed past Realtime's PendingLimit instead of costing memory.
 */
import { type Caller, claimAlias, type Harness, injectMail, shareMailbox, openSse, processed, type Session, sendMail, startHarness } from "@burnbox/testkit"
import { connect } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let owner: Session
let who: Caller

beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 3211 })
  owner = await h.signup({ plan: "pro" })
  who = { session: owner }
})
afterAll(async () => {
  await h.close()
})

const origin = (harness: Harness) => harness.baseUrl.replace(/\/api\/v1$/, "")
const topicOf = (harness: Harness, session: Session) => `${origin(harness)}/accounts/${session.accountId}`
const hubUrl = (harness: Harness, topic: string, query = "") => `${origin(harness)}/.well-known/mercure?topic=${encodeURIComponent(topic)}${query}`
const subscribe = (harness: Harness, session: Session | undefined, topic: string, headers: Record<string, string> = {}, query = "") =>
  openSse(hubUrl(harness, topic, query), { ...(session === undefined ? {} : { cookie: `service_session=${session.cookie}` }), ...headers })

const raw = (to: string, subject: string) =>
  Buffer.from(`From: a@example.org\r\nTo: ${to}\r\nSubject: ${subject}\r\nMessage-ID: <${subject.replace(/\W/g, "")}@example.org>\r\n\r\nyour code is 482913\r\n`)

describe("GET /.well-known/mercure", () => {
  it("the bootstrap names this hub and the session's own topic", async () => {
    const answer = await h.request("/bootstrap", { session: owner })
    expect(answer.status).toBe(200)
    expect(answer.body.mercure).toEqual({ hubUrl: `${origin(h)}/.well-known/mercure`, topic: topicOf(h, owner) })
  })

  it("streams an update for mail delivered over SMTP and for injected mail, naming ids and never the body", async () => {
    const alias = await claimAlias(h, who)
    const sse = await subscribe(h, owner, topicOf(h, owner))
    try {
      expect(sse.status).toBe(200)
      expect(sse.headers.get("content-type")).toContain("text/event-stream")
      const smtpId = await sendMail(h, alias.address, raw(alias.address, "over smtp"))
      const bySmtp = await sse.next((e) => e.data.messageId === smtpId)
      expect(bySmtp.data).toEqual({ topic: topicOf(h, owner), type: "message.processed", aliasId: alias.id, messageId: smtpId })
      expect(bySmtp.id).toMatch(/^urn:uuid:[0-9a-f-]{36}$/)

      const injected = await injectMail(h, who, alias.id, { subject: "injected", text: "the secret body 771" })
      const byApi = await sse.next((e) => e.data.messageId === injected)
      expect(byApi.data.type).toBe("message.processed")
      expect(JSON.stringify(sse.events)).not.toContain("secret body")
      expect(JSON.stringify(sse.events)).not.toContain("482913")
      // The first heartbeat comment went at once.
      expect(sse.comments()).toBeGreaterThanOrEqual(1)
    } finally {
      sse.close()
    }
  })

  it("a reconnect with Last-Event-ID receives what it missed, in order, and nothing before it", async () => {
    const alias = await claimAlias(h, who)
    const first = await subscribe(h, owner, topicOf(h, owner))
    const seen = await injectMail(h, who, alias.id, { subject: "seen" })
    const last = await first.next((e) => e.data.messageId === seen)
    first.close()
    // Another subscriber, still connected, hears the order the hub recorded them in: the pipeline
    // may finish two messages in either order (two stores in flight, mail handed over at its accept).
    const live = await subscribe(h, owner, topicOf(h, owner))
    const missed = [await injectMail(h, who, alias.id, { subject: "missed 1" }), await injectMail(h, who, alias.id, { subject: "missed 2" })]
    for (const id of missed) await processed(h, who, id)
    let recorded: Array<number | undefined>
    try {
      recorded = [(await live.next((e) => e.data.aliasId === alias.id)).data.messageId, (await live.next((e) => e.data.aliasId === alias.id)).data.messageId]
    } finally {
      live.close()
    }
    expect([...recorded].sort()).toEqual([...missed].sort())

    const again = await subscribe(h, owner, topicOf(h, owner), { "last-event-id": last.id! })
    try {
      const one = await again.next((e) => e.data.aliasId === alias.id)
      const two = await again.next((e) => e.data.aliasId === alias.id)
      expect([one.data.messageId, two.data.messageId]).toEqual(recorded)
      expect(again.events.some((e) => e.data.messageId === seen)).toBe(false)
    } finally {
      again.close()
    }
    // The query form of Mercure (lastEventID) is heard alike.
    const byQuery = await subscribe(h, owner, topicOf(h, owner), {}, `&lastEventID=${encodeURIComponent(last.id!)}`)
    try {
      expect((await byQuery.next((e) => e.data.aliasId === alias.id)).data.messageId).toBe(recorded[0])
    } finally {
      byQuery.close()
    }
  })

  it("an id the hub no longer keeps is answered with events.missed (read again)", async () => {
    const sse = await subscribe(h, owner, topicOf(h, owner), { "last-event-id": "urn:uuid:00000000-0000-4000-8000-000000000000" })
    try {
      expect((await sse.next()).data).toEqual({ topic: topicOf(h, owner), type: "events.missed" })
    } finally {
      sse.close()
    }
  })

  it("refuses another account's topic, a missing topic and a request without a session", async () => {
    const stranger = await h.signup()
    const foreign = await subscribe(h, owner, topicOf(h, stranger))
    expect(foreign.status).toBe(403)
    const mixed = await openSse(`${hubUrl(h, topicOf(h, owner))}&topic=${encodeURIComponent(topicOf(h, stranger))}`, { cookie: `service_session=${owner.cookie}` })
    expect(mixed.status).toBe(403)
    const wildcard = await subscribe(h, owner, `${origin(h)}/accounts/{id}`)
    expect(wildcard.status).toBe(403)
    const none = await openSse(`${origin(h)}/.well-known/mercure`, { cookie: `service_session=${owner.cookie}` })
    expect(none.status).toBe(400)
    const anonymous = await subscribe(h, undefined, topicOf(h, owner))
    expect(anonymous.status).toBe(401)
    const forged = await subscribe(h, undefined, topicOf(h, owner), { cookie: "service_session=forged" })
    expect(forged.status).toBe(401)
  })

  it("a stranger's mail is not heard on one's own topic", async () => {
    const stranger = await h.signup({ plan: "pro" })
    const theirs = await claimAlias(h, { session: stranger })
    const mine = await claimAlias(h, who)
    const sse = await subscribe(h, owner, topicOf(h, owner))
    try {
      const foreign = await injectMail(h, { session: stranger }, theirs.id)
      await processed(h, { session: stranger }, foreign)
      const own = await injectMail(h, who, mine.id)
      await sse.next((e) => e.data.messageId === own)
      expect(sse.events.some((e) => e.data.messageId === foreign || e.data.aliasId === theirs.id)).toBe(false)
    } finally {
      sse.close()
    }
  })
})

describe("changes", () => {
  it("an alias claimed, paused, resumed and burned, and a reader's own message state", async () => {
    const sse = await subscribe(h, owner, topicOf(h, owner))
    try {
      const alias = await claimAlias(h, who)
      expect((await sse.next((e) => e.data.aliasId === alias.id)).data.type).toBe("alias.claimed")
      for (const [body, type] of [[{ status: "paused" }, "alias.paused"], [{ status: "active" }, "alias.resumed"]] as const) {
        const answer = await h.request(`/aliases/${alias.id}`, { method: "PATCH", ...who, body })
        expect(answer.status, answer.text).toBe(200)
        expect((await sse.next((e) => e.data.aliasId === alias.id)).data.type).toBe(type)
      }
      const id = await injectMail(h, who, alias.id)
      await sse.next((e) => e.data.messageId === id)
      const read = await h.request(`/messages/${id}`, { method: "PATCH", ...who, body: { isRead: true } })
      expect(read.status, read.text).toBe(200)
      expect((await sse.next((e) => e.data.type === "message.changed")).data).toEqual({ topic: topicOf(h, owner), type: "message.changed", aliasId: alias.id, messageIds: [id] })
      const trashed = await h.request(`/messages/${id}`, { method: "DELETE", ...who })
      expect(trashed.status, trashed.text).toBe(204)
      expect((await sse.next((e) => e.data.type === "message.changed")).data.messageIds).toEqual([id])
      const burned = await h.request(`/aliases/${alias.id}/burn`, { method: "POST", ...who })
      expect(burned.status, burned.text).toBeLessThan(300)
      expect((await sse.next((e) => e.data.aliasId === alias.id && e.data.type !== "message.changed")).data.type).toBe("alias.burned")
    } finally {
      sse.close()
    }
  })

  it("a guest's topic hears its shared mailbox's mail but not the owner's own state; a share stopping ends the stream", async () => {
    const guest = await h.signup({ plan: "free" })
    const alias = await claimAlias(h, who)
    const started = await subscribe(h, guest, topicOf(h, guest))
    const shareId = await shareMailbox(h, who, { session: guest }, { aliasId: alias.id, email: guest.email, role: "viewer" })
    // The share starting is told, then the stream ends: EventSource reconnects and reads the mailboxes again.
    expect((await started.next()).data).toEqual({ topic: topicOf(h, guest), type: "share.started", aliasId: alias.id })
    await expect(started.next(undefined, 5000)).rejects.toThrow(/ended/)

    const sse = await subscribe(h, guest, topicOf(h, guest), { "last-event-id": started.events[0]!.id! })
    try {
      const id = await injectMail(h, who, alias.id, { subject: "for the guest too" })
      expect((await sse.next((e) => e.data.messageId === id)).data.type).toBe("message.processed")
      await h.request(`/messages/${id}`, { method: "PATCH", ...who, body: { starred: true } })
      const own = await h.request(`/messages/${id}`, { method: "PATCH", session: guest, body: { isRead: true } })
      expect(own.status, own.text).toBe(200)
      const changed = await sse.next((e) => e.data.type === "message.changed")
      expect(changed.data.topic).toBe(topicOf(h, guest))
      // Only the guest's own change reached it: the owner's star came first and was not heard.
      expect(sse.events.filter((e) => e.data.type === "message.changed")).toHaveLength(1)
      const ended = await h.request(`/aliases/${alias.id}/shares/${shareId}`, { method: "DELETE", ...who })
      expect(ended.status, ended.text).toBe(204)
      expect((await sse.next((e) => e.data.type.startsWith("share."))).data).toEqual({ topic: topicOf(h, guest), type: "share.stopped", aliasId: alias.id })
      await expect(sse.next(undefined, 5000)).rejects.toThrow(/ended/)
    } finally {
      sse.close()
    }
  })
})

/** Publishes `payloads` (Realtime's wire shape) in one statement: one commit, heard together. */
const publishTogether = (payloads: ReadonlyArray<object>) =>
  h.query("SELECT count(pg_notify('burnbox_realtime', p)) FROM unnest($1::text[]) WITH ORDINALITY AS u(p, n)", [
    payloads.map((payload) => JSON.stringify({ ...payload, id: `urn:uuid:${crypto.randomUUID()}` }))
  ])

describe("updates committed together", () => {
  it("reach every subscriber whole and in order, each formatted for its own topic (an owner's and a guest's)", async () => {
    const guest = await h.signup({ plan: "free" })
    const alias = await claimAlias(h, who)
    await shareMailbox(h, who, { session: guest }, { aliasId: alias.id, email: guest.email, role: "viewer" })
    const mine = [await subscribe(h, owner, topicOf(h, owner)), await subscribe(h, owner, topicOf(h, owner))]
    const theirs = await subscribe(h, guest, topicOf(h, guest))
    try {
      const ids = Array.from({ length: 50 }, (_, i) => 9_000_000 + i)
      await publishTogether(ids.map((messageId) => ({ accountId: owner.accountId, aliasId: alias.id, messageId, status: "processed" })))
      for (const [sse, session] of [[mine[0]!, owner], [mine[1]!, owner], [theirs, guest]] as const) {
        await sse.next((e) => e.data.messageId === ids.at(-1))
        const heard = sse.events.filter((e) => e.data.aliasId === alias.id && e.data.type === "message.processed")
        expect(heard.map((e) => e.data.messageId)).toEqual(ids)
        expect(heard.every((e) => e.data.topic === topicOf(h, session))).toBe(true)
        expect(new Set(heard.map((e) => e.id)).size).toBe(ids.length)
      }
      // Each update keeps one id whoever hears it (a guest may resume from it like the owner).
      expect(theirs.events.at(-1)!.id).toBe(mine[0]!.events.at(-1)!.id)
    } finally {
      for (const sse of [...mine, theirs]) sse.close()
    }
  })

  it("a share starting ends a guest's stream right after it, even when more updates came in the same commit", async () => {
    const guest = await h.signup({ plan: "free" })
    const sse = await subscribe(h, guest, topicOf(h, guest))
    try {
      await publishTogether([
        { accountId: guest.accountId, type: "alias.claimed", aliasId: 9_100_001 },
        { accountId: guest.accountId, type: "share.started", aliasId: 9_100_002 },
        { accountId: guest.accountId, type: "alias.paused", aliasId: 9_100_001 }
      ])
      await sse.next((e) => e.data.type === "share.started")
      await expect(sse.next(undefined, 5000)).rejects.toThrow(/ended/)
      expect(sse.events.map((e) => e.data.type)).toEqual(["alias.claimed", "share.started"])
    } finally {
      sse.close()
    }
  })
})

describe("a slow subscriber", () => {
  it("whose connection is not read is sent events.missed in place of what it could not take, while one that reads hears everything", async () => {
    const alias = await claimAlias(h, who)
    const before = await h.realtimeSubscriptions()
    const reading = await subscribe(h, owner, topicOf(h, owner))
    // A browser that stopped reading: its socket's buffers fill, then the hub's writes wait.
    const url = new URL(hubUrl(h, topicOf(h, owner)))
    const socket = connect(Number(url.port), url.hostname)
    const received: Array<Buffer> = []
    socket.on("data", (chunk: Buffer) => received.push(chunk))
    socket.write(`GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nAccept: text/event-stream\r\nCookie: service_session=${owner.cookie}\r\n\r\n`)
    socket.pause()
    try {
      await h.untilRealtimeSubscriptions(before + 2)
      // Updates of about 1.5 KB (a change of 200 messages), in commits smaller than the limit, each
      // heard whole by the reading subscriber before the next: about 15 MB, more than the
      // sockets' buffers (a few MB) and the 2,000 updates a subscription holds.
      const messageIds = Array.from({ length: 200 }, (_, i) => 8_000_000 + i)
      const commits = 10
      for (let commit = 0; commit < commits; commit++) {
        await publishTogether(Array.from({ length: 1000 }, (_, i) => ({ accountId: owner.accountId, type: "message.changed", aliasId: alias.id, messageIds: [commit * 1000 + i, ...messageIds] })))
        await reading.next((e) => e.data.messageIds?.[0] === commit * 1000 + 999, 30_000)
      }
      await publishTogether([{ accountId: owner.accountId, aliasId: alias.id, messageId: 8_999_999, status: "processed" }])
      await reading.next((e) => e.data.messageId === 8_999_999, 30_000)
      expect(reading.events.filter((e) => e.data.type === "message.changed")).toHaveLength(commits * 1000)
      expect(reading.events.some((e) => e.data.type === "events.missed")).toBe(false)

      socket.resume()
      const heard = async (what: string, needle: string) => {
        for (const deadline = Date.now() + 30_000; !Buffer.concat(received).includes(needle);) {
          if (Date.now() > deadline) throw new Error(`the slow subscriber never heard ${what}`)
          await new Promise((resolve) => setTimeout(resolve, 50))
        }
      }
      await heard("events.missed", `"type":"events.missed"`)
      // The update that overflowed its queue may have been the last one above (then events.missed
      // stands for it): once it reads again, an update after the gap reaches it whole.
      await publishTogether([{ accountId: owner.accountId, aliasId: alias.id, messageId: 8_999_998, status: "processed" }])
      await heard("the update after the gap", `"messageId":8999998`)
      const text = Buffer.concat(received).toString("utf8")
      expect(text).toContain(`{"topic":"${topicOf(h, owner)}","type":"events.missed"}`)
      const changes = text.split(`"type":"message.changed"`).length - 1
      expect(changes).toBeGreaterThan(0)
      expect(changes).toBeLessThan(commits * 1000)
    } finally {
      socket.destroy()
      reading.close()
    }
  }, 120_000)
})

describe("across processes", () => {
  it("a change made through another process reaches this one's subscriber", async () => {
    const serve = await startHarness({}, h)
    try {
      const alias = await claimAlias(h, who)
      const sse = await subscribe(serve, owner, topicOf(serve, owner))
      try {
        const paused = await h.request(`/aliases/${alias.id}`, { method: "PATCH", ...who, body: { status: "paused" } })
        expect(paused.status, paused.text).toBe(200)
        expect((await sse.next((e) => e.data.aliasId === alias.id)).data.type).toBe("alias.paused")
      } finally {
        sse.close()
      }
    } finally {
      await serve.close()
    }
  })

  it("a serve process's subscriber hears mail another process processed", async () => {
    const serve = await startHarness({}, h)
    try {
      const alias = await claimAlias(h, who)
      const sse = await subscribe(serve, owner, topicOf(serve, owner))
      try {
        expect(sse.status).toBe(200)
        const id = await injectMail(h, who, alias.id, { subject: "from the other process" })
        expect((await sse.next((e) => e.data.messageId === id)).data.type).toBe("message.processed")
      } finally {
        sse.close()
      }
    } finally {
      await serve.close()
    }
  })
})
