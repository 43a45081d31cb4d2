/**
 * Storage quota leases (issue 36 item 2, migration 0029): room under an account's quota that one
 * batch lane of one process fills without asking anyone, so the group commit never locks an
 * account. A lane's accept statement takes its bytes off its own lease row (`spendFragment`), in
 * the transaction that stores the messages; a lease is granted (`grant`) under the account's
 * `quota` advisory lock only while storage used plus every live lease stays within the quota. So
 * an account's stored mail never passes its quota, with any number of lanes and processes; when
 * the room is gone, the lane stores message by message under that lock (`lockForEviction`),
 * counting the others' leases as used (`leasedOf`) and evicting to make room.
 */
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { accountLockSpace, lockAccountFor } from "../platform/AccountLocks.ts"
import { rowsDecoder } from "../platform/Rows.ts"

type Sql = SqlClient.SqlClient

/** How long a lease lasts for its holder (the others count it 10 s longer, migration 0029). */
const LeaseSeconds = 30
/** The holder stops using a lease this long before it lapses, so its statements do not meet the lapse. */
const LeaseMarginMs = 5_000
/** The most one lease takes at once: a quarter of the room left, at most this (migration 0029 takes the quarter). */
export const LeaseChunkBytes = 8 * 1024 * 1024

/** What a lane holds: bytes left on each account's lease, the quota it was granted under, and until when (epoch ms) it uses it. */
export class LaneLeases {
  readonly holder: string
  private readonly leases = new Map<number, { bytes: number; quota: number; until: number }>()
  constructor(holder: string) {
    this.holder = holder
  }
  /** The accounts of `wants` whose lease does not cover what the batch would store under the quota it has now. */
  lacking(wants: ReadonlyMap<number, number>, quotaOf: (account: number) => number, nowMs: number): Array<number> {
    return [...wants].filter(([account, bytes]) => {
      const lease = this.leases.get(account)
      return lease === undefined || lease.until <= nowMs || lease.bytes < bytes || lease.quota !== quotaOf(account)
    }).map(([account]) => account).sort((a, b) => a - b)
  }
  spent(wants: ReadonlyMap<number, number>) {
    for (const [account, bytes] of wants) {
      const lease = this.leases.get(account)
      if (lease !== undefined) lease.bytes -= bytes
    }
  }
  granted(account: number, bytes: number, quota: number, nowMs: number) {
    if (bytes > 0) this.leases.set(account, { bytes, quota, until: nowMs + LeaseSeconds * 1000 - LeaseMarginMs })
    else this.leases.delete(account)
  }
  forget(accounts: ReadonlyArray<number>) {
    for (const account of accounts) this.leases.delete(account)
  }
}

const grantRows = rowsDecoder(Schema.Struct({ account_id: Schema.Int, granted: Schema.Number }))

/**
 * Asks for leases covering `wants` (account -> bytes) on the accounts of `accounts` (ascending),
 * each under its quota (`quotaOf`). One statement of its own (its commit writes no WAL: the table
 * is unlogged); the accounts' locks are taken in id order. Answers whether every one was granted.
 */
export const grant = (sql: Sql, lane: LaneLeases, accounts: ReadonlyArray<number>, wants: ReadonlyMap<number, number>, quotaOf: (account: number) => number, nowMs: number) =>
  Effect.gen(function*() {
    const rows = yield* sql`
      SELECT g.account_id, burnbox_quota_lease(${accountLockSpace("quota")}::int4, g.account_id, ${lane.holder}, g.want, ${LeaseChunkBytes}::int8,
                                              g.quota, ${`${LeaseSeconds} seconds`}::interval)::float8 AS granted
      FROM unnest(${accounts}::int4[], ${accounts.map((a) => wants.get(a) ?? 0)}::int8[], ${accounts.map(quotaOf)}::int8[])
        AS g(account_id, want, quota)`.pipe(Effect.flatMap(grantRows))
    for (const row of rows) lane.granted(row.account_id, row.granted, quotaOf(row.account_id), nowMs)
    return rows.length === accounts.length && rows.every((row) => row.granted > 0)
  })

/**
 * The data-modifying step of an accept statement that takes each account's bytes off the lane's
 * lease (`spends`, a CTE with account_id, bytes and the quota the lane assumes): only a live lease
 * with room, granted under that quota, is touched, and it answers the accounts it took them from,
 * so the statement can tell whether all were covered (and its caller that the quota still holds).
 */
export const spendFragment = (sql: Sql, lane: LaneLeases, spends: string) =>
  sql`UPDATE quota_leases q SET bytes = q.bytes - s.bytes FROM ${sql(spends)} s
      WHERE q.account_id = s.account_id AND q.holder = ${lane.holder} AND q.bytes >= s.bytes AND q.quota = s.quota
        AND q.expires_at > clock_timestamp()
      RETURNING q.account_id`

/**
 * Before storing message by message (eviction): the accounts' `quota` locks in id order (so no
 * lease is granted meanwhile and no other lane evicts them). Inside the caller's transaction.
 */
export const lockForEviction = (sql: Sql, accounts: ReadonlyArray<number>) =>
  Effect.forEach(accounts, (account) => lockAccountFor(sql, "quota", account), { discard: true })

/**
 * Under those locks, with the plans read: the lane's own leases on the accounts dropped (it stores
 * under the lock now), and every lease granted under a quota the account no longer has.
 */
export const dropLeases = (sql: Sql, lane: LaneLeases, quotas: ReadonlyArray<{ readonly account: number; readonly quota: number }>) =>
  Effect.gen(function*() {
    if (quotas.length === 0) return
    yield* sql`
      DELETE FROM quota_leases q USING unnest(${quotas.map((q) => q.account)}::int4[], ${quotas.map((q) => q.quota)}::int8[]) AS c(account_id, quota)
      WHERE q.account_id = c.account_id AND (q.holder = ${lane.holder} OR q.quota <> c.quota)`
    lane.forget(quotas.map((q) => q.account))
  })

/** The other holders' live leases on the account row `a`, as bytes: counted as used by a lane storing under the lock. */
export const leasedOf = (sql: Sql, a: string) =>
  sql`coalesce((SELECT sum(q.bytes) FROM quota_leases q WHERE q.account_id = ${sql(a)}.id AND q.expires_at + interval '10 seconds' > clock_timestamp()), 0)`
