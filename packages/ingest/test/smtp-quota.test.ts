/**
 * Storage quota at SMTP acceptance (architecture.md "Data rules": storage is accounted per alias
 * and per account in the same transaction as the bytes; spec 3.2: trash is the first thing quota
 * eviction takes, and a pin does not hold a trashed message back; decisions.md Plans table,
 * storageQuotaBytes, settable per account with `burnbox admin account override`): a message that
 * would pass the quota evicts the trash first, then the oldest unpinned mail, until it fits; a
 * message larger than the whole quota is refused with 552 and nothing changes.
 */
import { Alias, CandidateReservation } from "@burnbox/domain"
import { expectShape, type Harness, type Session, startHarness, SmtpClient } from "@burnbox/testkit"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 4402 })
})
afterAll(() => h.close())

// ---------------------------------------------------------------------------------------------
// A raw SMTP client: every reply code is seen exactly as the server sent it.


const deliver = (to: string, raw: Uint8Array) => SmtpClient.sendOne(h.smtpPort, to, raw)

/** A CRLF message of exactly `size` bytes. */
const sized = (size: number, to: string, subject: string) => {
  const head = Buffer.from(`From: sender@example.org\r\nTo: ${to}\r\nSubject: ${subject}\r\n\r\n`)
  let left = size - head.length
  expect(left).toBeGreaterThan(2)
  const lines: Array<string> = []
  while (left > 81) {
    lines.push(`${"q".repeat(78)}\r\n`)
    left -= 80
  }
  lines.push(`${"q".repeat(left - 2)}\r\n`)
  const raw = Buffer.concat([head, Buffer.from(lines.join(""))])
  expect(raw.byteLength).toBe(size)
  return raw
}

type Reservation = typeof CandidateReservation.Type
const AliasList = Schema.Struct({ items: Schema.Array(Alias) })

const claim = async (who: Session) => {
  const reservation = await h.request<Reservation>("/aliases/candidates", { method: "POST", session: who, body: { domainId: 1, style: "numeric" } })
  expect(reservation.status, reservation.text).toBe(200)
  const answer = await h.request("/aliases", {
    method: "POST",
    session: who,
    body: { aliasId: reservation.body.candidates[0]!.id, reservationToken: reservation.body.reservationToken }
  })
  expect(answer.status, answer.text).toBe(201)
  return expectShape(Alias, answer.body)
}

const aliasNow = async (who: Session, id: number) => {
  const found = expectShape(AliasList, (await h.request("/aliases", { session: who })).body).items.find((a) => a.id === id)
  expect(found).toBeDefined()
  return found!
}

const accountUsed = async (who: Session) => {
  const me = await h.request<{ storageUsedBytes: number }>("/me", { session: who })
  expect(me.status, me.text).toBe(200)
  return me.body.storageUsedBytes
}

/** Ids of the messages of an account, by subject. */
const held = async (who: Session) => {
  const ids = (await h.query<{ id: number }>(
    "SELECT m.id FROM messages m JOIN message_raw r ON r.message_id = m.id WHERE m.account_id = $1 ORDER BY m.id",
    [who.accountId]
  )).map((row) => row.id)
  const raws = await Promise.all(ids.map(async (id) => [id, (await h.storedRaw(id))!.raw] as const))
  return Object.fromEntries(raws.map(([id, raw]) => [/Subject: (\S+)/.exec(raw.toString("latin1"))![1]!, id]))
}

const send = async (who: Session, alias: { address: string }, size: number, subject: string) => {
  h.clock.advance("1 minute")
  const reply = await deliver(alias.address, sized(size, alias.address, subject))
  expect(reply.code, `${subject}: ${reply.text}`).toBe(250)
  const ids = await held(who)
  expect(ids[subject], subject).toBeDefined()
  return ids[subject]!
}

describe("storage quota at acceptance", () => {
  it("evicts the trash first (pinned or not), then the oldest unpinned mail, until the new message fits; counters follow", async () => {
    const owner = await h.signup({ plan: "premium" })
    const set = await h.cli(["admin", "account", "override", "--email", owner.email, "--set", "storageQuotaBytes=10000"])
    expect(set.code, set.stderr).toBe(0)
    expect(set.json.plan.storageQuotaBytes).toBe(10000)
    const one = await claim(owner)
    const two = await claim(owner)

    const a = await send(owner, one, 2000, "A")
    const b = await send(owner, two, 2000, "B")
    const c = await send(owner, one, 2000, "C")
    const d = await send(owner, two, 2000, "D")
    expect(await accountUsed(owner)).toBe(8000)
    // B is pinned; D, the newest, is pinned too but in the trash.
    for (const id of [b, d]) {
      await h.query(
        `INSERT INTO message_states (message_id, account_id, pinned) VALUES ($1, $2, true)
         ON CONFLICT (message_id, account_id) DO UPDATE SET pinned = true`,
        [id, owner.accountId]
      )
    }
    await h.query("UPDATE messages SET trashed_at = $2, trash_purge_at = $3 WHERE id = $1", [
      d,
      h.clock.now(),
      new Date(h.clock.now().getTime() + 7 * 86_400_000)
    ])

    // 8000 + 3000 passes 10000 by 1000: the trashed D goes, although A is older.
    const e = await send(owner, two, 3000, "E")
    expect(Object.values(await held(owner)).sort((x, y) => x - y)).toEqual([a, b, c, e])
    expect(await accountUsed(owner)).toBe(9000)
    expect((await h.query("SELECT 1 FROM message_raw WHERE message_id = $1", [d]))).toHaveLength(0)

    // 9000 + 3000 passes by 2000: the oldest unpinned (A) goes; exactly 10000 fits.
    const f = await send(owner, one, 3000, "F")
    expect(Object.values(await held(owner)).sort((x, y) => x - y)).toEqual([b, c, e, f])
    expect(await accountUsed(owner)).toBe(10000)

    // 10000 + 2500 passes by 2500: C (2000) is not enough, E (3000) goes too; the pinned B stays although oldest.
    const g = await send(owner, two, 2500, "G")
    expect(Object.values(await held(owner)).sort((x, y) => x - y)).toEqual([b, f, g])
    expect(await accountUsed(owner)).toBe(7500)
    expect((await h.request(`/messages/${a}`, { session: owner })).status).toBe(404)
    expect((await h.request(`/messages/${b}`, { session: owner })).status).toBe(200)

    const [aliasOne, aliasTwo] = [await aliasNow(owner, one.id), await aliasNow(owner, two.id)]
    expect(aliasOne.storageUsedBytes).toBe(3000) // F
    expect(aliasOne.unreadCount).toBe(1)
    expect(aliasOne.receivedCount).toBe(3)
    expect(aliasTwo.storageUsedBytes).toBe(4500) // B, G
    const storage = await h.request("/storage", { session: owner })
    expect(storage.body).toMatchObject({ usedBytes: 7500, quotaBytes: 10000, remainingBytes: 2500 })
  })

  it("refuses a message larger than the whole quota with 552, evicting and storing nothing", async () => {
    const owner = await h.signup({ plan: "pro" })
    await h.query(`UPDATE accounts SET overrides = overrides || '{"storageQuotaBytes": 5000}'::jsonb WHERE id = $1`, [owner.accountId])
    const alias = await claim(owner)
    const kept = await send(owner, alias, 3000, "kept")
    const reply = await deliver(alias.address, sized(5001, alias.address, "huge"))
    expect(reply.code, reply.text).toBe(552)
    expect(Object.values(await held(owner))).toEqual([kept])
    expect(await accountUsed(owner)).toBe(3000)
    expect(await aliasNow(owner, alias.id)).toMatchObject({ receivedCount: 1, storageUsedBytes: 3000 })
    // A message of exactly the quota still fits, by evicting.
    const whole = await send(owner, alias, 5000, "whole")
    expect(Object.values(await held(owner))).toEqual([whole])
    expect(await accountUsed(owner)).toBe(5000)
  })

  it("concurrent deliveries while the pipeline works never leave the account over its quota, are all taken (no 451), and the counters equal what is stored", async () => {
    const owner = await h.signup({ plan: "pro" })
    await h.query(`UPDATE accounts SET overrides = overrides || '{"storageQuotaBytes": 5000}'::jsonb WHERE id = $1`, [owner.accountId])
    const [one, two] = [await claim(owner), await claim(owner)]
    // Eviction removes messages the pipeline may be processing at that moment: several rounds make that overlap likely.
    for (let round = 0; round < 4; round++) {
      const targets = [one, two, one, two, one, two, one, two]
      const replies = await Promise.all(targets.map((alias, i) => deliver(alias.address, sized(2000, alias.address, `r${round}c${i}`))))
      expect(replies.map((r) => `${r.code} ${r.text}`).filter((r) => !r.startsWith("250")), `round ${round}`).toEqual([])
    }
    const rows = await h.query<{ alias_id: number; size_bytes: number }>("SELECT alias_id, size_bytes FROM messages WHERE account_id = $1", [owner.accountId])
    const sum = (aliasId?: number) => rows.filter((r) => aliasId === undefined || r.alias_id === aliasId).reduce((n, r) => n + r.size_bytes, 0)
    expect(sum()).toBeLessThanOrEqual(5000)
    expect(rows).toHaveLength(2)
    expect(await accountUsed(owner)).toBe(sum())
    expect((await aliasNow(owner, one.id)).storageUsedBytes).toBe(sum(one.id))
    expect((await aliasNow(owner, two.id)).storageUsedBytes).toBe(sum(two.id))
  })
})
