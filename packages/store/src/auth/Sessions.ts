import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { Keyring, randomSecret } from "../platform/Keyring.ts"
import { IntFromInt8 } from "../platform/Rows.ts"
import { now } from "../platform/Time.ts"

/** How long a browser session lives without signing in again. */
export const SessionLifetimeMs = 30 * 24 * 60 * 60 * 1000

export interface SessionRecord {
  readonly id: number
  readonly accountId: number
}

const SessionRow = Schema.Struct({ id: IntFromInt8, accountId: Schema.Int }).pipe(Schema.encodeKeys({ accountId: "account_id" }))

export class Sessions extends Context.Service<Sessions, {
  readonly create: (accountId: number) => Effect.Effect<Redacted.Redacted<string>>
  readonly resolve: (secret: Redacted.Redacted<string>) => Effect.Effect<SessionRecord | undefined>
  readonly remove: (id: number) => Effect.Effect<void>
}>()("burnbox/Sessions") {
  static readonly layer = Layer.effect(Sessions, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const keyring = yield* Keyring
    const digest = (secret: Redacted.Redacted<string>) => keyring.digest("session", Redacted.value(secret))
    const live = SqlSchema.findOneOption({
      Request: Schema.Struct({ digest: Schema.Uint8Array, at: Schema.Date }),
      Result: SessionRow,
      execute: ({ at, digest }) => sql`
          SELECT id, account_id FROM sessions WHERE digest = ${digest} AND expires_at > ${at}`
    })

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
        return yield* live({ digest: digest(secret), at }).pipe(Effect.map(Option.getOrUndefined), Effect.orDie)
      }),
      remove: (id) => sql`DELETE FROM sessions WHERE id = ${id}`.pipe(Effect.orDie, Effect.asVoid)
    })
  }))
}
