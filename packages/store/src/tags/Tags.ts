import { normalizeTagColor, Tag, TagNameTaken, TagNotFound, TagWithCount } from "@burnbox/domain"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { isUniqueViolation } from "../platform/SqlErrors.ts"

/** Names are unique per account, compared case-insensitively (full Unicode folding). */
export const tagNameKey = (name: string): string => name.toLowerCase()

/** A name another tag of the account holds is TagNameTaken; any other failure is a defect. */
const unique = <A>(name: string, effect: Effect.Effect<A, unknown>) =>
  effect.pipe(Effect.catch((error) => isUniqueViolation(error) ? Effect.fail(new TagNameTaken({ name })) : Effect.die(error)))

export class Tags extends Context.Service<Tags, {
  readonly list: (accountId: number) => Effect.Effect<ReadonlyArray<TagWithCount>>
  readonly create: (accountId: number, input: { name: string; color?: string | null | undefined }) => Effect.Effect<Tag, TagNameTaken>
  readonly update: (accountId: number, id: number, input: { name?: string; color?: string | null | undefined }) => Effect.Effect<Tag, TagNameTaken | TagNotFound>
  readonly remove: (accountId: number, id: number) => Effect.Effect<void, TagNotFound>
}>()("burnbox/Tags") {
  static readonly layer = Layer.effect(Tags, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const ofAccount = SqlSchema.findAll({
      Request: Schema.Int,
      Result: TagWithCount,
      execute: (accountId) =>
        sql`
          SELECT id, name, color, ${messageCount(sql)} AS "messageCount"
          FROM tags t WHERE account_id = ${accountId} ORDER BY name_key, id`
    })
    const insert = SqlSchema.findOne({
      Request: Schema.Struct({ accountId: Schema.Int, name: Schema.String, nameKey: Schema.String, color: Schema.NullOr(Schema.String) }),
      Result: Tag,
      execute: ({ accountId, color, name, nameKey }) =>
        sql`
          INSERT INTO tags (account_id, name, name_key, color)
          VALUES (${accountId}, ${name}, ${nameKey}, ${color})
          RETURNING id, name, color`
    })
    const change = SqlSchema.findOneOption({
      Request: Schema.Struct({
        accountId: Schema.Int,
        id: Schema.Int,
        setName: Schema.Boolean,
        name: Schema.String,
        nameKey: Schema.String,
        setColor: Schema.Boolean,
        color: Schema.NullOr(Schema.String)
      }),
      Result: Tag,
      execute: ({ accountId, color, id, name, nameKey, setColor, setName }) =>
        sql`
          UPDATE tags SET
            name = CASE WHEN ${setName} THEN ${name} ELSE name END,
            name_key = CASE WHEN ${setName} THEN ${nameKey} ELSE name_key END,
            color = CASE WHEN ${setColor} THEN ${color}::text ELSE color END
          WHERE account_id = ${accountId} AND id = ${id}
          RETURNING id, name, color`
    })

    return Tags.of({
      list: (accountId) => ofAccount(accountId).pipe(Effect.orDie),
      create: (accountId, input) =>
        unique(input.name, insert({ accountId, name: input.name, nameKey: tagNameKey(input.name), color: normalizeTagColor(input.color) })),
      update: (accountId, id, input) =>
        unique(input.name ?? "", change({
          accountId,
          id,
          setName: input.name !== undefined,
          name: input.name ?? "",
          nameKey: tagNameKey(input.name ?? ""),
          setColor: input.color !== undefined,
          color: normalizeTagColor(input.color)
        })).pipe(
          Effect.flatMap((tag) => Option.isSome(tag) ? Effect.succeed(tag.value) : Effect.fail(new TagNotFound({ tagId: id })))
        ),
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
