/**
 * Self-destruct timers (spec 2.8, 3.1, 4.3), the worker's timer run and alias.expiring notice
 * (spec 6.1, 6.3), and the candidate reservation's ten-minute lifetime (decisions.md), all on
 * the harness clock.
 */
import { Alias, AliasTimer, CandidateReservation } from "@burnbox/domain"
import { expectShape, type Harness, type Session, startHarness } from "@burnbox/testkit"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 3303 })
})
afterAll(() => h.close())

type Answer = { status: number; body: any; text: string }
type Reservation = typeof CandidateReservation.Type

const T0 = Date.parse("2026-11-21T12:00:00.000Z")
const HOUR = 3_600_000
const DAY = 24 * HOUR
const at = (ms: number) => new Date(ms).toISOString()
const AliasList = Schema.Struct({ items: Schema.Array(Alias) })

const expectRefused = (answer: Answer, status: number) => {
  expect(answer.status, answer.text).toBe(status)
  expect(typeof answer.body?.error?.code, answer.text).toBe("string")
  expect(Object.keys(answer.body)).toEqual(["error"])
}

const expectFields = (answer: Answer, fields: ReadonlyArray<string>) => {
  expect(answer.status, answer.text).toBe(422)
  expect(answer.body.error.code).toBe("validation_failed")
  expect(Object.keys(answer.body.error.fields ?? {}).sort(), answer.text).toEqual([...fields].sort())
}

const reserve = async (session: Session) => {
  const answer = await h.request<Reservation>("/aliases/candidates", { method: "POST", session, body: { domainId: 1, style: "words" } })
  expect(answer.status, answer.text).toBe(200)
  return answer.body
}

const claim = async (session: Session, extra: Record<string, unknown> = {}) => {
  const reservation = await reserve(session)
  return h.request("/aliases", {
    method: "POST",
    session,
    body: { aliasId: reservation.candidates[0]!.id, reservationToken: reservation.reservationToken, ...extra }
  })
}

const claimNew = async (session: Session, extra: Record<string, unknown> = {}) => {
  const answer = await claim(session, extra)
  expect(answer.status, answer.text).toBe(201)
  return expectShape(Alias, answer.body)
}

const aliasOf = async (session: Session, id: number) =>
  expectShape(AliasList, (await h.request("/aliases?includeBurned=true", { session })).body).items.find((a) => a.id === id)!

const putTimer = (session: Session, id: number, selfDestructAt: unknown) =>
  h.request(`/aliases/${id}/timer`, { method: "PUT", session, body: { selfDestructAt } })

const eventsOf = (aliasId: number, type?: string) =>
  h.query<{ id: string; type: string; time: Date; data: any }>(
    `SELECT id, type, time, data FROM events WHERE alias_id = $1 ${type ? "AND type = $2" : ""} ORDER BY time, id`,
    type ? [aliasId, type] : [aliasId]
  )

const runTimersAt = async (ms: number) => {
  h.clock.set(ms)
  return h.worker.runTimers()
}

describe("selfDestructAt on claim (spec 4.3: Premium/Pro; alias burns automatically then)", () => {
  it("needs selfDestructTimers: 403 on free, and nothing is claimed", async () => {
    h.clock.set(T0)
    const session = await h.signup()
    expectRefused(await claim(session, { selfDestructAt: at(T0 + DAY) }), 403)
    expect(expectShape(AliasList, (await h.request("/aliases?includeBurned=true", { session })).body).items).toEqual([])
    expect((await h.request("/me", { session })).body).toMatchObject({ activeAliasCount: 0, aliasesLifetimeClaimed: 0 })
  })

  it("must be in the future: a past or present deadline is 422 naming selfDestructAt", async () => {
    h.clock.set(T0)
    const session = await h.signup({ plan: "premium" })
    for (const deadline of [at(T0 - 1000), at(T0)]) expectFields(await claim(session, { selfDestructAt: deadline }), ["selfDestructAt"])
    // Of the right form, but no real instant.
    for (const deadline of ["2027-02-30T00:00:00Z", "2027-01-01T23:60:00Z"]) expectFields(await claim(session, { selfDestructAt: deadline }), ["selfDestructAt"])
    expect((await h.request("/me", { session })).body).toMatchObject({ aliasesLifetimeClaimed: 0 })
  })

  it("on premium and pro the claimed alias carries the deadline; alias.claimed reports claimed_at", async () => {
    h.clock.set(T0)
    for (const plan of ["premium", "pro"] as const) {
      const session = await h.signup({ plan })
      const alias = await claimNew(session, { selfDestructAt: "2026-11-24T12:00:00Z" })
      expect(alias).toMatchObject({ status: "active", selfDestructAt: "2026-11-24T12:00:00.000Z", selfDestructSuspended: false, expiringNotifiedAt: null })
      const [claimed] = await eventsOf(alias.id, "alias.claimed")
      expect(claimed!.data.claimed_at).toBe(at(T0))
      expect(claimed!.data.alias).toEqual({ id: alias.id, address: alias.address, label: null })
      for (const key of Object.keys(claimed!.data)) expect(["alias", "claimed_at", "self_destruct_at"]).toContain(key)
      if ("self_destruct_at" in claimed!.data) expect(claimed!.data.self_destruct_at).toBe("2026-11-24T12:00:00.000Z")
    }
  })
})

describe("PUT /aliases/{id}/timer (spec 2.8, 4.3)", () => {
  it("sets the deadline: 200 AliasTimer with exactly id, selfDestructAt, selfDestructSuspended, expiringNotifiedAt", async () => {
    h.clock.set(T0)
    const session = await h.signup({ plan: "premium" })
    const alias = await claimNew(session)
    const answer = await putTimer(session, alias.id, "2026-11-23T00:00:00+02:00")
    expect(answer.status, answer.text).toBe(200)
    expect(expectShape(AliasTimer, answer.body)).toEqual({ id: alias.id, selfDestructAt: "2026-11-22T22:00:00.000Z", selfDestructSuspended: false, expiringNotifiedAt: null })
    expect(await aliasOf(session, alias.id)).toMatchObject({ selfDestructAt: "2026-11-22T22:00:00.000Z", status: "active" })
  })

  it("needs selfDestructTimers: 403 on free; a deadline not in the future is 422 naming selfDestructAt", async () => {
    h.clock.set(T0)
    const free = await h.signup()
    const alias = await claimNew(free)
    expectRefused(await putTimer(free, alias.id, at(T0 + DAY)), 403)
    expect(await aliasOf(free, alias.id)).toMatchObject({ selfDestructAt: null })
    const premium = await h.signup({ plan: "premium" })
    const other = await claimNew(premium)
    for (const deadline of [at(T0 - DAY), at(T0)]) expectFields(await putTimer(premium, other.id, deadline), ["selfDestructAt"])
  })

  it("a burned alias has no timer to set or cancel: 409", async () => {
    h.clock.set(T0)
    const session = await h.signup({ plan: "premium" })
    const alias = await claimNew(session, { selfDestructAt: at(T0 + 2 * DAY) })
    await h.request(`/aliases/${alias.id}/burn`, { method: "POST", session })
    expectRefused(await putTimer(session, alias.id, at(T0 + 3 * DAY)), 409)
    expectRefused(await h.request(`/aliases/${alias.id}/timer`, { method: "DELETE", session }), 409)
  })

  it("a new future deadline replaces the old one and resets the 24-hour notice marker", async () => {
    h.clock.set(T0)
    const session = await h.signup({ plan: "premium" })
    const first = T0 + 2 * DAY
    const alias = await claimNew(session, { selfDestructAt: at(first), label: "trial" })
    await runTimersAt(first - 12 * HOUR)
    expect(await aliasOf(session, alias.id)).toMatchObject({ expiringNotifiedAt: at(first - 12 * HOUR) })

    const second = T0 + 5 * DAY
    const replaced = await putTimer(session, alias.id, at(second))
    expect(replaced.body).toEqual({ id: alias.id, selfDestructAt: at(second), selfDestructSuspended: false, expiringNotifiedAt: null })
    // The old deadline passes without a burn or a notice.
    await runTimersAt(first + HOUR)
    expect(await aliasOf(session, alias.id)).toMatchObject({ status: "active", expiringNotifiedAt: null, burnedAt: null })
    // The new one gets its own notice and then burns.
    await runTimersAt(second - 6 * HOUR)
    expect(await aliasOf(session, alias.id)).toMatchObject({ status: "active", expiringNotifiedAt: at(second - 6 * HOUR) })
    await runTimersAt(second)
    expect(await aliasOf(session, alias.id)).toMatchObject({ status: "burned", burnedAt: at(second) })
    const expiring = await eventsOf(alias.id, "alias.expiring")
    expect(expiring.map((e) => e.data)).toEqual([
      { alias: { id: alias.id, address: alias.address, label: "trial" }, self_destruct_at: at(first) },
      { alias: { id: alias.id, address: alias.address, label: "trial" }, self_destruct_at: at(second) }
    ])
  })
})

describe("the worker's timer run (spec 3.1: deadline reached, timer not suspended)", () => {
  it("emits alias.expiring once, within 24 hours of the deadline, setting expiringNotifiedAt", async () => {
    h.clock.set(T0)
    const session = await h.signup({ plan: "premium" })
    const deadline = T0 + 3 * DAY
    const alias = await claimNew(session, { selfDestructAt: at(deadline), label: "soon" })

    await runTimersAt(deadline - 25 * HOUR)
    expect(await aliasOf(session, alias.id)).toMatchObject({ expiringNotifiedAt: null })
    expect(await eventsOf(alias.id, "alias.expiring")).toEqual([])

    const noticeAt = deadline - 23 * HOUR
    await runTimersAt(noticeAt)
    expect(await aliasOf(session, alias.id)).toMatchObject({ status: "active", expiringNotifiedAt: at(noticeAt) })
    await runTimersAt(deadline - 2 * HOUR)
    await runTimersAt(deadline - 1)
    const rows = await eventsOf(alias.id, "alias.expiring")
    expect(rows).toHaveLength(1)
    expect(rows[0]!.id).toMatch(/^evt_[0-9A-HJKMNP-TV-Z]{26}$/)
    expect(rows[0]!.time.toISOString()).toBe(at(noticeAt))
    expect(rows[0]!.data).toEqual({ alias: { id: alias.id, address: alias.address, label: "soon" }, self_destruct_at: at(deadline) })
  })

  it("burns the alias when selfDestructAt is reached, not a millisecond before: burnedAt and one alias.burned", async () => {
    h.clock.set(T0)
    const session = await h.signup({ plan: "premium" })
    const deadline = T0 + 2 * DAY + 1234
    const alias = await claimNew(session, { selfDestructAt: at(deadline) })
    await runTimersAt(deadline - 1)
    expect(await aliasOf(session, alias.id)).toMatchObject({ status: "active", burnedAt: null })
    const result = await runTimersAt(deadline)
    expect(result.burned).toBeGreaterThanOrEqual(1)
    expect(await aliasOf(session, alias.id)).toMatchObject({ status: "burned", burnedAt: at(deadline), selfDestructAt: at(deadline) })
    await runTimersAt(deadline + HOUR)
    const burned = await eventsOf(alias.id, "alias.burned")
    expect(burned).toHaveLength(1)
    expect(burned[0]!.data).toEqual({ alias: { id: alias.id, address: alias.address, label: null }, burned_at: at(deadline) })
    // It leaves the default list, like any burned alias, and stays burned.
    expect(expectShape(AliasList, (await h.request("/aliases", { session })).body).items.map((a) => a.id)).not.toContain(alias.id)
    expectRefused(await h.request(`/aliases/${alias.id}/resume`, { method: "POST", session }), 409)
  })

  it("a deadline set less than 24 hours ahead gets its notice on the next run", async () => {
    h.clock.set(T0)
    const session = await h.signup({ plan: "premium" })
    const alias = await claimNew(session)
    await putTimer(session, alias.id, at(T0 + 2 * HOUR))
    await runTimersAt(T0 + 1000)
    expect(await aliasOf(session, alias.id)).toMatchObject({ status: "active", expiringNotifiedAt: at(T0 + 1000) })
    expect(await eventsOf(alias.id, "alias.expiring")).toHaveLength(1)
  })
})

describe("timer runs racing each other and the owner (spec 6: one event per transition)", () => {
  it("two workers running the timers at once write one alias.expiring, then one alias.burned", async () => {
    h.clock.set(T0)
    const session = await h.signup({ plan: "premium" })
    const deadline = T0 + DAY + HOUR
    const alias = await claimNew(session, { selfDestructAt: at(deadline) })
    h.clock.set(deadline - 2 * HOUR)
    await Promise.all([h.worker.runTimers(), h.worker.runTimers(), h.worker.runTimers()])
    h.clock.set(deadline)
    await Promise.all([h.worker.runTimers(), h.worker.runTimers(), h.worker.runTimers()])
    expect((await eventsOf(alias.id)).map((e) => e.type).sort()).toEqual(["alias.burned", "alias.claimed", "alias.expiring"])
    expect(await aliasOf(session, alias.id)).toMatchObject({ status: "burned", burnedAt: at(deadline), expiringNotifiedAt: at(deadline - 2 * HOUR) })
  })

  it("the owner burning at the deadline while the worker runs: burned once, one alias.burned", async () => {
    h.clock.set(T0)
    const session = await h.signup({ plan: "premium" })
    const deadline = T0 + 2 * HOUR
    const alias = await claimNew(session, { selfDestructAt: at(deadline) })
    h.clock.set(deadline)
    const [, answer] = await Promise.all([h.worker.runTimers(), h.request(`/aliases/${alias.id}/burn`, { method: "POST", session })])
    expect(answer.status, answer.text).toBe(200)
    expect(answer.body.status).toBe("burned")
    expect(await eventsOf(alias.id, "alias.burned")).toHaveLength(1)
  })
})

describe("DELETE /aliases/{id}/timer (spec 4.3)", () => {
  it("clears the timer: 200 AliasTimer with nulls, and the worker never burns the alias", async () => {
    h.clock.set(T0)
    const session = await h.signup({ plan: "premium" })
    const deadline = T0 + DAY
    const alias = await claimNew(session, { selfDestructAt: at(deadline) })
    await runTimersAt(T0 + HOUR)
    expect(await aliasOf(session, alias.id)).toMatchObject({ expiringNotifiedAt: at(T0 + HOUR) })
    const cleared = await h.request(`/aliases/${alias.id}/timer`, { method: "DELETE", session })
    expect(cleared.status, cleared.text).toBe(200)
    expect(expectShape(AliasTimer, cleared.body)).toEqual({ id: alias.id, selfDestructAt: null, selfDestructSuspended: false, expiringNotifiedAt: null })
    await runTimersAt(deadline + HOUR)
    expect(await aliasOf(session, alias.id)).toMatchObject({ status: "active", selfDestructAt: null, burnedAt: null })
    expect(await eventsOf(alias.id, "alias.burned")).toEqual([])
  })
})

describe("suspended timers (spec 2.7 selfDestructSuspended, 3.1, 4.3)", () => {
  it("after a downgrade the timer is suspended: never notices, never burns; cancelling stays allowed; an upgrade resumes it", async () => {
    h.clock.set(T0)
    const session = await h.signup({ plan: "premium" })
    const cancelled = await claimNew(session, { selfDestructAt: at(T0 + 2 * DAY) })
    const kept = await claimNew(session, { selfDestructAt: at(T0 + 10 * DAY) })

    await h.setPlan(session.accountId, "free")
    await h.worker.reconcilePlan(session.accountId)
    for (const alias of [cancelled, kept]) {
      expect(await aliasOf(session, alias.id)).toMatchObject({ status: "active", selfDestructAt: alias.selfDestructAt, selfDestructSuspended: true })
    }
    // Past the first deadline: no notice, no burn.
    await runTimersAt(T0 + 2 * DAY - HOUR)
    await runTimersAt(T0 + 3 * DAY)
    expect(await aliasOf(session, cancelled.id)).toMatchObject({ status: "active", burnedAt: null, expiringNotifiedAt: null, selfDestructSuspended: true })
    expect(await eventsOf(cancelled.id, "alias.expiring")).toEqual([])
    expect(await eventsOf(cancelled.id, "alias.burned")).toEqual([])

    // Without the entitlement no new deadline can be set, but the suspended one can be cancelled.
    expectRefused(await putTimer(session, kept.id, at(T0 + 20 * DAY)), 403)
    const cleared = await h.request(`/aliases/${cancelled.id}/timer`, { method: "DELETE", session })
    expect(cleared.status, cleared.text).toBe(200)
    expect(cleared.body).toEqual({ id: cancelled.id, selfDestructAt: null, selfDestructSuspended: false, expiringNotifiedAt: null })

    await h.setPlan(session.accountId, "premium")
    await h.worker.reconcilePlan(session.accountId)
    expect(await aliasOf(session, kept.id)).toMatchObject({ selfDestructAt: at(T0 + 10 * DAY), selfDestructSuspended: false })
    expect(await aliasOf(session, cancelled.id)).toMatchObject({ selfDestructAt: null, selfDestructSuspended: false })
    await runTimersAt(T0 + 10 * DAY)
    expect(await aliasOf(session, kept.id)).toMatchObject({ status: "burned", burnedAt: at(T0 + 10 * DAY) })
    expect(await aliasOf(session, cancelled.id)).toMatchObject({ status: "active" })
  })
})

describe("candidate reservation lifetime (decisions.md: ten minutes)", () => {
  it("a reservation can be claimed until ten minutes pass, and not after", async () => {
    h.clock.set(T0)
    const session = await h.signup()
    const first = await reserve(session)
    h.clock.set(T0 + 10 * 60_000 - 1)
    const ok = await h.request("/aliases", { method: "POST", session, body: { aliasId: first.candidates[0]!.id, reservationToken: first.reservationToken } })
    expect(ok.status, ok.text).toBe(201)

    const second = await reserve(session)
    expect(second.expiresAt).toBe(at(T0 + 20 * 60_000 - 1))
    h.clock.set(T0 + 20 * 60_000 - 1)
    expectRefused(await h.request("/aliases", { method: "POST", session, body: { aliasId: second.candidates[0]!.id, reservationToken: second.reservationToken } }), 409)
    expect((await h.request("/me", { session })).body).toMatchObject({ aliasesLifetimeClaimed: 1 })
  })

  it("the reservation sweep frees the candidates of expired reservations and leaves live ones", async () => {
    h.clock.set(T0 + 30 * DAY - HOUR)
    await h.worker.sweepReservations()
    const session = await h.signup()
    const expired = await reserve(session)
    h.clock.advance("10 minutes")
    expect(await h.worker.sweepReservations()).toBe(5)
    expectRefused(await h.request("/aliases", { method: "POST", session, body: { aliasId: expired.candidates[0]!.id, reservationToken: expired.reservationToken } }), 409)
    const live = await reserve(session)
    h.clock.advance("9 minutes")
    expect(await h.worker.sweepReservations()).toBe(0)
    const ok = await h.request("/aliases", { method: "POST", session, body: { aliasId: live.candidates[2]!.id, reservationToken: live.reservationToken } })
    expect(ok.status, ok.text).toBe(201)
    expect(ok.body.address).toBe(live.candidates[2]!.address)
  })
})
