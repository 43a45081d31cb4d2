import { normalizeTagColor, type Tag, TagNameTaken, TagNotFound, type TagWithCount } from "@burnbox/domain"
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { isUniqueViolation } from "../platform/SqlErrors.ts"

/** Names are unique per account, compared case-insensitively (full Unicode folding). */
export const tagNameKey = (name: string): string => name.toLowerCase()

export class Tags extends Context.Service<Tags, {
  readonly list: (accountId: number) => Effect.Effect<ReadonlyArray<TagWithCount>>
  readonly create: (accountId: number, input: { name: string; color?: string | null | undefined }) => Effect.Effect<Tag, TagNameTaken>
  readonly update: (accountId: number, id: number, input: { name?: string; color?: string | null | undefined }) => Effect.Effect<Tag, TagNameTaken | TagNotFound>
  readonly remove: (accountId: number, id: number) => Effect.Effect<void, TagNotFound>
}>()("burnbox/Tags") {
  static readonly layer = Layer.effect(Tags, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const unique = <A>(name: string, effect: Effect.Effect<A, unknown>) =>
      effect.pipe(Effect.catch((error) => isUniqueViolation(error) ? Effect.fail(new TagNameTaken({ name })) : Effect.die(error)))

    return Tags.of({
      list: (accountId) =>
        sql<TagWithCount>`
          SELECT id, name, color, ${messageCount(sql)} AS "messageCount"
          FROM tags t WHERE account_id = ${accountId} ORDER BY name_key, id`.pipe(Effect.orDie),
      create: (accountId, input) =>
        unique(input.name, sql<Tag>`
          INSERT INTO tags (account_id, name, name_key, color)
          VALUES (${accountId}, ${input.name}, ${tagNameKey(input.name)}, ${normalizeTagColor(input.color)})
          RETURNING id, name, color`).pipe(Effect.map((rows) => rows[0]!)),
      update: (accountId, id, input) => {
        const setName = input.name !== undefined
        const setColor = input.color !== undefined
        return unique(input.name ?? "", sql<Tag>`
          UPDATE tags SET
            name = CASE WHEN ${setName} THEN ${input.name ?? ""} ELSE name END,
            name_key = CASE WHEN ${setName} THEN ${tagNameKey(input.name ?? "")} ELSE name_key END,
            color = CASE WHEN ${setColor} THEN ${normalizeTagColor(input.color)}::text ELSE color END
          WHERE account_id = ${accountId} AND id = ${id}
          RETURNING id, name, color`).pipe(
          Effect.flatMap((rows) => rows[0] ? Effect.succeed(rows[0]) : Effect.fail(new TagNotFound({ tagId: id })))
        )
      },
      remove: (accountId, id) =>
        sql`DELETE FROM tags WHERE account_id = ${accountId} AND id = ${id} RETURNING id`.pipe(
          Effect.orDie,
          Effect.flatMap((rows) => rows.length > 0 ? Effect.void : Effect.fail(new TagNotFound({ tagId: id })))
        )
    })
  }))
}

/** Messages carrying the tag, outside the trash (spec 4.5, rule 1). */
const messageCount = (sql: SqlClient.SqlClient) =>
  sql`(SELECT count(*)::int FROM message_tags mt JOIN messages m ON m.id = mt.message_id
       WHERE mt.tag_id = t.id AND m.trashed_at IS NULL)`
