/**
 * Aliases against the embedded PostgreSQL, called directly: candidates reserved and claimed,
 * pause, resume and burn with their events, self-destruct timers on the test clock, and what a
 * plan change does to aliases beyond the new cap.
 */
import { ExpiringNoticeMs, ReservationLifetimeMs } from "@burnbox/domain"
import { Accounts, Aliases, CandidateRandom, Domains, Keyring, RateLimiter, Entitlements } from "@burnbox/store"
import { TestDatabase } from "@burnbox/testkit"
import { assert, layer } from "@effect/vitest"
import { Clock, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"

const Store = Layer.mergeAll(
  Aliases.layer.pipe(Layer.provide([RateLimiter.layer, CandidateRandom.layer])),
  Accounts.layer,
  Domains.layer
).pipe(Layer.provideMerge(Keyring.layer), Layer.provideMerge(Entitlements.layer), Layer.provideMerge(TestDatabase))

const Day = 24 * 60 * 60 * 1000

let created = 0
const newAccount = (plan: "free" | "premium" | "pro") =>
  Effect.gen(function*() {
    const accounts = yield* Accounts
    return yield* accounts.create({ email: `aliases${++created}@example.com`, password: "correct horse battery", plan })
  }).pipe(Effect.orDie)

const domainId = (name: string) =>
  Effect.gen(function*() {
    const domains = yield* Domains
    return (yield* domains.list).find((d) => d.name === name)!.id
  })

/** The account's plan row alone, without the effects of a plan change: what `reconcilePlan` then finds to do. */
const setPlanRow = (accountId: number, plan: "free" | "premium" | "pro") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`UPDATE accounts SET plan = ${plan} WHERE id = ${accountId}`
  }).pipe(Effect.orDie)

const nowDate = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

/** Reserves candidates on burnbox.test and claims the first. */
const claimed = (accountId: number, options: { label?: string; note?: string; selfDestructAt?: string } = {}) =>
  Effect.gen(function*() {
    const aliases = yield* Aliases
    const reservation = yield* aliases.reserve(accountId, { domainId: yield* domainId("burnbox.test"), style: "words" })
    return yield* aliases.claim(accountId, { aliasId: reservation.candidates[0]!.id, reservationToken: reservation.reservationToken, ...options })
  }).pipe(Effect.orDie)

/** The account's events in the outbox, oldest first (events of one instant in no set order), as (type, alias id). */
const eventsOf = (accountId: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ type: string; alias_id: number }>`SELECT type, alias_id FROM events WHERE account_id = ${accountId} ORDER BY time`
    return rows.map((r) => [r.type, r.alias_id])
  }).pipe(Effect.orDie)

layer(Store)("Aliases: candidates and claims", (it) => {
  it.effect("a reservation holds five free candidates on the domain, in the style asked for, for ten minutes", () =>
    Effect.gen(function*() {
      const aliases = yield* Aliases
      const account = yield* newAccount("pro")
      const at = yield* nowDate
      const reservation = yield* aliases.reserve(account.id, { domainId: yield* domainId("burnbox.test"), style: "numeric" })
      assert.strictEqual(reservation.expiresAt, new Date(at.getTime() + ReservationLifetimeMs).toISOString())
      assert.strictEqual(reservation.candidates.length, 5)
      assert.strictEqual(new Set(reservation.candidates.map((c) => c.address)).size, 5)
      for (const candidate of reservation.candidates) {
        assert.strictEqual(candidate.domain, "burnbox.test")
        assert.strictEqual(candidate.address, `${candidate.localPart}@burnbox.test`)
        assert.match(candidate.localPart, /^[0-9]+$/)
      }
      // Candidates are not aliases yet.
      assert.deepStrictEqual(yield* aliases.list(account.id, true), [])
    }))

  it.effect("claiming a candidate makes it an active alias with the candidate's id, counted for life, and frees the other candidates", () =>
    Effect.gen(function*() {
      const aliases = yield* Aliases
      const accounts = yield* Accounts
      const sql = yield* SqlClient.SqlClient
      const account = yield* newAccount("pro")
      const at = yield* nowDate
      const reservation = yield* aliases.reserve(account.id, { domainId: yield* domainId("burnbox.test"), style: "words" })
      const [candidate, other] = reservation.candidates
      const alias = yield* aliases.claim(account.id, {
        aliasId: candidate!.id,
        reservationToken: reservation.reservationToken,
        label: "shop",
        note: "for the bike shop"
      })
      assert.deepInclude(alias, {
        id: candidate!.id,
        address: candidate!.address,
        localPart: candidate!.localPart,
        style: "words",
        status: "active",
        label: "shop",
        note: "for the bike shop",
        claimedAt: at.toISOString(),
        pausedAt: null,
        burnedAt: null,
        selfDestructAt: null,
        role: "owner"
      })
      assert.deepStrictEqual(yield* aliases.list(account.id, false), [alias])
      assert.strictEqual((yield* accounts.get(account.id))!.aliasesLifetimeClaimed, 1)
      const freed = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM aliases WHERE id = ${other!.id}`
      assert.strictEqual(freed[0]!.n, 0)
      const refused = yield* Effect.flip(aliases.claim(account.id, { aliasId: other!.id, reservationToken: reservation.reservationToken }))
      assert.strictEqual(refused._tag, "ReservationUnavailable")
      assert.deepStrictEqual(yield* eventsOf(account.id), [["alias.claimed", alias.id]])
    }))

  it.effect("reservations are independent: a new one leaves the previous one live; a claim ends only its own and frees its other candidates", () =>
    Effect.gen(function*() {
      const aliases = yield* Aliases
      const sql = yield* SqlClient.SqlClient
      const account = yield* newAccount("pro")
      const domain = yield* domainId("burnbox.test")
      const first = yield* aliases.reserve(account.id, { domainId: domain, style: "words" })
      const second = yield* aliases.reserve(account.id, { domainId: domain, style: "pronounceable" })
      assert.strictEqual((yield* aliases.claim(account.id, { aliasId: first.candidates[0]!.id, reservationToken: first.reservationToken })).status, "active")
      const refused = yield* Effect.flip(aliases.claim(account.id, { aliasId: first.candidates[1]!.id, reservationToken: first.reservationToken }))
      assert.strictEqual(refused._tag, "ReservationUnavailable")
      const left = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM aliases WHERE id IN ${sql.in(first.candidates.slice(1).map((c) => c.id))}`
      assert.strictEqual(left[0]!.n, 0)
      assert.strictEqual((yield* aliases.claim(account.id, { aliasId: second.candidates[4]!.id, reservationToken: second.reservationToken })).status, "active")
    }))

  it.effect("a reservation ends ten minutes after it was made; the sweep frees its candidates", () =>
    Effect.gen(function*() {
      const aliases = yield* Aliases
      const sql = yield* SqlClient.SqlClient
      const account = yield* newAccount("pro")
      const domain = yield* domainId("burnbox.test")
      const early = yield* aliases.reserve(account.id, { domainId: domain, style: "words" })
      yield* TestClock.adjust(ReservationLifetimeMs - 1)
      assert.strictEqual((yield* aliases.claim(account.id, { aliasId: early.candidates[0]!.id, reservationToken: early.reservationToken })).status, "active")
      const late = yield* aliases.reserve(account.id, { domainId: domain, style: "words" })
      yield* TestClock.adjust(ReservationLifetimeMs)
      const refused = yield* Effect.flip(aliases.claim(account.id, { aliasId: late.candidates[0]!.id, reservationToken: late.reservationToken }))
      assert.strictEqual(refused._tag, "ReservationUnavailable")
      const candidatesLeft = sql<{ n: number }>`SELECT count(*)::int AS n FROM aliases WHERE id IN ${sql.in(late.candidates.map((c) => c.id))}`
      assert.strictEqual((yield* candidatesLeft)[0]!.n, 5)
      assert.isAtLeast(yield* aliases.sweepReservations, 5)
      assert.strictEqual((yield* candidatesLeft)[0]!.n, 0)
      assert.strictEqual(yield* aliases.sweepReservations, 0)
    }))

  it.effect("releasing a reservation frees its candidates, once", () =>
    Effect.gen(function*() {
      const aliases = yield* Aliases
      const account = yield* newAccount("pro")
      const reservation = yield* aliases.reserve(account.id, { domainId: yield* domainId("burnbox.test"), style: "words" })
      assert.strictEqual(yield* aliases.release(account.id, "not-the-token"), 0)
      assert.strictEqual(yield* aliases.release(account.id, reservation.reservationToken), 5)
      assert.strictEqual(yield* aliases.release(account.id, reservation.reservationToken), 0)
      yield* aliases.reserve(account.id, { domainId: yield* domainId("burnbox.test"), style: "words" })
      assert.strictEqual(yield* aliases.release(account.id, undefined), 5)
    }))

  it.effect("a free account holds at most three active aliases, and claims at most five a UTC day", () =>
    Effect.gen(function*() {
      const aliases = yield* Aliases
      const account = yield* newAccount("free")
      const domain = yield* domainId("burnbox.test")
      const reserveAndClaim = Effect.gen(function*() {
        const reservation = yield* aliases.reserve(account.id, { domainId: domain, style: "words" })
        return yield* aliases.claim(account.id, { aliasId: reservation.candidates[0]!.id, reservationToken: reservation.reservationToken })
      })
      const ids = []
      for (let i = 0; i < 3; i++) ids.push((yield* reserveAndClaim).id)
      assert.deepInclude(yield* Effect.flip(reserveAndClaim), { _tag: "ActiveAliasCapReached", limit: 3 })
      for (const id of ids) yield* aliases.transition(account.id, id, "burn")
      yield* reserveAndClaim
      yield* reserveAndClaim
      const refused = yield* Effect.flip(reserveAndClaim)
      const at = yield* Clock.currentTimeMillis
      const nextDay = Math.ceil((at + 1) / Day) * Day
      assert.deepInclude(refused, { _tag: "DailyClaimLimitReached", limit: 5, retryAfter: Math.ceil((nextDay - at) / 1000) })
      yield* TestClock.adjust(nextDay - at)
      assert.strictEqual((yield* reserveAndClaim).status, "active")
    }))
})

layer(Store)("Aliases: pause, resume and burn", (it) => {
  it.effect("pause stops an alias, resume starts it again, burn ends it for good; each change is an event, a repeated one is not", () =>
    Effect.gen(function*() {
      const aliases = yield* Aliases
      const account = yield* newAccount("pro")
      const alias = yield* claimed(account.id)
      yield* TestClock.adjust(1_000)
      const at = yield* nowDate
      const paused = yield* aliases.transition(account.id, alias.id, "pause")
      assert.deepInclude(paused, { status: "paused", pausedAt: at.toISOString(), planPaused: false })
      assert.strictEqual((yield* aliases.transition(account.id, alias.id, "pause")).status, "paused")
      assert.strictEqual((yield* aliases.transition(account.id, alias.id, "resume")).status, "active")
      yield* TestClock.adjust(1_000)
      const burned = yield* aliases.transition(account.id, alias.id, "burn")
      assert.deepInclude(burned, { status: "burned", burnedAt: new Date(at.getTime() + 1_000).toISOString() })
      assert.deepStrictEqual(yield* eventsOf(account.id), [["alias.claimed", alias.id], ["alias.paused", alias.id], ["alias.burned", alias.id]])
    }))

  it.effect("burned aliases are listed only when asked for", () =>
    Effect.gen(function*() {
      const aliases = yield* Aliases
      const account = yield* newAccount("pro")
      const kept = yield* claimed(account.id)
      const paused = yield* claimed(account.id)
      const burned = yield* claimed(account.id)
      yield* aliases.transition(account.id, paused.id, "pause")
      yield* aliases.transition(account.id, burned.id, "burn")
      assert.deepStrictEqual((yield* aliases.list(account.id, false)).map((a) => [a.id, a.status]), [[kept.id, "active"], [paused.id, "paused"]])
      assert.deepStrictEqual((yield* aliases.list(account.id, true)).map((a) => a.id), [kept.id, paused.id, burned.id])
    }))

  it.effect("a refused resume changes nothing, not even the label sent with it", () =>
    Effect.gen(function*() {
      const aliases = yield* Aliases
      const account = yield* newAccount("free")
      const first = yield* claimed(account.id, { label: "first" })
      yield* aliases.transition(account.id, first.id, "pause")
      for (let i = 0; i < 3; i++) yield* claimed(account.id)
      const refused = yield* Effect.flip(aliases.change(account.id, first.id, { label: "renamed", action: "resume" }))
      assert.deepInclude(refused, { _tag: "ActiveAliasCapReached", limit: 3 })
      const [still] = (yield* aliases.list(account.id, false)).filter((a) => a.id === first.id)
      assert.deepInclude(still, { status: "paused", label: "first" })
      assert.deepInclude(yield* aliases.change(account.id, first.id, { label: "renamed", note: null }), { label: "renamed", note: null, status: "paused" })
    }))
})

layer(Store)("Aliases: self-destruct timers", (it) => {
  it.effect("an active alias gets its expiring notice 24 hours before its deadline, once, and burns at the deadline", () =>
    Effect.gen(function*() {
      const aliases = yield* Aliases
      const account = yield* newAccount("pro")
      const deadline = new Date((yield* Clock.currentTimeMillis) + 2 * Day)
      const alias = yield* claimed(account.id, { selfDestructAt: deadline.toISOString() })
      assert.strictEqual(alias.selfDestructAt, deadline.toISOString())
      assert.deepStrictEqual(yield* aliases.runTimers, { burned: 0, notified: 0 })
      yield* TestClock.adjust(2 * Day - ExpiringNoticeMs - 1)
      assert.deepStrictEqual(yield* aliases.runTimers, { burned: 0, notified: 0 })
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(yield* aliases.runTimers, { burned: 0, notified: 1 })
      assert.deepStrictEqual(yield* aliases.runTimers, { burned: 0, notified: 0 })
      yield* TestClock.adjust(ExpiringNoticeMs - 1)
      assert.deepStrictEqual(yield* aliases.runTimers, { burned: 0, notified: 0 })
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(yield* aliases.runTimers, { burned: 1, notified: 0 })
      const [burned] = yield* aliases.list(account.id, true)
      assert.deepInclude(burned, { status: "burned", burnedAt: deadline.toISOString() })
      assert.deepStrictEqual(yield* eventsOf(account.id), [["alias.claimed", alias.id], ["alias.expiring", alias.id], ["alias.burned", alias.id]])
    }))

  it.effect("a paused alias past its deadline waits, and burns once resumed", () =>
    Effect.gen(function*() {
      const aliases = yield* Aliases
      const account = yield* newAccount("pro")
      const alias = yield* claimed(account.id)
      const deadline = new Date((yield* Clock.currentTimeMillis) + Day)
      assert.deepStrictEqual(yield* aliases.setTimer(account.id, alias.id, deadline.toISOString()), {
        id: alias.id,
        selfDestructAt: deadline.toISOString(),
        selfDestructSuspended: false,
        expiringNotifiedAt: null
      })
      yield* aliases.transition(account.id, alias.id, "pause")
      yield* TestClock.adjust(Day)
      // The notice was due from the start (the deadline was less than 24 hours away).
      assert.deepStrictEqual(yield* aliases.runTimers, { burned: 0, notified: 0 })
      yield* aliases.transition(account.id, alias.id, "resume")
      assert.deepStrictEqual(yield* aliases.runTimers, { burned: 1, notified: 0 })
    }))

  it.effect("a cleared timer burns nothing", () =>
    Effect.gen(function*() {
      const aliases = yield* Aliases
      const account = yield* newAccount("pro")
      const deadline = new Date((yield* Clock.currentTimeMillis) + Day)
      const alias = yield* claimed(account.id, { selfDestructAt: deadline.toISOString() })
      assert.deepStrictEqual(yield* aliases.clearTimer(account.id, alias.id), {
        id: alias.id,
        selfDestructAt: null,
        selfDestructSuspended: false,
        expiringNotifiedAt: null
      })
      yield* TestClock.adjust(Day)
      assert.deepStrictEqual(yield* aliases.runTimers, { burned: 0, notified: 0 })
      assert.strictEqual((yield* aliases.list(account.id, false))[0]!.status, "active")
    }))
})

layer(Store)("Aliases: plan changes", (it) => {
  it.effect("a downgrade pauses the most recently claimed aliases beyond the new cap and suspends timers; an upgrade undoes both", () =>
    Effect.gen(function*() {
      const aliases = yield* Aliases
      const account = yield* newAccount("pro")
      const deadline = new Date((yield* Clock.currentTimeMillis) + 30 * Day)
      const ids: Array<number> = []
      for (let i = 0; i < 5; i++) {
        ids.push((yield* claimed(account.id, i === 0 ? { selfDestructAt: deadline.toISOString() } : {})).id)
        yield* TestClock.adjust(1_000)
      }
      yield* aliases.transition(account.id, ids[2]!, "pause")
      yield* TestClock.adjust(1_000)
      yield* setPlanRow(account.id, "free")
      assert.deepStrictEqual(yield* aliases.reconcilePlan(account.id), { paused: 1, resumed: 0 })
      const statuses = (yield* aliases.list(account.id, false)).map((a) => [a.id, a.status, a.planPaused, a.selfDestructSuspended])
      assert.deepStrictEqual(statuses, [
        [ids[0], "active", false, true],
        [ids[1], "active", false, false],
        [ids[2], "paused", false, false],
        [ids[3], "active", false, false],
        [ids[4], "paused", true, false]
      ])
      assert.deepStrictEqual((yield* eventsOf(account.id)).slice(-1), [["alias.paused", ids[4]]])
      assert.deepStrictEqual(yield* aliases.reconcilePlan(account.id), { paused: 0, resumed: 0 })
      // Suspended timers do not run.
      yield* TestClock.adjust(30 * Day)
      assert.deepStrictEqual(yield* aliases.runTimers, { burned: 0, notified: 0 })
      yield* setPlanRow(account.id, "pro")
      assert.deepStrictEqual(yield* aliases.reconcilePlan(account.id), { paused: 0, resumed: 1 })
      const after = (yield* aliases.list(account.id, false)).map((a) => [a.id, a.status, a.planPaused, a.selfDestructSuspended])
      assert.deepStrictEqual(after, [
        [ids[0], "active", false, false],
        [ids[1], "active", false, false],
        [ids[2], "paused", false, false],
        [ids[3], "active", false, false],
        [ids[4], "active", false, false]
      ])
      // The resumed timer's deadline passed meanwhile.
      assert.deepStrictEqual(yield* aliases.runTimers, { burned: 1, notified: 0 })
    }))

  it.effect("a plan change through the one use case pauses and resumes in the same step, with nothing left for a later reconcile", () =>
    Effect.gen(function*() {
      const aliases = yield* Aliases
      const accounts = yield* Accounts
      const account = yield* newAccount("pro")
      const ids: Array<number> = []
      for (let i = 0; i < 4; i++) {
        ids.push((yield* claimed(account.id)).id)
        yield* TestClock.adjust(1_000)
      }
      yield* accounts.changePlan(account.id, "free")
      assert.deepStrictEqual((yield* aliases.list(account.id, false)).map((a) => [a.id, a.status, a.planPaused]), [
        [ids[0], "active", false],
        [ids[1], "active", false],
        [ids[2], "active", false],
        [ids[3], "paused", true]
      ])
      assert.deepStrictEqual(yield* aliases.reconcilePlan(account.id), { paused: 0, resumed: 0 })
      yield* accounts.changePlan(account.id, "pro")
      assert.deepStrictEqual((yield* aliases.list(account.id, false)).map((a) => a.status), ["active", "active", "active", "active"])
    }))
})
