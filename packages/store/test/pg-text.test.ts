/**
 * Text as PostgreSQL takes it (`pgText`, `pgJson`): a lone UTF-16 surrogate, which a JSON request
 * body can carry, reaches PostgreSQL as U+FFFD, whether as a text parameter (the driver's UTF-8)
 * or inside a json parameter (`pgJson`; JSON.stringify's `\ud800` escape is refused by
 * PostgreSQL); a pair is kept whole.
 */
import { pgJson, pgText } from "@burnbox/store"
import { TestDatabase } from "@burnbox/testkit"
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"

const value = { lone: "a\ud800b", low: ["\udc00"], pair: "😀", nested: { text: "x\udbffy" }, n: 1, none: null }
const wellFormed = { lone: "a\ufffdb", low: ["\ufffd"], pair: "😀", nested: { text: "x\ufffdy" }, n: 1, none: null }

layer(TestDatabase)("text as PostgreSQL takes it", (it) => {
  it.effect("a json parameter holding lone surrogates is stored with U+FFFD, pairs kept; JSON.stringify's text is refused", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ v: unknown }>`SELECT ${pgJson(value)}::jsonb AS v`
      assert.deepStrictEqual(row!.v, wellFormed)
      const refused = yield* Effect.result(sql`SELECT ${JSON.stringify(value)}::jsonb AS v`)
      assert.strictEqual(refused._tag, "Failure")
    }))

  it.effect("pgText drops NULs and makes lone surrogates U+FFFD, as a text column keeps them", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ v: string }>`SELECT ${pgText("a\u0000b\ud800😀")}::text AS v`
      assert.strictEqual(row!.v, "ab\ufffd😀")
    }))
})
