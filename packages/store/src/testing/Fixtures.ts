/**
 * Fixtures for store tests and benchmarks: rows written straight into the tables, where going
 * through the services (password hashing, candidate reservations, plan checks) would be beside
 * the point of the test. Not used by any program.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/** An account with one active alias on burnbox.test, written straight into the tables. */
export const seedAlias = (localPart: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const email = `${localPart}@example.com`
    const [account] = yield* sql<{ id: number }>`
      INSERT INTO accounts (email, email_key, password_hash, plan, created_at)
      VALUES (${email}, ${email}, 'not-a-hash', 'pro', now()) RETURNING id`
    const [alias] = yield* sql<{ id: number }>`
      INSERT INTO aliases (account_id, domain_id, local_part, local_key, style, status, claimed_at)
      SELECT ${account!.id}, id, ${localPart}, ${localPart}, 'words', 'active', now() FROM domains WHERE name = 'burnbox.test'
      RETURNING id`
    return { accountId: account!.id, aliasId: alias!.id, address: `${localPart}@burnbox.test` }
  }).pipe(Effect.orDie)


/** A share of `aliasId` (owned by `ownerId`) with `guestId`, written straight into `shares`: accepted unless told otherwise. */
export const seedShare = (input: {
  readonly aliasId: number
  readonly ownerId: number
  readonly guestId: number
  readonly role?: "viewer" | "collaborator"
  readonly status?: "pending" | "active" | "declined" | "ended" | "left"
  readonly suspended?: boolean
}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [share] = yield* sql<{ id: number }>`
      INSERT INTO shares (alias_id, owner_id, guest_id, role, status, created_at, accepted_at, suspended_at)
      VALUES (${input.aliasId}, ${input.ownerId}, ${input.guestId}, ${input.role ?? "viewer"}, ${input.status ?? "active"}, now(),
              ${(input.status ?? "active") === "active" ? sql`now()` : sql`NULL`}, ${input.suspended === true ? sql`now()` : sql`NULL`})
      RETURNING id`
    return share!.id
  }).pipe(Effect.orDie)
