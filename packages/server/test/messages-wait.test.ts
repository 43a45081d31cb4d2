/**
 * Waiting for mail (decisions.md, "Waiting for mail"; issue #16): GET /messages?wait and
 * GET /messages/{id}?wait hold until the pipeline's realtime event and answer on it, not at their
 * deadline (the NOTIFY the pipeline sends at commit is heard on a LISTEN of the test's own), free
 * their subscription when the client goes away, answer at shutdown, and hold no database
 * connection while they wait. The time-out itself is checked with TestClock in the store's
 * message-waits test; here once, with the shortest wait (1 s). No stopwatch bound here is under
 * 10 s: how fast a wait answers its event (goal: 100 ms) is bench:wait's figure (NOTIFY -> wait
 * answer), and here "on the event" means long before the 30 s deadline.
 */
import { MessagePage } from "@burnbox/domain"
import { RealtimeChannel } from "@burnbox/store"
import { type Caller, claimAlias, expectProblem, expectShape, type Harness, injectMail, processed, type Session, SmtpClient, startHarness } from "@burnbox/testkit"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let owner: Session
let token: string
let who: Caller
/** The pipeline's realtime notifications as this test hears them: message id -> when. */
const heard = new Map<number, number>()
let listener: pg.Client

beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 7531 })
  owner = await h.signup({ plan: "pro" })
  token = await h.createToken(owner, ["read", "delete"])
  who = { session: owner }
  listener = new pg.Client({ connectionString: h.databaseUrl })
  await listener.connect()
  listener.on("notification", (n) => {
    const event = JSON.parse(n.payload ?? "{}") as { messageId?: number }
    if (event.messageId !== undefined) heard.set(event.messageId, performance.now())
  })
  await listener.query(`LISTEN ${RealtimeChannel}`)
})
afterAll(async () => {
  await listener.end()
  await h.close()
})

type Page = typeof MessagePage.Type
const get = (path: string, signal?: AbortSignal) =>
  fetch(`${h.baseUrl}${path}`, { headers: { authorization: `Bearer ${token}` }, ...(signal === undefined ? {} : { signal }) })
/** A request in flight and when its answer arrived. */
const pending = (path: string, signal?: AbortSignal) =>
  get(path, signal).then(async (response) => ({ status: response.status, body: (await response.json()) as any, at: performance.now(), headers: response.headers }))

const until = async (what: string, test: () => Promise<boolean>, ms = 10_000) => {
  const deadline = Date.now() + ms
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error(`still not ${what} after ${ms} ms`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}
const subscriptions = (n: number) => h.untilRealtimeSubscriptions(n)

/** Far past what answering an event costs a correct service on a busy machine, far short of a wait's 30 s deadline. */
const GenerousMs = 10_000

const smtp = async (to: string, subject: string) => {
  const client = await SmtpClient.open(h.smtpPort)
  try {
    expect((await client.read()).code).toBe(220)
    expect((await client.command("EHLO client.example.org")).code).toBe(250)
    expect((await client.command("MAIL FROM:<bounce@mailer.example>")).code).toBe(250)
    expect((await client.command(`RCPT TO:<${to}>`)).code).toBe(250)
    const raw = Buffer.from(`From: a@example.org\r\nTo: ${to}\r\nSubject: ${subject}\r\n\r\nyour code is 482913\r\n`)
    expect((await client.data(raw)).code).toBe(250)
  } finally {
    await client.quit()
  }
}

describe("GET /messages?wait", () => {
  it("answers injected mail on the pipeline's notification, not at its deadline", async () => {
    const alias = await claimAlias(h, who)
    const answer = pending(`/messages?alias=${alias.id}&wait=30`)
    await subscriptions(1)
    const id = await injectMail(h, who, alias.id, { subject: "injected" })
    const { status, body, at } = await answer
    expect(status).toBe(200)
    expect(expectShape(MessagePage, body).items.map((m) => [m.id, m.processingStatus])).toEqual([[id, "processed"]])
    await until("heard", async () => heard.has(id))
    expect(at - heard.get(id)!).toBeLessThan(GenerousMs)
    await subscriptions(0)
  })

  it("answers SMTP mail on the pipeline's notification, not at its deadline", async () => {
    const alias = await claimAlias(h, who)
    const answer = pending(`/messages?alias=${alias.id}&wait=30`)
    await subscriptions(1)
    await smtp(alias.address, "over smtp")
    const { status, body, at } = await answer
    expect(status).toBe(200)
    const [item] = (body as Page).items
    expect([item?.subject, item?.processingStatus, item?.otpCodes]).toEqual(["over smtp", "processed", ["482913"]])
    await until("heard", async () => heard.has(item!.id))
    expect(at - heard.get(item!.id)!).toBeLessThan(GenerousMs)
  })

  it("a page that is not empty answers at once; mail of another alias does not end the wait", async () => {
    const alias = await claimAlias(h, who)
    const other = await claimAlias(h, who)
    const id = await injectMail(h, who, alias.id)
    await processed(h, who, id)
    const started = performance.now()
    const now = await pending(`/messages?alias=${alias.id}&wait=30`)
    expect(now.body.items.map((m: { id: number }) => m.id)).toEqual([id])
    expect(now.at - started).toBeLessThan(GenerousMs)
    const answer = pending(`/messages?alias=${other.id}&wait=30`)
    await subscriptions(1)
    await processed(h, who, await injectMail(h, who, alias.id))
    const late = await injectMail(h, who, other.id)
    expect((await answer).body.items.map((m: { id: number }) => m.id)).toEqual([late])
  })

  it("times out with the empty page (200), counted once by the rate limit", async () => {
    const alias = await claimAlias(h, who)
    const before = Number((await get("/me")).headers.get("ratelimit-remaining"))
    const started = performance.now()
    const { status, body, headers } = await pending(`/messages?alias=${alias.id}&wait=1`)
    expect(performance.now() - started).toBeGreaterThanOrEqual(990)
    expect(status).toBe(200)
    expect(body).toEqual({ items: [], nextCursor: null, total: 0 })
    expect(Number(headers.get("ratelimit-remaining"))).toBe(before - 1)
    await subscriptions(0)
  })

  it("cursor with sort=oldest tails a mailbox: each answer's nextCursor waits for the next message", async () => {
    const alias = await claimAlias(h, who)
    const first = await injectMail(h, who, alias.id, { subject: "first" })
    await processed(h, who, first)
    const tail = `/messages?alias=${alias.id}&sort=oldest&limit=10&wait=30`
    const one = await pending(tail)
    expect(one.body.items.map((m: { id: number }) => m.id)).toEqual([first])
    expect(one.body.nextCursor).toEqual(expect.any(String))
    const next = pending(`${tail}&cursor=${encodeURIComponent(one.body.nextCursor)}`)
    await subscriptions(1)
    const second = await injectMail(h, who, alias.id, { subject: "second" })
    const two = await next
    expect(two.body.items.map((m: { id: number }) => m.id)).toEqual([second])
    // Nothing after the second: the empty page keeps the cursor it was asked with.
    const three = await pending(`/messages?alias=${alias.id}&sort=oldest&limit=10&wait=1&cursor=${encodeURIComponent(two.body.nextCursor)}`)
    expect(three.body).toMatchObject({ items: [], nextCursor: two.body.nextCursor })
  })

  it("bad wait values answer 422 validation_failed naming wait, on both endpoints", async () => {
    for (const value of ["0", "121", "abc", "1.5", "-1", ""]) {
      expectProblem(await h.request(`/messages?wait=${value}`, { token }), 422, "validation_failed")
      const answer = await h.request(`/messages/1?wait=${value}`, { token })
      expectProblem(answer, 422, "validation_failed")
      expect(Object.keys(answer.body.error.fields ?? {})).toEqual(["wait"])
    }
  })

  it("the served OpenAPI document shows wait on both endpoints, optional, with its range", async () => {
    const spec = await h.request("/api/v1/openapi.json")
    for (const path of ["/api/v1/messages", "/api/v1/messages/{id}"]) {
      const wait = (spec.body.paths[path].get.parameters as Array<any>).find((p) => p.name === "wait")
      expect(wait).toMatchObject({ in: "query", required: false, schema: { type: "string", pattern: "^-?\\d+$" } })
      expect(wait.schema.description).toMatch(/1 to 120/)
    }
  })
})

describe("GET /messages/{id}?wait", () => {
  const notify = (event: { accountId: number; aliasId: number; messageId: number; status: string }) =>
    h.query("SELECT pg_notify($1, $2)", [RealtimeChannel, JSON.stringify(event)])

  it("holds while the message is in the pipeline and answers it processed", async () => {
    const alias = await claimAlias(h, who)
    const id = await injectMail(h, who, alias.id)
    const { body } = await pending(`/messages/${id}?wait=30`)
    expect(body.processingStatus).toBe("processed")
    // A second message whose answer tells when the process has heard the event before its own.
    const next = await injectMail(h, who, alias.id)
    await processed(h, who, next)
    // Back in the pipeline (as a takeover leaves it), then processed again.
    await h.query("UPDATE messages SET processing_status = 'processing' WHERE id = ANY($1::int[])", [[id, next]])
    let answered = false
    const held = pending(`/messages/${id}?wait=30`).finally(() => (answered = true))
    const witness = pending(`/messages/${next}?wait=30`)
    await subscriptions(2)
    await notify({ accountId: owner.accountId, aliasId: alias.id, messageId: id + 1000, status: "processed" })
    // Notifications are heard in the order they were sent: once the witness answers its own
    // event, the process has heard the other message's event, and that did not end the wait.
    await h.query("UPDATE messages SET processing_status = 'processed' WHERE id = $1", [next])
    await notify({ accountId: owner.accountId, aliasId: alias.id, messageId: next, status: "processed" })
    expect((await witness).body.processingStatus).toBe("processed")
    expect(answered).toBe(false)
    await h.query("UPDATE messages SET processing_status = 'processed' WHERE id = $1", [id])
    await notify({ accountId: owner.accountId, aliasId: alias.id, messageId: id, status: "processed" })
    expect((await held).body.processingStatus).toBe("processed")
  })

  it("answers a stub message once it failed", async () => {
    const alias = await claimAlias(h, who)
    const id = await injectMail(h, who, alias.id)
    await processed(h, who, id)
    await h.query("UPDATE messages SET processing_status = 'stub' WHERE id = $1", [id])
    const held = pending(`/messages/${id}?wait=30`)
    await subscriptions(1)
    await h.query("UPDATE messages SET processing_status = 'failed' WHERE id = $1", [id])
    await notify({ accountId: owner.accountId, aliasId: alias.id, messageId: id, status: "failed" })
    const { status, body } = await held
    expect([status, body.processingStatus]).toEqual([200, "failed"])
  })
})

describe("waiting requests and the process", () => {
  it("a client that goes away frees its wait (the subscription count is back to zero)", async () => {
    const alias = await claimAlias(h, who)
    const abort = new AbortController()
    const answer = pending(`/messages?alias=${alias.id}&wait=120`, abort.signal).catch((error: unknown) => error)
    await subscriptions(1)
    abort.abort()
    expect(await answer).toBeInstanceOf(Error)
    await subscriptions(0)
  })

  it("1,000 concurrent waits hold no database connection: other requests answer meanwhile, one message answers them all", async () => {
    const alias = await claimAlias(h, who)
    // Four tokens: a token's minute allows 600 requests on this plan.
    const tokens = await Promise.all([1, 2, 3, 4].map((n) => h.createToken(owner, ["read"], `waiter ${n}`)))
    const waits = Array.from({ length: 1000 }, (_, i) =>
      fetch(`${h.baseUrl}/messages?alias=${alias.id}&wait=60`, { headers: { authorization: `Bearer ${tokens[i % 4]}` } })
        .then(async (response) => ({ status: response.status, body: (await response.json()) as any })))
    await subscriptions(1000)
    const [active] = await h.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND backend_type = 'client backend' AND pid <> pg_backend_pid() AND query NOT LIKE 'LISTEN%'"
    )
    expect(active!.n).toBe(0)
    expect((await h.request("/messages?limit=1", { token, signal: AbortSignal.timeout(GenerousMs) })).status).toBe(200)
    expect((await h.request("/me", { token, signal: AbortSignal.timeout(GenerousMs) })).status).toBe(200)
    const id = await injectMail(h, who, alias.id)
    const answers = await Promise.all(waits)
    expect(answers.every((a) => a.status === 200 && a.body.items[0]?.id === id)).toBe(true)
    await subscriptions(0)
  }, 60_000)

  it("a wait whose event came while the LISTEN connection was down answers once the process listens again, not at its deadline", async () => {
    const alias = await claimAlias(h, who)
    const answer = pending(`/messages?alias=${alias.id}&wait=60`)
    await subscriptions(1)
    const listens = await h.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'burnbox/%' AND query LIKE 'LISTEN%burnbox_realtime%'"
    )
    expect(listens).toHaveLength(1)
    await h.query(`SELECT pg_terminate_backend(${listens[0]!.pid})`)
    // Processed within the second before the process listens again: its event is not heard.
    const started = performance.now()
    const id = await injectMail(h, who, alias.id, { subject: "while not listening" })
    const { status, body, at } = await answer
    expect(status).toBe(200)
    expect((body as Page).items.map((m) => [m.id, m.processingStatus])).toEqual([[id, "processed"]])
    expect(at - started).toBeLessThan(GenerousMs)
    await subscriptions(0)
  }, 30_000)

  it("shutdown answers the waiting requests with their page (here the empty page)", async () => {
    const other = await startHarness({}, undefined, { seed: 7532 })
    const session = await other.signup({ plan: "pro" })
    const secret = await other.createToken(session, ["read"])
    const alias = await claimAlias(other, { session })
    const answer = fetch(`${other.baseUrl}/messages?alias=${alias.id}&wait=120`, { headers: { authorization: `Bearer ${secret}` } })
      .then(async (response) => ({ status: response.status, body: await response.json() }))
    await other.untilRealtimeSubscriptions(1)
    const started = performance.now()
    await other.close()
    expect(await answer).toEqual({ status: 200, body: { items: [], nextCursor: null, total: 0 } })
    // At shutdown, not at the wait's 120 s deadline.
    expect(performance.now() - started).toBeLessThan(GenerousMs)
  }, 30_000)
})
