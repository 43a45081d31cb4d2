/**
 * Domains, candidate reservations and claims: spec 2.6, 2.7, 2.9, 3.1 (first row), 4.3, 7;
 * decisions.md (Plans table, reservation lifetime).
 */
import { Alias, CandidateRelease, CandidateReservation, MailDomain } from "@burnbox/domain"
import { expectProblem, expectShape, type Harness, type Session, startHarness } from "@burnbox/testkit"
import { Schema } from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let free: Session
let premium: Session
let pro: Session
let proToken: string
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 1101 })
  ;[free, premium, pro] = await Promise.all([h.signup(), h.signup({ plan: "premium" }), h.signup({ plan: "pro" })])
  proToken = await h.createToken(pro, ["read", "manage-aliases"])
})
afterAll(() => h.close())

type Caller = { session: Session } | { token: string }
type Reservation = typeof CandidateReservation.Type

const Iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const AliasKeys = [
  "address", "burnedAt", "claimedAt", "domain", "domainTier", "expiringNotifiedAt", "guestCount", "id", "label", "lastReceivedAt",
  "localPart", "note", "ownerHandle", "pausedAt", "planPaused", "pushEnabled", "receivedCount", "rejectedCount", "role",
  "selfDestructAt", "selfDestructSuspended", "shared", "status", "storageUsedBytes", "style", "trash", "unreadCount"
]
const Domains = Schema.Struct({ items: Schema.Array(MailDomain) })
const AliasList = Schema.Struct({ items: Schema.Array(Alias) })

/** A Problem answer (spec 7) with this status, whatever its code. */
const expectRefused = (answer: { status: number; body: any; text: string }, status: number) => {
  expect(answer.status, answer.text).toBe(status)
  expect(typeof answer.body?.error?.code, answer.text).toBe("string")
  expect(typeof answer.body.error.message).toBe("string")
  expect(Object.keys(answer.body)).toEqual(["error"])
}

/** A 422 validation_failed naming exactly these fields. */
const expectFields = (answer: { status: number; body: any; text: string }, fields: ReadonlyArray<string>, what: string) => {
  expect(answer.status, `${what}: ${answer.text}`).toBe(422)
  expect(answer.body.error.code, what).toBe("validation_failed")
  expect(Object.keys(answer.body.error.fields ?? {}).sort(), `${what}: ${answer.text}`).toEqual([...fields].sort())
  for (const reason of Object.values(answer.body.error.fields)) expect(reason).toMatch(/^[a-z_]+$/)
}

const reserve = (who: Caller, body: unknown = { domainId: 1, style: "words" }) =>
  h.request<Reservation>("/aliases/candidates", { method: "POST", ...who, body })

const reserved = async (who: Caller, body: unknown = { domainId: 1, style: "words" }) => {
  const answer = await reserve(who, body)
  expect(answer.status, answer.text).toBe(200)
  return expectShape(CandidateReservation, answer.body)
}

const claim = (who: Caller, body: unknown) => h.request("/aliases", { method: "POST", ...who, body })

const claimNew = async (who: Caller, extra: Record<string, unknown> = {}) => {
  const reservation = await reserved(who)
  const answer = await claim(who, { aliasId: reservation.candidates[0]!.id, reservationToken: reservation.reservationToken, ...extra })
  expect(answer.status, answer.text).toBe(201)
  return expectShape(Alias, answer.body)
}

const releaseAll = async (who: Caller, method: "DELETE" | "POST" = "DELETE", body?: unknown) => {
  const answer = await h.request(method === "DELETE" ? "/aliases/candidates" : "/aliases/candidates/release", {
    method,
    ...who,
    ...(body === undefined ? {} : { body })
  })
  expect(answer.status, answer.text).toBe(200)
  return expectShape(CandidateRelease, answer.body).released
}

const listAliases = async (who: Caller, includeBurned = false) =>
  expectShape(AliasList, (await h.request(`/aliases${includeBurned ? "?includeBurned=true" : ""}`, who)).body).items

const me = async (who: Caller) => (await h.request("/me", who)).body as { activeAliasCount: number; aliasesLifetimeClaimed: number }

describe("GET /domains (spec 2.6)", () => {
  it("a public domain is claimable on every plan; a premium_only one is upgradeRequired without earlyAccessDomains", async () => {
    const view = async (who: Caller) => {
      const items = expectShape(Domains, (await h.request("/domains", who)).body).items
      return Object.fromEntries(items.map((d) => [d.name, d]))
    }
    const onFree = await view({ session: free })
    expect(onFree["burnbox.test"]).toEqual({ id: 1, name: "burnbox.test", state: "active", tier: "public", claimable: true, upgradeRequired: false })
    expect(onFree["vip.test"]).toEqual({ id: 2, name: "vip.test", state: "active", tier: "premium_only", claimable: false, upgradeRequired: true })
    for (const who of [{ session: premium }, { token: proToken }]) {
      const domains = await view(who)
      expect(domains["burnbox.test"]).toMatchObject({ claimable: true, upgradeRequired: false })
      expect(domains["vip.test"]).toMatchObject({ claimable: true, upgradeRequired: false })
    }
  })

  it("a retired domain is neither claimable nor upgradeRequired, and accepts no new claim or reservation", async () => {
    const [row] = await h.query<{ id: number }>("INSERT INTO domains (name, tier) VALUES ('old.test', 'public') RETURNING id")
    const id = row!.id
    const session = await h.signup({ plan: "premium" })
    const existing = await reserved({ session }, { domainId: id, style: "numeric" })
    const kept = await claim({ session }, { aliasId: existing.candidates[0]!.id, reservationToken: existing.reservationToken })
    expect(kept.status, kept.text).toBe(201)
    const before = await reserved({ session }, { domainId: id, style: "numeric" })

    const retired = await h.cli(["admin", "domain", "retire", "old.test"])
    expect(retired.code, retired.stderr).toBe(0)
    expect(retired.json).toMatchObject({ id, name: "old.test", state: "retired" })

    const listed = expectShape(Domains, (await h.request("/domains", { session })).body).items.find((d) => d.id === id)
    expect(listed).toEqual({ id, name: "old.test", state: "retired", tier: "public", claimable: false, upgradeRequired: false })
    // The candidate reserved while the domain was active can no longer be claimed.
    expectRefused(await claim({ session }, { aliasId: before.candidates[0]!.id, reservationToken: before.reservationToken }), 409)
    // The alias claimed before the retirement stays, and shows its domain's state (spec 2.7).
    const aliases = await listAliases({ session }, true)
    expect(aliases.map((a) => a.id)).toEqual([kept.body.id])
    expect(aliases[0]).toMatchObject({ status: "active", domain: { id, name: "old.test", state: "retired" } })
    expect(await me({ session })).toMatchObject({ activeAliasCount: 1, aliasesLifetimeClaimed: 1 })
    // Reserving on it is refused as well (spec 4.3 declares 401, 403, 429 for this operation).
    const again = await reserve({ session }, { domainId: id, style: "numeric" })
    expect(again.status, again.text).not.toBe(200)
    expect([403, 409]).toContain(again.status)
  })
})

describe("POST /aliases/candidates (spec 2.9, 4.3; ten minutes per decisions.md)", () => {
  it("reserves exactly five distinct addresses on the domain, held ten minutes, which are not aliases yet", async () => {
    const session = await h.signup()
    const reservation = await reserved({ session })
    expect(Object.keys(reservation).sort()).toEqual(["candidates", "expiresAt", "reservationToken"])
    expect(reservation.reservationToken.length).toBeGreaterThanOrEqual(16)
    expect(reservation.expiresAt).toBe(new Date(h.clock.now().getTime() + 10 * 60_000).toISOString())
    expect(reservation.candidates).toHaveLength(5)
    expect(new Set(reservation.candidates.map((c) => c.id)).size).toBe(5)
    expect(new Set(reservation.candidates.map((c) => c.address)).size).toBe(5)
    for (const candidate of reservation.candidates) {
      expect(Object.keys(candidate).sort()).toEqual(["address", "domain", "id", "localPart"])
      expect(candidate.id).toBeGreaterThanOrEqual(1)
      expect(candidate.domain).toBe("burnbox.test")
      expect(candidate.address).toBe(`${candidate.localPart}@burnbox.test`)
    }
    // Reserved candidates are not aliases: no list shows them and no count includes them.
    expect(await listAliases({ session }, true)).toEqual([])
    expect(await me({ session })).toMatchObject({ activeAliasCount: 0, aliasesLifetimeClaimed: 0 })
  })

  it("draws each style's form: words (two different words and a number), pronounceable, numeric", async () => {
    const forms = {
      words: /^([a-z]+)\.([a-z]+)\.[1-9]\d{0,2}$/,
      pronounceable: /^[a-z]{8,12}(\d{2})?$/,
      numeric: /^[1-9]\d{9,11}$/
    }
    for (const [style, form] of Object.entries(forms)) {
      const reservation = await reserved({ token: proToken }, { domainId: 1, style })
      expect(reservation.candidates).toHaveLength(5)
      for (const { localPart } of reservation.candidates) {
        expect(localPart, style).toMatch(form)
        if (style === "words") {
          const [, first, second] = form.exec(localPart)!
          expect(first).not.toBe(second)
        }
      }
    }
  })

  it("a premium_only domain needs earlyAccessDomains: refused 403 on free, reserved on premium and pro", async () => {
    expectRefused(await reserve({ session: free }, { domainId: 2, style: "words" }), 403)
    for (const who of [{ session: premium }, { token: proToken }]) {
      const reservation = await reserved(who, { domainId: 2, style: "words" })
      expect(reservation.candidates.every((c) => c.domain === "vip.test" && c.address.endsWith("@vip.test"))).toBe(true)
    }
  })

  it("reservations are independent: a new one leaves the previous one live, and each can be claimed from", async () => {
    const session = await h.signup()
    const first = await reserved({ session })
    const second = await reserved({ session })
    expect(second.reservationToken).not.toBe(first.reservationToken)
    // A candidate belongs to its own reservation only.
    expectRefused(await claim({ session }, { aliasId: first.candidates[1]!.id, reservationToken: second.reservationToken }), 409)
    const fromFirst = await claim({ session }, { aliasId: first.candidates[0]!.id, reservationToken: first.reservationToken })
    expect(fromFirst.status, fromFirst.text).toBe(201)
    const fromSecond = await claim({ session }, { aliasId: second.candidates[2]!.id, reservationToken: second.reservationToken })
    expect(fromSecond.status, fromSecond.text).toBe(201)
    expect(fromSecond.body.address).toBe(second.candidates[2]!.address)
    // A claim ends its reservation and gives its other four candidates back at once.
    expect(await releaseAll({ session })).toBe(0)
  })

  it("live reservations are capped by the plan (activeAliasCap: 3 on free): the next is 409 reservation_cap until one is claimed, released or expires", async () => {
    h.clock.set(Date.parse("2026-12-03T09:00:00.000Z"))
    const session = await h.signup()
    // Not the hourly shuffle allowance (10 on free), the live reservations are what this counts.
    await h.query(`UPDATE accounts SET overrides = '{"candidateShufflesUnlimited": true}' WHERE id = $1`, [session.accountId])
    const held = [await reserved({ session }), await reserved({ session }), await reserved({ session })]
    expectProblem(await reserve({ session }), 409, "reservation_cap")
    // Releasing one makes room for one.
    expect(await releaseAll({ session }, "POST", { reservationToken: held[0]!.reservationToken })).toBe(5)
    await reserved({ session })
    expectRefused(await reserve({ session }), 409)
    // Claiming from one makes room for one.
    const claimed = await claim({ session }, { aliasId: held[1]!.candidates[0]!.id, reservationToken: held[1]!.reservationToken })
    expect(claimed.status, claimed.text).toBe(201)
    await reserved({ session })
    expectRefused(await reserve({ session }), 409)
    // Ten minutes on, every one of them has expired.
    h.clock.advance("10 minutes")
    await reserved({ session })
    // An activeAliasCap override moves the cap with it.
    await h.query(`UPDATE accounts SET overrides = '{"activeAliasCap": 5, "candidateShufflesUnlimited": true}' WHERE id = $1`, [session.accountId])
    for (let i = 0; i < 4; i++) await reserved({ session })
    expectRefused(await reserve({ session }), 409)
  })

  it("concurrent reservations of one account are each live; releasing without a token releases them all", async () => {
    const session = await h.signup({ plan: "premium" })
    const answers = await Promise.all(Array.from({ length: 8 }, () => reserve({ session })))
    expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200))
    expect(await releaseAll({ session })).toBe(40)
    for (const answer of answers) {
      const { reservationToken, candidates } = answer.body
      expectRefused(await claim({ session }, { aliasId: candidates[0]!.id, reservationToken }), 409)
    }
  })

  it("64 parallel jobs on one token each reserve and claim without a conflict", async () => {
    const session = await h.signup({ plan: "pro" })
    const token = await h.createToken(session, ["read", "manage-aliases"])
    const job = async () => {
      const reservation = await reserved({ token })
      const answer = await claim({ token }, { aliasId: reservation.candidates[0]!.id, reservationToken: reservation.reservationToken })
      return answer.status
    }
    const statuses = await Promise.all(Array.from({ length: 64 }, job))
    expect(statuses.filter((status) => status !== 201)).toEqual([])
    expect(await me({ token })).toMatchObject({ activeAliasCount: 64, aliasesLifetimeClaimed: 64 })
    expect(await releaseAll({ token })).toBe(0)
  })
})

describe("DELETE /aliases/candidates and POST /aliases/candidates/release (spec 2.9, 4.3)", () => {
  it("DELETE without a body releases the live reservation's five candidates; a second call releases none", async () => {
    const session = await h.signup()
    const reservation = await reserved({ session })
    expect(await releaseAll({ session })).toBe(5)
    expect(await releaseAll({ session })).toBe(0)
    expectRefused(await claim({ session }, { aliasId: reservation.candidates[0]!.id, reservationToken: reservation.reservationToken }), 409)
  })

  it("POST /release without a body releases the live reservation, with its token exactly that reservation", async () => {
    const session = await h.signup()
    await reserved({ session })
    expect(await releaseAll({ session }, "POST")).toBe(5)
    const reservation = await reserved({ session })
    expect(await releaseAll({ session }, "POST", { reservationToken: reservation.reservationToken })).toBe(5)
    expect(await releaseAll({ session }, "POST", { reservationToken: reservation.reservationToken })).toBe(0)
  })

  it("DELETE with a {reservationToken} body releases only that reservation: an unknown token releases none", async () => {
    const session = await h.signup()
    const reservation = await reserved({ session })
    expect(await releaseAll({ session }, "DELETE", { reservationToken: "not-a-reservation" })).toBe(0)
    const ok = await claim({ session }, { aliasId: reservation.candidates[0]!.id, reservationToken: reservation.reservationToken })
    expect(ok.status, ok.text).toBe(201)
    const next = await reserved({ session })
    expect(await releaseAll({ session }, "DELETE", { reservationToken: next.reservationToken })).toBe(5)
  })

  it("another account's reservation token releases nothing and leaves that reservation live", async () => {
    const [owner, stranger] = [await h.signup(), await h.signup()]
    const reservation = await reserved({ session: owner })
    expect(await releaseAll({ session: stranger }, "POST", { reservationToken: reservation.reservationToken })).toBe(0)
    expect(await releaseAll({ session: stranger }, "DELETE", { reservationToken: reservation.reservationToken })).toBe(0)
    expect(await releaseAll({ session: stranger })).toBe(0)
    const ok = await claim({ session: owner }, { aliasId: reservation.candidates[4]!.id, reservationToken: reservation.reservationToken })
    expect(ok.status, ok.text).toBe(201)
  })
})

describe("POST /aliases: claim (spec 3.1, 4.3, 2.7)", () => {
  it("turns a reserved candidate into an active alias: 201 with claimedAt and every field as spec 2.7", async () => {
    const session = await h.signup()
    h.clock.set(Date.parse("2026-11-21T12:34:56.789Z"))
    const reservation = await reserved({ session }, { domainId: 1, style: "numeric" })
    const candidate = reservation.candidates[3]!
    const answer = await claim({ session }, { aliasId: candidate.id, reservationToken: reservation.reservationToken, label: "shop", note: "for the newsletter" })
    expect(answer.status, answer.text).toBe(201)
    const alias = expectShape(Alias, answer.body)
    const { canSend, ...fields } = alias
    expect(canSend === undefined || canSend === false).toBe(true)
    expect(Object.keys(fields).sort()).toEqual(AliasKeys)
    expect(fields).toEqual({
      id: alias.id,
      address: candidate.address,
      localPart: candidate.localPart,
      domain: { id: 1, name: "burnbox.test", state: "active" },
      style: "numeric",
      status: "active",
      label: "shop",
      note: "for the newsletter",
      receivedCount: 0,
      rejectedCount: 0,
      unreadCount: 0,
      storageUsedBytes: 0,
      pushEnabled: false,
      lastReceivedAt: null,
      claimedAt: "2026-11-21T12:34:56.789Z",
      pausedAt: null,
      burnedAt: null,
      planPaused: false,
      selfDestructAt: null,
      selfDestructSuspended: false,
      expiringNotifiedAt: null,
      domainTier: "public",
      role: "owner",
      shared: false,
      ownerHandle: null,
      guestCount: 0,
      trash: { enabled: false, retentionDays: 0 }
    })
    expect(await listAliases({ session })).toEqual([alias])
    expect(await me({ session })).toMatchObject({ activeAliasCount: 1, aliasesLifetimeClaimed: 1 })
  })

  it("label and note default to null; trash follows the owner's plan (premium 7 days, pro 30 days)", async () => {
    const onPremium = await claimNew({ session: premium })
    expect(onPremium).toMatchObject({ label: null, note: null, trash: { enabled: true, retentionDays: 7 } })
    const onPro = await claimNew({ token: proToken }, { label: null, note: null })
    expect(onPro).toMatchObject({ label: null, note: null, trash: { enabled: true, retentionDays: 30 }, role: "owner", shared: false })
    expect(onPro.claimedAt).toMatch(Iso)
  })

  it("claims on a premium_only domain with earlyAccessDomains: domainTier premium_only", async () => {
    const reservation = await reserved({ session: premium }, { domainId: 2, style: "pronounceable" })
    const answer = await claim({ session: premium }, { aliasId: reservation.candidates[0]!.id, reservationToken: reservation.reservationToken })
    expect(answer.status, answer.text).toBe(201)
    expect(expectShape(Alias, answer.body)).toMatchObject({ domain: { id: 2, name: "vip.test", state: "active" }, domainTier: "premium_only", style: "pronounceable" })
  })

  it("refuses an unknown, released, expired or another account's reservation with 409", async () => {
    const [session, stranger] = [await h.signup({ plan: "premium" }), await h.signup({ plan: "premium" })]
    const released = await reserved({ session })
    await releaseAll({ session })
    expectRefused(await claim({ session }, { aliasId: released.candidates[0]!.id, reservationToken: released.reservationToken }), 409)

    const live = await reserved({ session })
    expectRefused(await claim({ session }, { aliasId: live.candidates[0]!.id, reservationToken: "unknown-token" }), 409)
    // Another account can neither use the token nor claim the candidate.
    expectRefused(await claim({ session: stranger }, { aliasId: live.candidates[0]!.id, reservationToken: live.reservationToken }), 409)
    const theirs = await reserved({ session: stranger })
    expectRefused(await claim({ session: stranger }, { aliasId: live.candidates[0]!.id, reservationToken: theirs.reservationToken }), 409)

    h.clock.advance("10 minutes")
    expectRefused(await claim({ session }, { aliasId: live.candidates[0]!.id, reservationToken: live.reservationToken }), 409)
    expect(await listAliases({ session }, true)).toEqual([])
    expect(await listAliases({ session: stranger }, true)).toEqual([])
    expect(await me({ session })).toMatchObject({ activeAliasCount: 0, aliasesLifetimeClaimed: 0 })
  })

  it("refuses a candidate that is not in the reservation with 409: unknown id, claimed alias, another reservation's", async () => {
    const session = await h.signup({ plan: "premium" })
    const mine = await claimNew({ session })
    const old = await reserved({ session })
    const current = await reserved({ session })
    for (const aliasId of [999_999, mine.id, old.candidates[0]!.id]) {
      expectRefused(await claim({ session }, { aliasId, reservationToken: current.reservationToken }), 409)
    }
    // The refusals left the reservation intact.
    const ok = await claim({ session }, { aliasId: current.candidates[0]!.id, reservationToken: current.reservationToken })
    expect(ok.status, ok.text).toBe(201)
    // A claimed candidate cannot be claimed a second time.
    expectRefused(await claim({ session }, { aliasId: current.candidates[0]!.id, reservationToken: current.reservationToken }), 409)
    expect(await me({ session })).toMatchObject({ activeAliasCount: 2, aliasesLifetimeClaimed: 2 })
  })
})

describe("concurrent claims (spec 3.1)", () => {
  it("five concurrent claims of one candidate: exactly one 201, the rest 409; one alias, one claim counted, one event", async () => {
    const session = await h.signup({ plan: "premium" })
    const reservation = await reserved({ session })
    const body = { aliasId: reservation.candidates[0]!.id, reservationToken: reservation.reservationToken }
    const answers = await Promise.all(Array.from({ length: 5 }, () => claim({ session }, body)))
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409, 409, 409, 409])
    const aliases = await listAliases({ session }, true)
    expect(aliases).toHaveLength(1)
    expect(await me({ session })).toMatchObject({ activeAliasCount: 1, aliasesLifetimeClaimed: 1 })
    const events = await h.query("SELECT type FROM events WHERE account_id = $1", [session.accountId])
    expect(events.map((e) => e.type)).toEqual(["alias.claimed"])
  })

  it("a claim is announced once on the realtime channel, at its commit; refused claims announce nothing", async () => {
    const session = await h.signup()
    const listener = new pg.Client({ connectionString: h.databaseUrl })
    await listener.connect()
    const heard: Array<{ type: string; aliasId?: number }> = []
    listener.on("notification", (n) => {
      const change = JSON.parse(n.payload ?? "{}") as { accountId?: number; type: string; aliasId?: number }
      if (n.channel === "burnbox_realtime" && change.accountId === session.accountId && change.type.startsWith("alias.")) heard.push(change)
    })
    await listener.query("LISTEN burnbox_realtime")
    try {
      const reservation = await reserved({ session })
      const body = { aliasId: reservation.candidates[0]!.id, reservationToken: reservation.reservationToken }
      const answers = await Promise.all(Array.from({ length: 4 }, () => claim({ session }, body)))
      expect(answers.map((a) => a.status).sort()).toEqual([201, 409, 409, 409])
      await claimNew({ session })
      await claimNew({ session })
      // The free cap of 3 is reached: the next claim is refused and announces nothing.
      const over = await reserved({ session })
      expectRefused(await claim({ session }, { aliasId: over.candidates[0]!.id, reservationToken: over.reservationToken }), 409)
      await listener.query("SELECT 1")
      const claimedIds = (await listAliases({ session }, true)).map((a: { id: number }) => a.id).sort()
      expect(heard.map((c) => c.type)).toEqual(["alias.claimed", "alias.claimed", "alias.claimed"])
      expect(heard.map((c) => c.aliasId).sort()).toEqual(claimedIds)
    } finally {
      await listener.end()
    }
  })

  it("two API processes on one database: concurrent claims of one candidate, exactly one succeeds", async () => {
    const other = await startHarness({}, h)
    try {
      const session = await h.signup({ plan: "premium" })
      const reservation = await reserved({ session })
      const body = { aliasId: reservation.candidates[1]!.id, reservationToken: reservation.reservationToken }
      const answers = await Promise.all([
        claim({ session }, body),
        other.request("/aliases", { method: "POST", session, body }),
        claim({ session }, body),
        other.request("/aliases", { method: "POST", session, body })
      ])
      expect(answers.map((a) => a.status).sort()).toEqual([201, 409, 409, 409])
      expect(await me({ session })).toMatchObject({ activeAliasCount: 1, aliasesLifetimeClaimed: 1 })
    } finally {
      await other.close()
    }
  })

  it("concurrent claims of different candidates of one account never pass the active-alias cap", async () => {
    const session = await h.signup()
    await claimNew({ session })
    await claimNew({ session })
    // One slot left under the free cap of 3: three candidates of the live reservation race for it.
    const reservation = await reserved({ session })
    const answers = await Promise.all(reservation.candidates.slice(0, 3).map((c) =>
      claim({ session }, { aliasId: c.id, reservationToken: reservation.reservationToken })))
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1)
    expect(await me({ session })).toMatchObject({ activeAliasCount: 3, aliasesLifetimeClaimed: 3 })
  })

  it("concurrent claims of the five candidates of one reservation: one 201, four 409 reservation_invalid (no deadlock, no 500); the other four are freed", async () => {
    const session = await h.signup({ plan: "premium" })
    const reservation = await reserved({ session })
    const answers = await Promise.all(reservation.candidates.map((c) =>
      claim({ session }, { aliasId: c.id, reservationToken: reservation.reservationToken })))
    expect(answers.map((a) => a.status).sort(), answers.map((a) => a.text).join("\n")).toEqual([201, 409, 409, 409, 409])
    // The other claims queue on the reservation and find it ended by the first.
    for (const answer of answers.filter((a) => a.status === 409)) expectProblem(answer, 409, "reservation_invalid")
    expect(await me({ session })).toMatchObject({ activeAliasCount: 1, aliasesLifetimeClaimed: 1 })
    const left = await h.query("SELECT count(*)::int AS n FROM aliases WHERE account_id = $1 AND status = 'reserved'", [session.accountId])
    expect(left[0]!.n).toBe(0)
  })

  it("concurrent jobs on one token never pass the daily claim limit, nor the live-reservation cap", async () => {
    const session = await h.signup({ plan: "pro" })
    const token = await h.createToken(session, ["read", "manage-aliases"])
    await h.query(`UPDATE accounts SET overrides = '{"claimsPerDay": 2, "candidateShufflesUnlimited": true}' WHERE id = $1`, [session.accountId])
    const job = async () => {
      const reservation = await reserved({ token })
      return claim({ token }, { aliasId: reservation.candidates[0]!.id, reservationToken: reservation.reservationToken })
    }
    const claims = await Promise.all(Array.from({ length: 8 }, job))
    expect(claims.map((a) => a.status).sort()).toEqual([201, 201, 429, 429, 429, 429, 429, 429])
    for (const answer of claims.filter((a) => a.status !== 201)) expectProblem(answer, 429, "claims_per_day_reached")
    expect(await me({ token })).toMatchObject({ activeAliasCount: 2, aliasesLifetimeClaimed: 2 })

    // activeAliasCap 3 caps live reservations at 3: of eight at once, three are live.
    await releaseAll({ token })
    await h.query(`UPDATE accounts SET overrides = '{"activeAliasCap": 3, "candidateShufflesUnlimited": true}' WHERE id = $1`, [session.accountId])
    const reservations = await Promise.all(Array.from({ length: 8 }, () => reserve({ token })))
    expect(reservations.map((a) => a.status).sort()).toEqual([200, 200, 200, 409, 409, 409, 409, 409])
    for (const answer of reservations.filter((a) => a.status === 409)) expectProblem(answer, 409, "reservation_cap")
  })

  it("concurrent claims and a resume of one account never pass the active alias cap", async () => {
    const session = await h.signup({ plan: "pro" })
    const token = await h.createToken(session, ["read", "manage-aliases"])
    const claimOne = async () => {
      const reservation = await reserved({ token })
      return claim({ token }, { aliasId: reservation.candidates[0]!.id, reservationToken: reservation.reservationToken })
    }
    const first = await claimOne()
    expect(first.status, first.text).toBe(201)
    const paused = await h.request(`/aliases/${first.body.id}`, { method: "PATCH", token, body: { action: "pause" } })
    expect(paused.status, paused.text).toBe(200)
    await h.query(`UPDATE accounts SET overrides = '{"activeAliasCap": 3, "candidateShufflesUnlimited": true}' WHERE id = $1`, [session.accountId])
    // Three live reservations (as many as the cap allows), claimed at once while the paused alias
    // resumes: three places are free, four ask for them.
    const reservations = await Promise.all(Array.from({ length: 3 }, () => reserved({ token })))
    const answers = await Promise.all([
      ...reservations.map((r) => claim({ token }, { aliasId: r.candidates[0]!.id, reservationToken: r.reservationToken })),
      h.request(`/aliases/${first.body.id}`, { method: "PATCH", token, body: { action: "resume" } })
    ])
    const granted = answers.filter((a) => a.status === 200 || a.status === 201)
    expect(granted, answers.map((a) => a.text).join("\n")).toHaveLength(3)
    for (const answer of answers.filter((a) => a.status !== 200 && a.status !== 201)) expectProblem(answer, 409, "active_alias_cap")
    expect(await me({ token })).toMatchObject({ activeAliasCount: 3 })
  })
})

describe("a claimed address is never handed out again (spec 2.9: never-claimed candidates)", () => {
  it("a burned address is not reserved again, while released candidates return to the pool", async () => {
    // Two API processes on one fresh database, drawing the same seeded sequence of local parts.
    const first = await startHarness({}, undefined, { seed: 4242 })
    const twin = await startHarness({}, first, { seed: 4242 })
    try {
      const session = await first.signup()
      const drawn = (await first.request<Reservation>("/aliases/candidates", { method: "POST", session, body: { domainId: 1, style: "words" } })).body
      expect(drawn.candidates).toHaveLength(5)
      const burned = drawn.candidates[0]!
      const claimed = await first.request("/aliases", { method: "POST", session, body: { aliasId: burned.id, reservationToken: drawn.reservationToken } })
      expect(claimed.status, claimed.text).toBe(201)
      expect((await first.request(`/aliases/${claimed.body.id}/burn`, { method: "POST", session })).status).toBe(200)
      await first.request("/aliases/candidates", { method: "DELETE", session })

      const again = (await twin.request<Reservation>("/aliases/candidates", { method: "POST", session, body: { domainId: 1, style: "words" } })).body
      expect(again.candidates).toHaveLength(5)
      const addresses = again.candidates.map((c) => c.address)
      // The same draw: the released four come back (so the check below is not vacuous) ...
      expect(drawn.candidates.slice(1).map((c) => c.address).filter((a) => addresses.includes(a)).length).toBeGreaterThan(0)
      // ... but the burned address never does.
      expect(addresses).not.toContain(burned.address)
    } finally {
      await twin.close()
      await first.close()
    }
  })
})

describe("request validation (spec 7: 422 validation_failed naming the field)", () => {
  it("POST /aliases/candidates: domainId integer >= 1 and style words|pronounceable|numeric, both required, no extra", async () => {
    const cases: Array<[unknown, Array<string>]> = [
      [{ style: "words" }, ["domainId"]],
      [{ domainId: 1 }, ["style"]],
      [{}, ["domainId", "style"]],
      [{ domainId: 0, style: "words" }, ["domainId"]],
      [{ domainId: "1", style: "words" }, ["domainId"]],
      [{ domainId: 1.5, style: "words" }, ["domainId"]],
      [{ domainId: 1, style: "fancy" }, ["style"]],
      [{ domainId: 1, style: "words", count: 9 }, ["count"]]
    ]
    for (const [body, fields] of cases) expectFields(await reserve({ session: premium }, body), fields, JSON.stringify(body))
  })

  it("POST /aliases: aliasId integer >= 1 and reservationToken string required; label, note string or null; selfDestructAt date-time", async () => {
    const cases: Array<[unknown, Array<string>]> = [
      [{}, ["aliasId", "reservationToken"]],
      [{ reservationToken: "t" }, ["aliasId"]],
      [{ aliasId: 1 }, ["reservationToken"]],
      [{ aliasId: 0, reservationToken: "t" }, ["aliasId"]],
      [{ aliasId: "7", reservationToken: "t" }, ["aliasId"]],
      [{ aliasId: 1, reservationToken: 7 }, ["reservationToken"]],
      [{ aliasId: 1, reservationToken: "t", label: 5 }, ["label"]],
      [{ aliasId: 1, reservationToken: "t", note: false }, ["note"]],
      [{ aliasId: 1, reservationToken: "t", selfDestructAt: "tomorrow" }, ["selfDestructAt"]],
      [{ aliasId: 1, reservationToken: "t", selfDestructAt: 1893456000 }, ["selfDestructAt"]],
      [{ aliasId: 1, reservationToken: "t", domainId: 1 }, ["domainId"]]
    ]
    for (const [body, fields] of cases) expectFields(await claim({ session: premium }, body), fields, JSON.stringify(body))
  })

  it("release bodies: reservationToken a string, no extra properties", async () => {
    for (const method of ["DELETE", "POST"] as const) {
      const path = method === "DELETE" ? "/aliases/candidates" : "/aliases/candidates/release"
      expectFields(await h.request(path, { method, session: premium, body: { reservationToken: 5 } }), ["reservationToken"], `${method} token 5`)
      expectFields(await h.request(path, { method, session: premium, body: { token: "x" } }), ["token"], `${method} extra`)
    }
  })
})
