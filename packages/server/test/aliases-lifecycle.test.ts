/**
 * Alias lifecycle: pause, resume, burn (spec 3.1, 4.3), labels and notes, listing, the events
 * each transition writes (spec 6.1–6.3), bootstrap and /me (spec 2.1, 2.4), a stranger's alias
 * (spec 5.7, 7: 404) and request validation (spec 7).
 */
import { Account, Alias, AliasTimer, BearerBootstrap, CandidateReservation, SessionBootstrap } from "@burnbox/domain"
import { expectShape, type Harness, type Session, startHarness } from "@burnbox/testkit"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let owner: Session
let stranger: Session
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 2202 })
  ;[owner, stranger] = await Promise.all([h.signup({ plan: "premium" }), h.signup({ plan: "premium" })])
})
afterAll(() => h.close())

type Caller = { session: Session } | { token: string }
type Answer = { status: number; body: any; text: string }

const EventId = /^evt_[0-9A-HJKMNP-TV-Z]{26}$/
const AliasList = Schema.Struct({ items: Schema.Array(Alias) })

const expectRefused = (answer: Answer, status: number) => {
  expect(answer.status, answer.text).toBe(status)
  expect(typeof answer.body?.error?.code, answer.text).toBe("string")
  expect(typeof answer.body.error.message).toBe("string")
  expect(Object.keys(answer.body)).toEqual(["error"])
}

const expectFields = (answer: Answer, fields: ReadonlyArray<string>, what: string) => {
  expect(answer.status, `${what}: ${answer.text}`).toBe(422)
  expect(answer.body.error.code, what).toBe("validation_failed")
  expect(Object.keys(answer.body.error.fields ?? {}).sort(), `${what}: ${answer.text}`).toEqual([...fields].sort())
}

const claimNew = async (who: Caller, extra: Record<string, unknown> = {}) => {
  const reservation = await h.request<typeof CandidateReservation.Type>("/aliases/candidates", { method: "POST", ...who, body: { domainId: 1, style: "words" } })
  expect(reservation.status, reservation.text).toBe(200)
  const answer = await h.request("/aliases", {
    method: "POST",
    ...who,
    body: { aliasId: reservation.body.candidates[0]!.id, reservationToken: reservation.body.reservationToken, ...extra }
  })
  expect(answer.status, answer.text).toBe(201)
  return expectShape(Alias, answer.body)
}

/** The transitions of spec 3.1, each by every route that asks for it. */
const routes = {
  pause: [
    (id: number, who: Caller) => h.request(`/aliases/${id}/pause`, { method: "POST", ...who }),
    (id: number, who: Caller) => h.request(`/aliases/${id}`, { method: "PATCH", ...who, body: { action: "pause" } }),
    (id: number, who: Caller) => h.request(`/aliases/${id}`, { method: "PATCH", ...who, body: { status: "paused" } })
  ],
  resume: [
    (id: number, who: Caller) => h.request(`/aliases/${id}/resume`, { method: "POST", ...who }),
    (id: number, who: Caller) => h.request(`/aliases/${id}`, { method: "PATCH", ...who, body: { action: "resume" } }),
    (id: number, who: Caller) => h.request(`/aliases/${id}`, { method: "PATCH", ...who, body: { status: "active" } })
  ],
  burn: [
    (id: number, who: Caller) => h.request(`/aliases/${id}/burn`, { method: "POST", ...who }),
    (id: number, who: Caller) => h.request(`/aliases/${id}`, { method: "DELETE", ...who }),
    (id: number, who: Caller) => h.request(`/aliases/${id}`, { method: "PATCH", ...who, body: { action: "burn" } }),
    (id: number, who: Caller) => h.request(`/aliases/${id}`, { method: "PATCH", ...who, body: { status: "burned" } })
  ]
}

const eventRows = (aliasId: number) =>
  h.query<{ id: string; account_id: number; alias_id: number; type: string; time: Date; data: any }>(
    "SELECT id, account_id, alias_id, type, time, data FROM events WHERE alias_id = $1 ORDER BY time, id",
    [aliasId]
  )

/** The event types written for an alias, as a multiset (rows of one instant have no order). */
const eventTypes = async (aliasId: number) => (await eventRows(aliasId)).map((e) => e.type).sort()

const list = async (who: Caller, query = "") => {
  const answer = await h.request(`/aliases${query}`, who)
  expect(answer.status, answer.text).toBe(200)
  return expectShape(AliasList, answer.body).items
}

describe("pause and resume (spec 3.1)", () => {
  it("every pause route moves active to paused with pausedAt and writes one alias.paused; every resume route moves it back", async () => {
    const alias = await claimNew({ session: owner }, { label: "news" })
    for (const [i, pause] of routes.pause.entries()) {
      h.clock.advance("1 minute")
      const paused = await pause(alias.id, { session: owner })
      expect(paused.status, paused.text).toBe(200)
      expect(expectShape(Alias, paused.body)).toMatchObject({ id: alias.id, status: "paused", pausedAt: h.clock.now().toISOString(), planPaused: false, burnedAt: null })
      const resumed = await routes.resume[i]!(alias.id, { session: owner })
      expect(resumed.status, resumed.text).toBe(200)
      expect(expectShape(Alias, resumed.body)).toMatchObject({ id: alias.id, status: "active", planPaused: false, burnedAt: null })
    }
    // alias.claimed once, alias.paused once per pause; resuming has no event type (spec 6.1).
    expect(await eventTypes(alias.id)).toEqual(["alias.claimed", "alias.paused", "alias.paused", "alias.paused"])
  })

  it("a repeated pause is answered with the paused alias and writes nothing; a repeated resume likewise", async () => {
    const alias = await claimNew({ session: owner })
    h.clock.advance("1 minute")
    const first = await h.request(`/aliases/${alias.id}/pause`, { method: "POST", session: owner })
    const pausedAt = first.body.pausedAt
    h.clock.advance("1 minute")
    for (const pause of routes.pause) {
      const again = await pause(alias.id, { session: owner })
      expect(again.status, again.text).toBe(200)
      expect(again.body).toMatchObject({ status: "paused", pausedAt })
    }
    expect(await eventTypes(alias.id)).toEqual(["alias.claimed", "alias.paused"].sort())
    expect((await h.request(`/aliases/${alias.id}/resume`, { method: "POST", session: owner })).status).toBe(200)
    for (const resume of routes.resume) {
      const again = await resume(alias.id, { session: owner })
      expect(again.status, again.text).toBe(200)
      expect(again.body.status).toBe("active")
    }
    expect(await eventTypes(alias.id)).toEqual(["alias.claimed", "alias.paused"].sort())
  })

  it("a paused alias stays listed and leaves the active count; resuming restores it", async () => {
    const session = await h.signup()
    const alias = await claimNew({ session })
    await h.request(`/aliases/${alias.id}/pause`, { method: "POST", session })
    expect((await list({ session })).map((a) => [a.id, a.status])).toEqual([[alias.id, "paused"]])
    expect(expectShape(Account, (await h.request("/me", { session })).body)).toMatchObject({ activeAliasCount: 0, aliasesLifetimeClaimed: 1 })
    await h.request(`/aliases/${alias.id}/resume`, { method: "POST", session })
    expect(expectShape(Account, (await h.request("/me", { session })).body)).toMatchObject({ activeAliasCount: 1, aliasesLifetimeClaimed: 1 })
  })
})

describe("burn (spec 3.1: irreversible)", () => {
  it("every burn route burns an active alias: 200 burned Alias with burnedAt, one alias.burned", async () => {
    for (const burn of routes.burn) {
      const alias = await claimNew({ session: owner })
      h.clock.advance("1 minute")
      const answer = await burn(alias.id, { session: owner })
      expect(answer.status, answer.text).toBe(200)
      expect(expectShape(Alias, answer.body)).toMatchObject({ id: alias.id, address: alias.address, status: "burned", burnedAt: h.clock.now().toISOString() })
      expect(await eventTypes(alias.id)).toEqual(["alias.claimed", "alias.burned"].sort())
    }
  })

  it("a paused alias burns too", async () => {
    const alias = await claimNew({ session: owner })
    await h.request(`/aliases/${alias.id}/pause`, { method: "POST", session: owner })
    const answer = await h.request(`/aliases/${alias.id}`, { method: "DELETE", session: owner })
    expect(answer.status, answer.text).toBe(200)
    expect(answer.body).toMatchObject({ status: "burned", burnedAt: h.clock.now().toISOString() })
    expect(await eventTypes(alias.id)).toEqual(["alias.claimed", "alias.paused", "alias.burned"].sort())
  })

  it("a repeated burn writes nothing; pause and resume of a burned alias are 409 and change nothing", async () => {
    const alias = await claimNew({ session: owner })
    const burned = (await h.request(`/aliases/${alias.id}/burn`, { method: "POST", session: owner })).body
    h.clock.advance("1 minute")
    for (const burn of routes.burn) {
      const again = await burn(alias.id, { session: owner })
      expect(again.status, again.text).toBe(200)
      expect(again.body).toMatchObject({ status: "burned", burnedAt: burned.burnedAt })
    }
    for (const move of [...routes.pause, ...routes.resume]) expectRefused(await move(alias.id, { session: owner }), 409)
    const [listed] = (await list({ session: owner }, "?includeBurned=true")).filter((a) => a.id === alias.id)
    expect(listed).toMatchObject({ status: "burned", burnedAt: burned.burnedAt, pausedAt: null })
    expect(await eventTypes(alias.id)).toEqual(["alias.claimed", "alias.burned"].sort())
  })

  it("a burned alias leaves the default list and the bootstrap, and shows with includeBurned=true", async () => {
    const session = await h.signup()
    const kept = await claimNew({ session })
    const gone = await claimNew({ session })
    await h.request(`/aliases/${gone.id}/burn`, { method: "POST", session })
    expect((await list({ session })).map((a) => a.id)).toEqual([kept.id])
    expect((await list({ session }, "?includeBurned=false")).map((a) => a.id)).toEqual([kept.id])
    expect((await list({ session }, "?includeBurned=true")).map((a) => [a.id, a.status]).sort()).toEqual([[kept.id, "active"], [gone.id, "burned"]].sort())
    const bootstrap = expectShape(SessionBootstrap, (await h.request("/bootstrap", { session })).body)
    expect(bootstrap.aliases.map((a) => a.id)).toEqual([kept.id])
    expect(bootstrap.user).toMatchObject({ activeAliasCount: 1, aliasesLifetimeClaimed: 2 })
  })
})

describe("PATCH /aliases/{id} (spec 4.3)", () => {
  it("sets and clears label and note; an empty body changes nothing", async () => {
    const alias = await claimNew({ session: owner }, { label: "a", note: "b" })
    const set = await h.request(`/aliases/${alias.id}`, { method: "PATCH", session: owner, body: { label: "shopping", note: "used at the market" } })
    expect(set.status, set.text).toBe(200)
    expect(expectShape(Alias, set.body)).toEqual({ ...alias, label: "shopping", note: "used at the market" })
    const onlyNote = await h.request(`/aliases/${alias.id}`, { method: "PATCH", session: owner, body: { note: null } })
    expect(onlyNote.body).toMatchObject({ label: "shopping", note: null, status: "active" })
    const nothing = await h.request(`/aliases/${alias.id}`, { method: "PATCH", session: owner, body: {} })
    expect(nothing.status).toBe(200)
    expect(nothing.body).toEqual(onlyNote.body)
    const cleared = await h.request(`/aliases/${alias.id}`, { method: "PATCH", session: owner, body: { label: null } })
    expect(cleared.body).toMatchObject({ label: null, note: null })
    expect((await list({ session: owner })).find((a) => a.id === alias.id)).toEqual(cleared.body)
    // Describing is not a transition: no event beyond the claim.
    expect(await eventTypes(alias.id)).toEqual(["alias.claimed"].sort())
  })

  it("a label and a transition in one request: both apply, one alias.paused", async () => {
    const alias = await claimNew({ session: owner }, { label: "old" })
    const answer = await h.request(`/aliases/${alias.id}`, { method: "PATCH", session: owner, body: { label: "new", action: "pause" } })
    expect(answer.status, answer.text).toBe(200)
    expect(answer.body).toMatchObject({ label: "new", status: "paused" })
    const paused = (await eventRows(alias.id)).filter((e) => e.type === "alias.paused")
    expect(paused).toHaveLength(1)
  })
})

describe("events (spec 6.1–6.3): one row per transition", () => {
  it("alias.claimed, alias.paused and alias.burned rows: evt_ ULID ids, the account, the alias, the clock's time and data as 6.3", async () => {
    const session = await h.signup()
    h.clock.set(Date.parse("2026-11-22T08:00:00.000Z"))
    const alias = await claimNew({ session }, { label: "bank" })
    h.clock.set(Date.parse("2026-11-22T09:00:00.000Z"))
    await h.request(`/aliases/${alias.id}/pause`, { method: "POST", session })
    h.clock.set(Date.parse("2026-11-22T10:00:00.000Z"))
    await h.request(`/aliases/${alias.id}/burn`, { method: "POST", session })

    const rows = await eventRows(alias.id)
    expect(rows).toHaveLength(3)
    const aliasData = { id: alias.id, address: alias.address, label: "bank" }
    expect(rows.map(({ id: _id, ...rest }) => ({ ...rest, time: rest.time.toISOString() }))).toEqual([
      { account_id: session.accountId, alias_id: alias.id, type: "alias.claimed", time: "2026-11-22T08:00:00.000Z", data: { alias: aliasData, claimed_at: "2026-11-22T08:00:00.000Z" } },
      { account_id: session.accountId, alias_id: alias.id, type: "alias.paused", time: "2026-11-22T09:00:00.000Z", data: { alias: aliasData, paused_at: "2026-11-22T09:00:00.000Z" } },
      { account_id: session.accountId, alias_id: alias.id, type: "alias.burned", time: "2026-11-22T10:00:00.000Z", data: { alias: aliasData, burned_at: "2026-11-22T10:00:00.000Z" } }
    ])
    for (const row of rows) expect(row.id).toMatch(EventId)
    expect(new Set(rows.map((r) => r.id)).size).toBe(3)
  })

  it("refused transitions and refused claims write no event", async () => {
    const session = await h.signup()
    const alias = await claimNew({ session })
    await h.request(`/aliases/${alias.id}/burn`, { method: "POST", session })
    const before = await h.query("SELECT count(*)::int AS n FROM events WHERE account_id = $1", [session.accountId])
    await h.request(`/aliases/${alias.id}/pause`, { method: "POST", session })
    await h.request(`/aliases/${alias.id}/resume`, { method: "POST", session })
    await h.request("/aliases", { method: "POST", session, body: { aliasId: 999_999, reservationToken: "nope" } })
    await h.request(`/aliases/${alias.id}/pause`, { method: "POST", session: stranger })
    const after = await h.query("SELECT count(*)::int AS n FROM events WHERE account_id = $1", [session.accountId])
    expect(after[0].n).toBe(before[0].n)
    expect(before[0].n).toBe(2)
  })

  it("concurrent pauses of one alias write exactly one alias.paused; concurrent burns exactly one alias.burned", async () => {
    const alias = await claimNew({ session: owner })
    const pauses = await Promise.all(routes.pause.flatMap((pause) => [pause(alias.id, { session: owner }), pause(alias.id, { session: owner })]))
    expect(pauses.every((a) => a.status === 200 && a.body.status === "paused")).toBe(true)
    const burns = await Promise.all(routes.burn.flatMap((burn) => [burn(alias.id, { session: owner }), burn(alias.id, { session: owner })]))
    expect(burns.every((a) => a.status === 200 && a.body.status === "burned")).toBe(true)
    expect(await eventTypes(alias.id)).toEqual(["alias.claimed", "alias.paused", "alias.burned"].sort())
  })
})

describe("bootstrap and /me carry the account's real aliases (spec 2.1, 2.4)", () => {
  it("session and bearer bootstrap list the active and paused aliases exactly as GET /aliases; counts from the aliases", async () => {
    const session = await h.signup({ plan: "pro" })
    const token = await h.createToken(session, ["read", "manage-aliases"])
    const a = await claimNew({ token }, { label: "one" })
    const b = await claimNew({ token })
    const c = await claimNew({ session })
    await h.request(`/aliases/${b.id}/pause`, { method: "POST", token })
    await h.request(`/aliases/${c.id}/burn`, { method: "POST", token })
    const listed = await list({ token })
    expect(listed.map((x) => x.id).sort()).toEqual([a.id, b.id].sort())

    const bearer = expectShape(BearerBootstrap, (await h.request("/bootstrap", { token })).body)
    expect(bearer.aliases).toEqual(listed)
    expect(bearer.user).toMatchObject({ activeAliasCount: 1, aliasesLifetimeClaimed: 3 })
    const browser = expectShape(SessionBootstrap, (await h.request("/bootstrap", { session })).body)
    expect(browser.aliases).toEqual(listed)
    expect(browser.user).toMatchObject({ activeAliasCount: 1, aliasesLifetimeClaimed: 3 })
    expect(expectShape(Account, (await h.request("/me", { token })).body)).toMatchObject({ activeAliasCount: 1, aliasesLifetimeClaimed: 3 })
    expect(bearer.aliases.every((x) => x.role === "owner" && x.shared === false && x.ownerHandle === null && x.guestCount === 0)).toBe(true)
    expect(bearer.aliases.every((x) => x.trash.enabled && x.trash.retentionDays === 30)).toBe(true)
  })

  it("a new account's bootstrap has no aliases and zero counts", async () => {
    const session = await h.signup()
    const bootstrap = expectShape(SessionBootstrap, (await h.request("/bootstrap", { session })).body)
    expect(bootstrap.aliases).toEqual([])
    expect(bootstrap.user).toMatchObject({ activeAliasCount: 0, aliasesLifetimeClaimed: 0 })
  })
})

describe("a stranger's alias is 404 on every alias route (spec 5.7, 7)", () => {
  it("PATCH, DELETE, pause, resume, burn, PUT and DELETE timer answer 404; no list shows it; nothing changes", async () => {
    const alias = await claimNew({ session: owner }, { label: "private", selfDestructAt: new Date(h.clock.now().getTime() + 3 * 86_400_000).toISOString() })
    const future = new Date(h.clock.now().getTime() + 5 * 86_400_000).toISOString()
    const attempts: Array<[string, () => Promise<Answer>]> = [
      ["PATCH label", () => h.request(`/aliases/${alias.id}`, { method: "PATCH", session: stranger, body: { label: "mine" } })],
      ["PATCH empty", () => h.request(`/aliases/${alias.id}`, { method: "PATCH", session: stranger, body: {} })],
      ["PATCH action", () => h.request(`/aliases/${alias.id}`, { method: "PATCH", session: stranger, body: { action: "burn" } })],
      ["PATCH status", () => h.request(`/aliases/${alias.id}`, { method: "PATCH", session: stranger, body: { status: "paused" } })],
      ["DELETE", () => h.request(`/aliases/${alias.id}`, { method: "DELETE", session: stranger })],
      ["pause", () => h.request(`/aliases/${alias.id}/pause`, { method: "POST", session: stranger })],
      ["resume", () => h.request(`/aliases/${alias.id}/resume`, { method: "POST", session: stranger })],
      ["burn", () => h.request(`/aliases/${alias.id}/burn`, { method: "POST", session: stranger })],
      ["PUT timer", () => h.request(`/aliases/${alias.id}/timer`, { method: "PUT", session: stranger, body: { selfDestructAt: future } })],
      ["DELETE timer", () => h.request(`/aliases/${alias.id}/timer`, { method: "DELETE", session: stranger })]
    ]
    for (const [what, attempt] of attempts) {
      const answer = await attempt()
      expect(answer.status, `${what}: ${answer.text}`).toBe(404)
      expectRefused(answer, 404)
      expect(answer.text).not.toContain(alias.address)
    }
    expect(await list({ session: stranger }, "?includeBurned=true")).toEqual([])
    expect((await h.request("/bootstrap", { session: stranger })).body.aliases).toEqual([])
    // The owner's alias is untouched and no event was written for it.
    expect((await list({ session: owner })).find((a) => a.id === alias.id)).toEqual(alias)
    expect(await eventTypes(alias.id)).toEqual(["alias.claimed"].sort())
  })

  it("a stranger's burned alias is 404 as well, and so is an unknown id", async () => {
    const alias = await claimNew({ session: owner })
    await h.request(`/aliases/${alias.id}/burn`, { method: "POST", session: owner })
    for (const id of [alias.id, 987_654]) {
      expectRefused(await h.request(`/aliases/${id}/pause`, { method: "POST", session: stranger }), 404)
      expectRefused(await h.request(`/aliases/${id}`, { method: "DELETE", session: stranger }), 404)
      expectRefused(await h.request(`/aliases/${id}/timer`, { method: "DELETE", session: stranger }), 404)
    }
  })

  it("the same over a bearer token of another account", async () => {
    const pro = await h.signup({ plan: "pro" })
    const token = await h.createToken(pro, ["read", "manage-aliases"])
    const alias = await claimNew({ session: owner })
    expectRefused(await h.request(`/aliases/${alias.id}/burn`, { method: "POST", token }), 404)
    expectRefused(await h.request(`/aliases/${alias.id}`, { method: "PATCH", token, body: { note: "x" } }), 404)
    expectRefused(await h.request(`/aliases/${alias.id}/timer`, { method: "PUT", token, body: { selfDestructAt: "2030-01-01T00:00:00Z" } }), 404)
    expect(await list({ token }, "?includeBurned=true")).toEqual([])
    expect((await list({ session: owner })).find((a) => a.id === alias.id)?.status).toBe("active")
  })

  it("a reserved candidate is not an alias yet: 404 on alias routes, for its reserver too", async () => {
    const reservation = await h.request("/aliases/candidates", { method: "POST", session: owner, body: { domainId: 1, style: "numeric" } })
    const id = reservation.body.candidates[0].id
    expectRefused(await h.request(`/aliases/${id}/pause`, { method: "POST", session: owner }), 404)
    expectRefused(await h.request(`/aliases/${id}`, { method: "PATCH", session: owner, body: { label: "early" } }), 404)
    expectRefused(await h.request(`/aliases/${id}`, { method: "DELETE", session: owner }), 404)
    // The refusals did not spoil the reservation.
    const claimed = await h.request("/aliases", { method: "POST", session: owner, body: { aliasId: id, reservationToken: reservation.body.reservationToken } })
    expect(claimed.status, claimed.text).toBe(201)
    expect(claimed.body.label).toBeNull()
  })
})

describe("request validation (spec 7: 422 validation_failed naming the field)", () => {
  it("PATCH: label and note string or null, action pause|resume|burn, status active|paused|burned, no extra", async () => {
    const alias = await claimNew({ session: owner })
    const cases: Array<[unknown, Array<string>]> = [
      [{ label: 5 }, ["label"]],
      [{ note: [] }, ["note"]],
      [{ action: "explode" }, ["action"]],
      [{ action: "paused" }, ["action"]],
      [{ status: "deleted" }, ["status"]],
      [{ status: "pause" }, ["status"]],
      [{ colour: "red" }, ["colour"]],
      [{ label: 5, status: "gone" }, ["label", "status"]]
    ]
    for (const [body, fields] of cases) {
      expectFields(await h.request(`/aliases/${alias.id}`, { method: "PATCH", session: owner, body }), fields, JSON.stringify(body))
    }
    expect((await list({ session: owner })).find((a) => a.id === alias.id)).toEqual(alias)
  })

  it("the path id: an integer >= 1, else 422 naming id", async () => {
    for (const [method, suffix] of [["POST", "/pause"], ["POST", "/resume"], ["POST", "/burn"], ["DELETE", ""], ["DELETE", "/timer"]] as const) {
      for (const id of ["abc", "0", "1.5"]) expectFields(await h.request(`/aliases/${id}${suffix}`, { method, session: owner }), ["id"], `${method} ${id}${suffix}`)
    }
    expectFields(await h.request("/aliases/abc", { method: "PATCH", session: owner, body: {} }), ["id"], "PATCH abc")
  })

  it("GET /aliases: includeBurned is a boolean", async () => {
    expectFields(await h.request("/aliases?includeBurned=maybe", { session: owner }), ["includeBurned"], "includeBurned=maybe")
  })

  it("PUT timer: selfDestructAt a date-time, required, no extra", async () => {
    const alias = await claimNew({ session: owner })
    const future = new Date(h.clock.now().getTime() + 86_400_000 * 2).toISOString()
    const cases: Array<[unknown, Array<string>]> = [
      [{}, ["selfDestructAt"]],
      [{ selfDestructAt: "soon" }, ["selfDestructAt"]],
      [{ selfDestructAt: null }, ["selfDestructAt"]],
      [{ selfDestructAt: 1893456000000 }, ["selfDestructAt"]],
      [{ selfDestructAt: future, label: "x" }, ["label"]]
    ]
    for (const [body, fields] of cases) {
      expectFields(await h.request(`/aliases/${alias.id}/timer`, { method: "PUT", session: owner, body }), fields, JSON.stringify(body))
    }
    const ok = await h.request(`/aliases/${alias.id}/timer`, { method: "PUT", session: owner, body: { selfDestructAt: future } })
    expect(expectShape(AliasTimer, ok.body)).toEqual({ id: alias.id, selfDestructAt: future, selfDestructSuspended: false, expiringNotifiedAt: null })
  })
})
