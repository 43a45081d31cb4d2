/**
 * Per-account advisory locks for the rules that count an account's rows and then add one (live
 * reservations; active aliases and claims; storage quota leases and eviction, messages/QuotaLeases.ts). Each rule is one step under its own lock, so a CI
 * fleet's reservations, claims and the mail they receive, all on one account, do not queue behind
 * one another on the account row (which delivery's storage counters, tokens and plan changes lock).
 *
 * Lock order: a transaction takes these before the account row (`Entitlements.lock`, or an
 * UPDATE of `accounts`), never after it; `Accounts.changePlan` takes `aliasCounts` first for the
 * plan-change effects that count aliases. The two-key form of PostgreSQL's advisory locks is a
 * key space of its own: the migrations' and the job queue's single-key locks never meet these.
 */
import { type SqlClient } from "effect/sql"

export type AccountLock = "reservations" | "aliasCounts" | "quota"

/** The first key of each lock (the second is the account id). */
const LockSpaces: Record<AccountLock, number> = { reservations: 0x62627201, aliasCounts: 0x62627202, quota: 0x62627203 }

/** The first key of `lock`, for the database functions that take it themselves (migration 0024). */
export const accountLockSpace = (lock: AccountLock) => LockSpaces[lock]

/** Takes `lock` for the account until the caller's transaction ends (waiting for another holder). */
export const lockAccountFor = (sql: SqlClient.SqlClient, lock: AccountLock, accountId: number) =>
  sql`SELECT pg_advisory_xact_lock(${LockSpaces[lock]}::int4, ${accountId}::int4)`
