import { domainAccess, DomainState, DomainTier, type MailDomain } from "@burnbox/domain"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"

/** A receiving domain as stored; MailDomain adds what one account may do with it. */
export const DomainRow = Schema.Struct({ id: Schema.Int, name: Schema.String, state: DomainState, tier: DomainTier })
export type DomainRow = typeof DomainRow.Type

export const toMailDomain = (row: DomainRow, earlyAccessDomains: boolean): MailDomain => ({
  id: row.id,
  name: row.name,
  state: row.state,
  tier: row.tier,
  ...domainAccess(row, earlyAccessDomains)
})

export class Domains extends Context.Service<Domains, {
  readonly list: Effect.Effect<ReadonlyArray<DomainRow>>
  readonly add: (name: string, tier: DomainTier) => Effect.Effect<DomainRow>
  readonly retire: (name: string) => Effect.Effect<DomainRow | undefined>
}>()("burnbox/Domains") {
  static readonly layer = Layer.effect(Domains, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const all = SqlSchema.findAll({
      Request: Schema.Void,
      Result: DomainRow,
      execute: () => sql`SELECT id, name, state, tier FROM domains ORDER BY id`
    })
    const upsert = SqlSchema.findOne({
      Request: Schema.Struct({ name: Schema.String, tier: DomainTier }),
      Result: DomainRow,
      execute: ({ name, tier }) =>
        sql`
          INSERT INTO domains (name, tier) VALUES (${name}, ${tier})
          ON CONFLICT (name) DO UPDATE SET tier = EXCLUDED.tier
          RETURNING id, name, state, tier`
    })
    const retireNamed = SqlSchema.findOneOption({
      Request: Schema.String,
      Result: DomainRow,
      execute: (name) =>
        sql`
          UPDATE domains SET state = 'retired' WHERE name = ${name}
          RETURNING id, name, state, tier`
    })
    return Domains.of({
      list: all(undefined).pipe(Effect.orDie),
      add: (name, tier) => upsert({ name: name.toLowerCase(), tier }).pipe(Effect.orDie),
      retire: (name) => retireNamed(name.toLowerCase()).pipe(Effect.map(Option.getOrUndefined), Effect.orDie)
    })
  }))
}
