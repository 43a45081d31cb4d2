import { Context, Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { Keyring, randomSecret } from "../platform/Keyring.ts"
import { now } from "../platform/Time.ts"

/** How long a browser session lives without signing in again. */
export const SessionLifetimeMs = 30 * 24 * 60 * 60 * 1000

export interface SessionRecord {
  readonly id: number
  readonly accountId: number
}

export class Sessions extends Context.Service<Sessions, {
  readonly create: (accountId: number) => Effect.Effect<Redacted.Redacted<string>>
  readonly resolve: (secret: Redacted.Redacted<string>) => Effect.Effect<SessionRecord | undefined>
  readonly remove: (id: number) => Effect.Effect<void>
}>()("burnbox/Sessions") {
  static readonly layer = Layer.effect(Sessions, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const keyring = yield* Keyring
    const digest = (secret: Redacted.Redacted<string>) => keyring.digest("session", Redacted.value(secret))

    return Sessions.of({
      create: Effect.fn("Sessions.create")(function*(accountId: number) {
        const secret = Redacted.make(randomSecret())
        const createdAt = yield* now
        yield* sql`
          INSERT INTO sessions (account_id, digest, created_at, expires_at)
          VALUES (${accountId}, ${digest(secret)}, ${createdAt}, ${new Date(createdAt.getTime() + SessionLifetimeMs)})`
          .pipe(Effect.orDie)
        return secret
      }),
      resolve: Effect.fn("Sessions.resolve")(function*(secret: Redacted.Redacted<string>) {
        const at = yield* now
        const rows = yield* sql<{ id: string | number; account_id: number }>`
          SELECT id, account_id FROM sessions WHERE digest = ${digest(secret)} AND expires_at > ${at}`.pipe(Effect.orDie)
        const row = rows[0]
        return row && { id: Number(row.id), accountId: row.account_id }
      }),
      remove: (id) => sql`DELETE FROM sessions WHERE id = ${id}`.pipe(Effect.orDie, Effect.asVoid)
    })
  }))
}
