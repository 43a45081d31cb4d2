import { type DomainTier, domainAccess, type MailDomain } from "@burnbox/domain"
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"

export interface DomainRow {
  readonly id: number
  readonly name: string
  readonly state: "active" | "retired"
  readonly tier: DomainTier
}

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
    return Domains.of({
      list: sql<DomainRow>`SELECT id, name, state, tier FROM domains ORDER BY id`.pipe(Effect.orDie),
      add: (name, tier) =>
        sql<DomainRow>`
          INSERT INTO domains (name, tier) VALUES (${name.toLowerCase()}, ${tier})
          ON CONFLICT (name) DO UPDATE SET tier = EXCLUDED.tier
          RETURNING id, name, state, tier`.pipe(Effect.orDie, Effect.map((rows) => rows[0]!)),
      retire: (name) =>
        sql<DomainRow>`
          UPDATE domains SET state = 'retired' WHERE name = ${name.toLowerCase()}
          RETURNING id, name, state, tier`.pipe(Effect.orDie, Effect.map((rows) => rows[0]))
    })
  }))
}
