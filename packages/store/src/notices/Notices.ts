import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"

export class Notices extends Context.Service<Notices, {
  readonly list: (accountId: number) => Effect.Effect<ReadonlyArray<{ id: number; kind: string; data: Record<string, unknown>; createdAt: string }>>
}>()("burnbox/Notices") {
  static readonly layer = Layer.effect(Notices, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return Notices.of({
      list: (accountId) =>
        sql<{ id: string | number; kind: string; data: Record<string, unknown>; created_at: Date }>`
          SELECT id, kind, data, created_at FROM account_notices WHERE account_id = ${accountId} ORDER BY id DESC LIMIT 100`.pipe(
          Effect.orDie,
          Effect.map((rows) => rows.map((r) => ({ id: Number(r.id), kind: r.kind, data: r.data, createdAt: r.created_at.toISOString() })))
        )
    })
  }))
}
