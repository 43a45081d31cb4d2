import { Effect, Schema } from "effect"

/**
 * The decoder of a statement's rows, built once (call it where the repository is built, not per
 * query): a row that does not fit `row` is a defect, since the SQL or the schema is wrong, not the
 * caller. The statement's own SqlError is left to the caller (inside a transaction it may decide
 * what a failed statement means).
 */
export const rowsDecoder = <S extends Schema.Codec<unknown, unknown>>(row: S) => {
  const decode = Schema.decodeUnknownEffect(Schema.Array(row))
  return (rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<S["Type"]>> => Effect.orDie(decode(rows))
}
