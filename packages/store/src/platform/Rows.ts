/**
 * What the repositories' row schemas share. @effect/sql-pg reads every column in binary:
 * timestamptz arrives as a Date, int8 as a bigint, json and jsonb parsed, arrays as arrays.
 * A row that does not decode means the schema and the table disagree: a defect, like an SqlError.
 */
import { DateTimeString } from "@burnbox/domain"
import { Effect, Schema, SchemaTransformation } from "effect"

/** A timestamptz as the interface writes it (RFC 3339, UTC, milliseconds). */
export const IsoFromDate = Schema.Date.pipe(
  Schema.decodeTo(DateTimeString, SchemaTransformation.transform({ decode: (date) => date.toISOString(), encode: (text) => new Date(text) }))
)

/** An int8 id the interface shows as a number (identities stay far below 2^53; Int checks). */
export const IntFromInt8 = Schema.BigInt.pipe(
  Schema.decodeTo(Schema.Int, SchemaTransformation.transform({ decode: Number, encode: BigInt }))
)

/** A `count(*)::int AS n`. */
export const CountRow = Schema.Struct({ n: Schema.Int })

/** A `RETURNING id` of an int4 identity. */
export const IdRow = Schema.Struct({ id: Schema.Int })

/**
 * Decodes all rows of a statement built from fragments, where `SqlSchema` has no request to
 * take. Make it once (module or layer level): it builds the decoder.
 */
export const decodeRows = <S extends Schema.Codec<unknown, unknown>>(row: S) => Schema.decodeUnknownEffect(Schema.Array(row))

/**
 * `decodeRows` with a row that does not fit as a defect (the SQL or the schema is wrong, not the
 * caller); the statement's own SqlError is left to the caller. Make it once, like `decodeRows`.
 */
export const rowsDecoder = <S extends Schema.Codec<unknown, unknown>>(row: S) => {
  const decode = decodeRows(row)
  return (rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<S["Type"]>> => Effect.orDie(decode(rows))
}
