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

