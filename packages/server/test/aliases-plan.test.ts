/**
 * Plan limits on aliases (spec 2.2, 4.3, 7; decisions.md Plans table): active and lifetime
 * caps, claims a day, candidate shuffles an hour, early-access domains, and plan changes
 * (spec 3.1: a downgrade pauses beyond the cap and suspends timers; an upgrade undoes both).
 */
import { Account, Alias, CandidateReservation, MailDomain } from "@burnbox/domain"
import { expectShape, type Harness, type Session, startHarness } from "@burnbox/testkit"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 4404 })
})
afterAll(() => h.close())

type Answer = { status: number; body: any; text: string; headers: Headers }
type Reservation = typeof CandidateReservation.Type

const MINUTE = 60_000
const AliasList = Schema.Struct({ items: Schema.Array(Alias) })

const expectRefused = (answer: Answer, status: number) => {
  expect(answer.status, answer.text).toBe(status)
  expect(typeof answer.body?.error?.code, answer.text).toBe("string")
  expect(Object.keys(answer.body)).toEqual(["error"])
}

/** A 429 with an integer Retry-After (spec 7), returned in seconds. */
const expectRetryAfter = (answer: Answer, max: number) => {
  expectRefused(answer, 429)
  const header = answer.headers.get("retry-after")
  expect(header, "Retry-After").toMatch(/^\d+$/)
  const seconds = Number(header)
  expect(seconds).toBeGreaterThanOrEqual(1)
  expect(seconds).toBeLessThanOrEqual(max)
  return seconds
}

const reserve = (session: Session, domainId = 1) =>
  h.request<Reservation>("/aliases/candidates", { method: "POST", session, body: { domainId, style: "words" } })

/** A shuffle: new candidates, the previous ones given back (reservations are independent and capped). */
const shuffle = async (session: Session) => {
  const answer = await reserve(session)
  if (answer.status === 200) {
    const released = await h.request("/aliases/candidates", { method: "DELETE", session, body: { reservationToken: answer.body.reservationToken } })
    expect(released.status, released.text).toBe(200)
  }
  return answer
}

const claim = async (session: Session, extra: Record<string, unknown> = {}, domainId = 1) => {
  const reservation = await reserve(session, domainId)
  expect(reservation.status, reservation.text).toBe(200)
  return h.request("/aliases", {
    method: "POST",
    session,
    body: { aliasId: reservation.body.candidates[0]!.id, reservationToken: reservation.body.reservationToken, ...extra }
  })
}

const claimNew = async (session: Session, extra: Record<string, unknown> = {}, domainId = 1) => {
  const answer = await claim(session, extra, domainId)
  expect(answer.status, answer.text).toBe(201)
  return expectShape(Alias, answer.body)
}

const me = async (session: Session) => expectShape(Account, (await h.request("/me", { session })).body)
const aliases = async (session: Session) =>
  new Map(expectShape(AliasList, (await h.request("/aliases?includeBurned=true", { session })).body).items.map((a) => [a.id, a]))
const burn = (session: Session, id: number) => h.request(`/aliases/${id}/burn`, { method: "POST", session })
const setOverrides = (accountId: number, overrides: Record<string, unknown>) =>
  h.query("UPDATE accounts SET overrides = $1 WHERE id = $2", [JSON.stringify(overrides), accountId])

describe("the plans' alias limits (decisions.md Plans table, spec 2.2)", () => {
  it("free, premium and pro report their caps in the account's plan", async () => {
    const expected = {
      free: { activeAliasCap: 3, aliasLifetimeCap: 50, claimsPerDay: 5, candidateShufflesPerHour: 10, candidateShufflesUnlimited: false, earlyAccessDomains: false, selfDestructTimers: false },
      premium: { activeAliasCap: 20, aliasLifetimeCap: 500, claimsPerDay: 30, candidateShufflesPerHour: 60, candidateShufflesUnlimited: false, earlyAccessDomains: true, selfDestructTimers: true },
      pro: { activeAliasCap: 200, aliasLifetimeCap: 10000, claimsPerDay: 200, candidateShufflesUnlimited: true, earlyAccessDomains: true, selfDestructTimers: true }
    }
    const session = await h.signup()
    for (const [plan, limits] of Object.entries(expected)) {
      await h.setPlan(session.accountId, plan as "free")
      expect((await me(session)).plan, plan).toMatchObject({ code: plan, ...limits })
    }
  })
})

describe("activeAliasCap (spec 4.3: 409)", () => {
  it("free holds three active aliases: the fourth claim is 409; a paused alias leaves room, and so does a burned one", async () => {
    h.clock.set(Date.parse("2026-11-21T12:00:00.000Z"))
    const session = await h.signup()
    const [first, second] = [await claimNew(session), await claimNew(session), await claimNew(session)]
    expectRefused(await claim(session), 409)
    expect(await me(session)).toMatchObject({ activeAliasCount: 3, aliasesLifetimeClaimed: 3 })

    await h.request(`/aliases/${first!.id}/pause`, { method: "POST", session })
    await claimNew(session)
    expect(await me(session)).toMatchObject({ activeAliasCount: 3, aliasesLifetimeClaimed: 4 })
    await burn(session, second!.id)
    await claimNew(session)
    expect(await me(session)).toMatchObject({ activeAliasCount: 3, aliasesLifetimeClaimed: 5 })
  })

  it("follows a per-account override of activeAliasCap", async () => {
    const session = await h.signup()
    await setOverrides(session.accountId, { activeAliasCap: 1 })
    await claimNew(session)
    expectRefused(await claim(session), 409)
    expect(await me(session)).toMatchObject({ activeAliasCount: 1, aliasesLifetimeClaimed: 1 })
  })
})

describe("aliasLifetimeCap (spec 4.3: 409)", () => {
  it("burned aliases still count: with a cap of 2, two claimed and burned leave no third", async () => {
    const session = await h.signup()
    await setOverrides(session.accountId, { aliasLifetimeCap: 2 })
    for (let i = 0; i < 2; i++) expect((await burn(session, (await claimNew(session)).id)).status).toBe(200)
    expectRefused(await claim(session), 409)
    expect(await me(session)).toMatchObject({ activeAliasCount: 0, aliasesLifetimeClaimed: 2 })
    expect((await me(session)).plan.aliasLifetimeCap).toBe(2)
  })

  it("free stops at 50 claims in all", async () => {
    const session = await h.signup()
    await h.query("INSERT INTO alias_claim_counts (account_id, lifetime) VALUES ($1, 49) ON CONFLICT (account_id) DO UPDATE SET lifetime = 49", [session.accountId])
    await claimNew(session)
    expect(await me(session)).toMatchObject({ aliasesLifetimeClaimed: 50 })
    expectRefused(await claim(session), 409)
    expect(await me(session)).toMatchObject({ aliasesLifetimeClaimed: 50, activeAliasCount: 1 })
  })
})

describe("claimsPerDay (spec 4.3: 429 with Retry-After)", () => {
  it("free claims five a day, burned ones included; the sixth is 429 until the window passes", async () => {
    h.clock.set(Date.parse("2026-12-01T20:00:00.000Z"))
    const session = await h.signup()
    for (let i = 0; i < 5; i++) {
      const alias = await claimNew(session)
      await burn(session, alias.id)
      h.clock.advance("1 minute")
    }
    const refused = await claim(session)
    const wait = expectRetryAfter(refused, 86_400)
    expect(await me(session)).toMatchObject({ aliasesLifetimeClaimed: 5, activeAliasCount: 0 })

    h.clock.advance(`${wait} seconds`)
    const next = await claim(session)
    expect(next.status, next.text).toBe(201)
    expect(await me(session)).toMatchObject({ aliasesLifetimeClaimed: 6, activeAliasCount: 1 })
  })

  it("follows a per-account override (claimsPerDay 1), and a refused claim is not counted", async () => {
    h.clock.set(Date.parse("2026-12-03T09:00:00.000Z"))
    const session = await h.signup()
    await setOverrides(session.accountId, { claimsPerDay: 1 })
    await claimNew(session)
    const wait = expectRetryAfter(await claim(session), 86_400)
    expectRetryAfter(await claim(session), 86_400)
    h.clock.advance(`${wait} seconds`)
    expect((await claim(session)).status).toBe(201)
  })
})

describe("plan-limit refusals over a bearer token (spec 7: 429 headers)", () => {
  it("a claimsPerDay refusal carries Retry-After and the RateLimit headers", async () => {
    h.clock.set(Date.parse("2026-12-04T09:00:00.000Z"))
    const session = await h.signup({ plan: "pro" })
    await setOverrides(session.accountId, { claimsPerDay: 1 })
    const token = await h.createToken(session, ["read", "manage-aliases"])
    const once = async () => {
      const reservation = await h.request<Reservation>("/aliases/candidates", { method: "POST", token, body: { domainId: 1, style: "numeric" } })
      expect(reservation.status, reservation.text).toBe(200)
      return h.request("/aliases", { method: "POST", token, body: { aliasId: reservation.body.candidates[0]!.id, reservationToken: reservation.body.reservationToken } })
    }
    expect((await once()).status).toBe(201)
    const refused = await once()
    expectRetryAfter(refused, 86_400)
    for (const name of ["ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"]) expect(refused.headers.get(name), name).toMatch(/^\d+$/)
    expect(refused.headers.get("ratelimit-policy")).toEqual(expect.any(String))
  })
})

describe("candidateShufflesPerHour (spec 4.3: 429 with Retry-After)", () => {
  it("free reserves ten times an hour; the eleventh is 429 until the window passes", async () => {
    h.clock.set(Date.parse("2026-12-02T10:30:00.000Z"))
    const session = await h.signup()
    for (let i = 0; i < 10; i++) {
      const answer = await shuffle(session)
      expect(answer.status, `shuffle ${i + 1}: ${answer.text}`).toBe(200)
      h.clock.advance("1 minute")
    }
    const wait = expectRetryAfter(await reserve(session), 3600)
    h.clock.advance(`${wait} seconds`)
    const again = await reserve(session)
    expect(again.status, again.text).toBe(200)
    expect(expectShape(CandidateReservation, again.body).candidates).toHaveLength(5)
  })

  it("premium reserves sixty times an hour; pro is unlimited", async () => {
    h.clock.set(Date.parse("2026-12-02T14:00:00.000Z"))
    const premium = await h.signup({ plan: "premium" })
    for (let i = 0; i < 60; i++) expect((await shuffle(premium)).status, `shuffle ${i + 1}`).toBe(200)
    expectRetryAfter(await reserve(premium), 3600)
    const pro = await h.signup({ plan: "pro" })
    for (let i = 0; i < 70; i++) expect((await shuffle(pro)).status, `shuffle ${i + 1}`).toBe(200)
  })

  it("one account's shuffles do not count against another's", async () => {
    h.clock.set(Date.parse("2026-12-02T16:00:00.000Z"))
    const [a, b] = [await h.signup(), await h.signup()]
    await setOverrides(a.accountId, { candidateShufflesPerHour: 1 })
    expect((await reserve(a)).status).toBe(200)
    expectRetryAfter(await reserve(a), 3600)
    expect((await reserve(b)).status).toBe(200)
  })
})

describe("premium_only domains need earlyAccessDomains (spec 2.6, 4.3: 403)", () => {
  it("a vip.test candidate reserved on premium cannot be claimed after the account lost early access", async () => {
    const session = await h.signup({ plan: "premium" })
    const reservation = await reserve(session, 2)
    expect(reservation.status, reservation.text).toBe(200)
    await h.setPlan(session.accountId, "free")
    const refused = await h.request("/aliases", {
      method: "POST",
      session,
      body: { aliasId: reservation.body.candidates[0]!.id, reservationToken: reservation.body.reservationToken }
    })
    expectRefused(refused, 403)
    expect((await aliases(session)).size).toBe(0)
  })

  it("an earlyAccessDomains override makes vip.test claimable on free", async () => {
    const session = await h.signup()
    await setOverrides(session.accountId, { earlyAccessDomains: true })
    const domains = expectShape(Schema.Struct({ items: Schema.Array(MailDomain) }), (await h.request("/domains", { session })).body).items
    expect(domains.find((d) => d.id === 2)).toMatchObject({ claimable: true, upgradeRequired: false })
    const alias = await claimNew(session, {}, 2)
    expect(alias).toMatchObject({ domainTier: "premium_only", domain: { id: 2, name: "vip.test" } })
  })
})

/**
 * A premium account with six aliases claimed a minute apart: the oldest paused by hand, then
 * five active ones; timers on the second-oldest active and the newest.
 */
const premiumWithSix = async () => {
  h.clock.set(Date.parse("2026-11-25T08:00:00.000Z"))
  const session = await h.signup({ plan: "premium" })
  const deadline = new Date(Date.parse("2026-11-28T08:00:00.000Z")).toISOString()
  const manual = await claimNew(session)
  await h.request(`/aliases/${manual.id}/pause`, { method: "POST", session })
  const active: Array<typeof Alias.Type> = []
  for (let i = 0; i < 5; i++) {
    h.clock.advance(MINUTE)
    active.push(await claimNew(session, i === 1 || i === 4 ? { selfDestructAt: deadline } : {}))
  }
  h.clock.advance(MINUTE)
  return { session, manual, active, deadline }
}

const pausedEvents = async (accountId: number) =>
  (await h.query<{ alias_id: number }>("SELECT alias_id FROM events WHERE account_id = $1 AND type = 'alias.paused' ORDER BY alias_id", [accountId]))
    .map((r) => r.alias_id)

/** The spec 3.1 downgrade and upgrade rules, whichever way the plan change was applied. */
const expectDowngraded = async ({ session, manual, active, deadline }: Awaited<ReturnType<typeof premiumWithSix>>) => {
  const now = await aliases(session)
  const [a1, a2, a3, a4, a5] = active.map((a) => now.get(a.id)!)
  // The three oldest active aliases keep receiving; the two most recently claimed give way.
  for (const kept of [a1, a2, a3]) expect(kept).toMatchObject({ status: "active", planPaused: false })
  for (const paused of [a4, a5]) {
    expect(paused).toMatchObject({ status: "paused", planPaused: true })
    expect(paused!.pausedAt).not.toBeNull()
  }
  // The alias paused by hand is not plan-paused.
  expect(now.get(manual.id)).toMatchObject({ status: "paused", planPaused: false })
  // Preserved timers are suspended; aliases without a timer are not.
  expect(a2).toMatchObject({ selfDestructAt: deadline, selfDestructSuspended: true })
  expect(a5).toMatchObject({ selfDestructAt: deadline, selfDestructSuspended: true })
  for (const plain of [a1, a3, a4]) expect(plain).toMatchObject({ selfDestructAt: null, selfDestructSuspended: false })
  expect(await me(session)).toMatchObject({ activeAliasCount: 3, aliasesLifetimeClaimed: 6 })
  // One alias.paused for the hand pause and one for each plan pause.
  expect(await pausedEvents(session.accountId)).toEqual([manual.id, a4!.id, a5!.id].sort((x, y) => x - y))
}

const expectUpgraded = async ({ session, manual, active, deadline }: Awaited<ReturnType<typeof premiumWithSix>>) => {
  const now = await aliases(session)
  for (const alias of active) expect(now.get(alias.id)).toMatchObject({ status: "active", planPaused: false, selfDestructSuspended: false })
  expect(now.get(active[1]!.id)).toMatchObject({ selfDestructAt: deadline })
  expect(now.get(active[4]!.id)).toMatchObject({ selfDestructAt: deadline })
  // An upgrade undoes plan pauses only.
  expect(now.get(manual.id)).toMatchObject({ status: "paused", planPaused: false })
  expect(await me(session)).toMatchObject({ activeAliasCount: 5 })
  expect(await pausedEvents(session.accountId)).toHaveLength(3)
}

describe("plan changes through the operator CLI (decisions.md: admin account plan applies its effects)", () => {
  it("a downgrade pauses the most recently claimed aliases beyond the cap (planPaused) and suspends timers; an upgrade undoes both", async () => {
    const account = await premiumWithSix()
    const down = await h.cli(["admin", "account", "plan", "--email", account.session.email, "--plan", "free"])
    expect(down.code, down.stderr).toBe(0)
    expect(down.json).toEqual({ id: account.session.accountId, email: account.session.email, plan: "free" })
    h.clock.advance("3 seconds")
    await expectDowngraded(account)

    const up = await h.cli(["admin", "account", "plan", "--email", account.session.email, "--plan", "premium"])
    expect(up.code, up.stderr).toBe(0)
    h.clock.advance("3 seconds")
    await expectUpgraded(account)
  })
})

describe("plan changes through the worker's reconciliation (spec 3.1)", () => {
  it("a downgrade pauses the most recently claimed aliases beyond the cap (planPaused) and suspends timers; an upgrade undoes both", async () => {
    const account = await premiumWithSix()
    await h.setPlan(account.session.accountId, "free")
    expect(await h.worker.reconcilePlan(account.session.accountId)).toEqual({ paused: 2, resumed: 0 })
    await expectDowngraded(account)
    const pausedAt = (await aliases(account.session)).get(account.active[4]!.id)!.pausedAt
    expect(pausedAt).toBe(h.clock.now().toISOString())

    // A second run changes nothing and writes nothing.
    h.clock.advance(MINUTE)
    expect(await h.worker.reconcilePlan(account.session.accountId)).toEqual({ paused: 0, resumed: 0 })
    await expectDowngraded(account)
    expect((await aliases(account.session)).get(account.active[4]!.id)!.pausedAt).toBe(pausedAt)

    await h.setPlan(account.session.accountId, "premium")
    expect(await h.worker.reconcilePlan(account.session.accountId)).toEqual({ paused: 0, resumed: 2 })
    await expectUpgraded(account)
    expect(await h.worker.reconcilePlan(account.session.accountId)).toEqual({ paused: 0, resumed: 0 })
  })

  it("while downgraded, the account cannot claim past the new cap", async () => {
    const account = await premiumWithSix()
    await h.setPlan(account.session.accountId, "free")
    await h.worker.reconcilePlan(account.session.accountId)
    expectRefused(await claim(account.session), 409)
    expect(await me(account.session)).toMatchObject({ activeAliasCount: 3, aliasesLifetimeClaimed: 6 })
  })
})
