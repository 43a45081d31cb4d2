import { Notice } from "@burnbox/domain"
import { Context, Effect, Layer, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { IntFromInt8, IsoFromDate } from "../platform/Rows.ts"

/** A notice row is the Notice resource; its id is an int8, its time a timestamptz. */
const NoticeRow = Schema.Struct({ ...Notice.fields, id: IntFromInt8, createdAt: IsoFromDate })
  .pipe(Schema.encodeKeys({ createdAt: "created_at" }))

export class Notices extends Context.Service<Notices, {
  readonly list: (accountId: number) => Effect.Effect<ReadonlyArray<typeof Notice.Type>>
}>()("burnbox/Notices") {
  static readonly layer = Layer.effect(Notices, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const newest = SqlSchema.findAll({
      Request: Schema.Int,
      Result: NoticeRow,
      execute: (accountId) =>
        sql`
          SELECT id, kind, data, created_at FROM account_notices WHERE account_id = ${accountId} ORDER BY id DESC LIMIT 100`
    })
    return Notices.of({
      list: (accountId) => newest(accountId).pipe(Effect.orDie)
    })
  }))
}
