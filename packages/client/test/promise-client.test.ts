/**
 * The Promise face against a real service (the harness): an alias claimed in one call, test
 * mail waited for and read with its code, the alias burned; the server's Problems arrive as
 * typed BurnboxProblems with their status, code and fields.
 */
import { BurnboxProblem, type Client, createClient } from "@burnbox/client"
import { type Harness, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let client: Client
beforeAll(async () => {
  h = await startHarness()
  const session = await h.signup({ plan: "pro" })
  const token = await h.createToken(session, ["read", "manage-aliases", "delete", "test", "webhooks"])
  client = createClient({ baseUrl: h.baseUrl, token })
})
afterAll(() => h?.close())

/** The rejection of `promise`, which must be a BurnboxProblem. */
const problemOf = async (promise: Promise<unknown>): Promise<BurnboxProblem> => {
  const error = await promise.then(() => undefined, (rejection: unknown) => rejection)
  expect(error).toBeInstanceOf(BurnboxProblem)
  return error as BurnboxProblem
}

describe("createClient", () => {
  it("claims an alias, waits for injected mail with its code, then burns the alias", async () => {
    const alias = await client.aliases.create({ label: "signup test" })
    expect(alias).toMatchObject({ status: "active", label: "signup test", style: "words" })
    expect(await client.aliases.find(alias.address.toUpperCase())).toMatchObject({ id: alias.id })

    const injected = await client.testMessages.inject({
      aliasId: alias.id,
      from: "Shop <shop@example.com>",
      subject: "Your code",
      text: "Your verification code is 482913."
    })
    const message = await client.messages.wait({ alias: alias.address, timeout: 20 })
    expect(message).toMatchObject({ id: injected.id, subject: "Your code", processingStatus: "processed" })
    expect(message.otpCodes).toEqual(["482913"])
    expect((await client.messages.get(message.id)).textBody).toContain("482913")
    expect((await client.messages.list({ alias: alias.id })).items.map((m) => m.id)).toEqual([message.id])

    await client.aliases.burn(alias.address)
    expect(await client.aliases.find(alias.address)).toMatchObject({ status: "burned" })
  })

  it("aliases.create in 50 parallel jobs on one token: every one claims its own alias", async () => {
    const created = await Promise.all(Array.from({ length: 50 }, (_, i) => client.aliases.create({ label: `job ${i}` })))
    expect(new Set(created.map((alias) => alias.address)).size).toBe(50)
    expect(created.every((alias) => alias.status === "active")).toBe(true)
    await Promise.all(created.map((alias) => client.aliases.burn(alias.id)))
  })

  it("answers a wait on an alias that gets no mail with a timeout problem", async () => {
    const alias = await client.aliases.create()
    const started = Date.now()
    const problem = await problemOf(client.messages.wait({ alias, timeout: 1 }))
    expect(problem).toMatchObject({ code: "timeout", status: 0 })
    expect(Date.now() - started).toBeGreaterThanOrEqual(900)
    // Ends at its timeout, not later (a generous bound for a busy machine).
    expect(Date.now() - started).toBeLessThan(10_000)
  })

  it("only waits for mail received since the given instant", async () => {
    const alias = await client.aliases.create()
    await client.testMessages.inject({ aliasId: alias.id, from: "a@example.com", subject: "old", text: "old" })
    await client.messages.wait({ alias, timeout: 20 })
    const since = new Date(h.clock.now().getTime() + 1000)
    h.clock.set(since.getTime() + 1000)
    await h.untilRealtimeSubscriptions(0)
    const [waited] = await Promise.all([
      client.messages.wait({ alias: alias.id, since, timeout: 20 }),
      // Sent once the wait is waiting in the service.
      h.untilRealtimeSubscriptions(1).then(() =>
        client.testMessages.inject({ aliasId: alias.id, from: "a@example.com", subject: "new", text: "code 7731" }))
    ])
    expect(waited).toMatchObject({ subject: "new", otpCodes: ["7731"] })
  })

  it("turns the server's Problems into typed BurnboxProblems with code and fields", async () => {
    const unknown = await problemOf(client.aliases.burn(999_999))
    expect(unknown).toMatchObject({ status: 404, code: "not_found" })
    expect(unknown.detail).toEqual(unknown.message)

    const byAddress = await problemOf(client.aliases.burn("nobody@nowhere.example"))
    expect(byAddress).toMatchObject({ status: 404, code: "not_found" })

    const alias = await client.aliases.create()
    const invalid = await problemOf(client.testMessages.inject({ aliasId: alias.id, from: "a@example.com", subject: "no body" }))
    expect(invalid).toMatchObject({ status: 422, code: "validation_failed" })
    expect(invalid.fields).toBeDefined()

    const badSince = await problemOf(client.messages.wait({ alias, since: "yesterday-ish" }))
    expect(badSince).toMatchObject({ code: "validation_failed", fields: { since: "invalid_date_time" } })

    const refused = await problemOf(createClient({ baseUrl: h.baseUrl, token: "bbx_not_a_token" }).aliases.find("a@b.example"))
    expect(refused).toMatchObject({ status: 401, code: "invalid_token" })
  })

  it("a wait outlasts transient problems (no answer, 429, 503) and fails at once on any other", async () => {
    const session = await h.signup({ plan: "pro" })
    const token = await h.createToken(session, ["read", "manage-aliases", "test"])
    const own = createClient({ baseUrl: h.baseUrl, token })
    const alias = await own.aliases.create()
    /** The first list requests of a wait meet what `troubles` says, in order; the rest go through. */
    const flaky = (troubles: Array<"no answer" | number>) => {
      const met: Array<string> = []
      const troubled = createClient({
        baseUrl: h.baseUrl,
        token,
        fetch: (input, init) => {
          const url = input instanceof Request ? input.url : String(input)
          const trouble = url.includes("/api/v1/messages?") ? troubles.shift() : undefined
          if (trouble === undefined) return fetch(input, init)
          met.push(String(trouble))
          if (trouble === "no answer") return Promise.reject(new TypeError("fetch failed"))
          const body = JSON.stringify({ error: { code: trouble === 429 ? "rate_limited" : "service_unavailable", message: "Try again." } })
          return Promise.resolve(new Response(body, { status: trouble, headers: { "content-type": "application/json" } }))
        }
      })
      return { client: troubled, met }
    }
    const outlasting = flaky(["no answer", 503, 429])
    const waiting = outlasting.client.messages.wait({ alias, timeout: 20 })
    const injected = await own.testMessages.inject({ aliasId: alias.id, from: "shop@example.com", subject: "After the troubles", text: "code 482913" })
    expect(await waiting).toMatchObject({ id: injected.id, otpCodes: ["482913"] })
    expect(outlasting.met).toEqual(["no answer", "503", "429"])

    // Not transient: the wait ends with it at once.
    const refused = flaky([404])
    expect(await problemOf(refused.client.messages.wait({ alias, timeout: 20 }))).toMatchObject({ status: 404 })
    // Transient until the deadline: the wait ends with the problem itself, not a bare timeout.
    const down = flaky(Array.from({ length: 50 }, () => "no answer" as const))
    expect(await problemOf(down.client.messages.wait({ alias, timeout: 2 }))).toMatchObject({ status: 0, code: "network_error" })
    // Tried again meanwhile (the schedule itself: wait-retries.test.ts, on TestClock).
    expect(down.met.length).toBeGreaterThan(1)
  })

  it("sends requests through the fetch it is given", async () => {
    const seen: Array<string> = []
    const session = await h.signup({ plan: "pro" })
    const token = await h.createToken(session, ["read"])
    const spying = createClient({
      baseUrl: `${h.baseUrl}/`,
      token,
      fetch: (input, init) => {
        seen.push(input instanceof Request ? input.url : String(input))
        return fetch(input, init)
      }
    })
    expect(await spying.messages.list()).toMatchObject({ items: [], total: 0 })
    expect(await spying.run(spying.raw.account.me())).toMatchObject({ email: session.email })
    expect(seen).toHaveLength(2)
    expect(seen[0]).toContain("/api/v1/messages")
  })
})
