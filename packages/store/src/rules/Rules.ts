/**
 * Rules: an account's mail rules (decisions.md "Mail rules"), the table `mail_rules` (migration
 * 0022). At most the plan's `mailRuleCount` rules may be written (RuleLimitReached); a plan
 * change keeps every rule but runs only the first `mailRuleCount` in position order, which this
 * service keeps in `beyond_cap` on every write and, through Entitlements' registry, on every plan
 * change. The pipeline's walk over the running rules is a fragment of its store statement
 * (RuleWalk.ts).
 */
import {
  type CreateRule,
  type Rule,
  RuleLimitReached,
  type RuleMatch,
  RuleNotFound,
  RuleReferenceRefused,
  type RuleAction,
  RuleActions,
  RuleMatch as RuleMatchSchema,
  ruleTagIds,
  type UpdateRule
} from "@burnbox/domain"
import { Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Entitlements } from "../plans/Entitlements.ts"
import { CountRow, IsoFromDate, rowsDecoder } from "../platform/Rows.ts"
import { pgJson } from "../platform/PgText.ts"
import { now } from "../platform/Time.ts"

const RuleRow = Schema.Struct({
  id: Schema.Int,
  name: Schema.String,
  enabled: Schema.Boolean,
  position: Schema.Int,
  alias_id: Schema.NullOr(Schema.Int),
  match: RuleMatchSchema,
  actions: RuleActions,
  stop: Schema.Boolean,
  created_at: IsoFromDate,
  updated_at: IsoFromDate
})

const toRule = (row: typeof RuleRow.Type): Rule => ({
  id: row.id,
  name: row.name,
  enabled: row.enabled,
  position: row.position,
  aliasId: row.alias_id,
  match: row.match,
  actions: row.actions,
  stop: row.stop,
  createdAt: row.created_at,
  updatedAt: row.updated_at
})

const ruleColumns = "id, name, enabled, position, alias_id, match, actions, stop, created_at, updated_at"

/** The columns the pipeline's walk reads, derived from a rule's match and actions. */
const walkColumns = (match: RuleMatch, actions: ReadonlyArray<RuleAction>) => {
  const sets = (type: RuleAction["type"]) => actions.some((action) => action.type === type)
  return {
    match_from: match.from ?? null,
    match_to: match.to ?? null,
    match_subject: match.subject ?? null,
    match_body: match.body ?? null,
    match_has_attachment: match.hasAttachment ?? null,
    match_has_otp: match.hasOtp ?? null,
    sets_read: sets("mark_read"),
    sets_starred: sets("star"),
    sets_pinned: sets("pin"),
    sets_archived: sets("archive"),
    sets_trash: sets("trash"),
    tag_ids: ruleTagIds(actions)
  }
}

export class Rules extends Context.Service<Rules, {
  /** GET /rules: the account's rules in position order, and the plan's mailRuleCount. */
  readonly list: (accountId: number) => Effect.Effect<{ readonly items: ReadonlyArray<Rule>; readonly limit: number }>
  readonly create: (accountId: number, input: CreateRule) => Effect.Effect<Rule, RuleLimitReached | RuleReferenceRefused>
  readonly update: (accountId: number, id: number, input: UpdateRule) => Effect.Effect<Rule, RuleNotFound | RuleReferenceRefused>
  readonly remove: (accountId: number, id: number) => Effect.Effect<void, RuleNotFound>
}>()("burnbox/Rules") {
  static readonly layer = Layer.effect(Rules, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const entitlements = yield* Entitlements
    const ruleRows = rowsDecoder(RuleRow)
    const countRows = rowsDecoder(CountRow)

    /** Marks the rules beyond the first `cap` in position order as not running, the others as running. */
    const followCap = (accountId: number, cap: number) =>
      sql`
        UPDATE mail_rules r SET beyond_cap = o.rank > ${cap}
        FROM (SELECT id, row_number() OVER (ORDER BY position, id) AS rank FROM mail_rules WHERE account_id = ${accountId}) o
        WHERE r.id = o.id AND r.beyond_cap <> (o.rank > ${cap})`.pipe(Effect.orDie, Effect.asVoid)

    yield* entitlements.onPlanChange({ feature: "rules", apply: ({ accountId, after }) => followCap(accountId, after.mailRuleCount) })

    /** The aliasId and tag actions of a write must name the account's own alias and tags. */
    const checkReferences = (accountId: number, aliasId: number | null | undefined, actions: ReadonlyArray<RuleAction> | undefined) =>
      Effect.gen(function*() {
        const fields: Record<string, string> = {}
        if (aliasId !== null && aliasId !== undefined) {
          const [row] = yield* sql`
            SELECT count(*)::int AS n FROM aliases WHERE id = ${aliasId} AND account_id = ${accountId} AND status <> 'reserved'`
            .pipe(Effect.flatMap(countRows))
          if (row!.n === 0) fields.aliasId = "unknown_alias"
        }
        const tagIds = actions === undefined ? [] : ruleTagIds(actions)
        if (tagIds.length > 0) {
          const [row] = yield* sql`SELECT count(*)::int AS n FROM tags WHERE account_id = ${accountId} AND id IN ${sql.in(tagIds)}`
            .pipe(Effect.flatMap(countRows))
          if (row!.n !== tagIds.length) fields.actions = "unknown_tag"
        }
        if (Object.keys(fields).length > 0) return yield* Effect.fail(new RuleReferenceRefused({ fields }))
      })

    const list = Effect.fn("Rules.list")(function*(accountId: number) {
      const plan = yield* entitlements.of(accountId)
      const rows = yield* sql`
        SELECT ${sql.literal(ruleColumns)} FROM mail_rules WHERE account_id = ${accountId} ORDER BY position, id`
        .pipe(Effect.orDie, Effect.flatMap(ruleRows))
      return { items: rows.map(toRule), limit: plan.mailRuleCount }
    })

    const create = Effect.fn("Rules.create")(function*(accountId: number, input: CreateRule) {
      return yield* sql.withTransaction(Effect.gen(function*() {
        // The account's row lock orders concurrent creates, so the cap holds.
        const plan = yield* entitlements.lock(accountId)
        const [count] = yield* sql`SELECT count(*)::int AS n FROM mail_rules WHERE account_id = ${accountId}`.pipe(Effect.flatMap(countRows))
        if (count!.n >= plan.mailRuleCount) return yield* Effect.fail(new RuleLimitReached({ limit: plan.mailRuleCount }))
        yield* checkReferences(accountId, input.aliasId, input.actions)
        const match = input.match ?? {}
        const at = yield* now
        const walk = walkColumns(match, input.actions)
        const [row] = yield* sql`
          INSERT INTO mail_rules (account_id, alias_id, name, enabled, position, match, actions, stop,
                                  match_from, match_to, match_subject, match_body, match_has_attachment, match_has_otp,
                                  sets_read, sets_starred, sets_pinned, sets_archived, sets_trash, tag_ids, created_at, updated_at)
          VALUES (${accountId}, ${input.aliasId ?? null}, ${input.name}, ${input.enabled ?? true},
                  coalesce(${input.position ?? null}::int, (SELECT max(position) + 1 FROM mail_rules WHERE account_id = ${accountId}), 0),
                  ${pgJson(match)}::jsonb, ${pgJson(input.actions)}::jsonb, ${input.stop ?? false},
                  lower(${walk.match_from}::text), lower(${walk.match_to}::text), lower(${walk.match_subject}::text), lower(${walk.match_body}::text),
                  ${walk.match_has_attachment}::boolean, ${walk.match_has_otp}::boolean,
                  ${walk.sets_read}, ${walk.sets_starred}, ${walk.sets_pinned}, ${walk.sets_archived}, ${walk.sets_trash},
                  ${`{${walk.tag_ids.join(",")}}`}::int[], ${at}, ${at})
          RETURNING id`.pipe(Effect.flatMap(rowsDecoder(Schema.Struct({ id: Schema.Int }))))
        yield* followCap(accountId, plan.mailRuleCount)
        return yield* readOne(accountId, row!.id).pipe(Effect.orDie)
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    const readOne = (accountId: number, id: number) =>
      sql`SELECT ${sql.literal(ruleColumns)} FROM mail_rules WHERE account_id = ${accountId} AND id = ${id}`.pipe(
        Effect.orDie,
        Effect.flatMap(ruleRows),
        Effect.flatMap(([row]) => row === undefined ? Effect.fail(new RuleNotFound({ ruleId: id })) : Effect.succeed(toRule(row)))
      )

    const update = Effect.fn("Rules.update")(function*(accountId: number, id: number, input: UpdateRule) {
      return yield* sql.withTransaction(Effect.gen(function*() {
        const plan = yield* entitlements.lock(accountId)
        const current = yield* readOne(accountId, id)
        yield* checkReferences(accountId, input.aliasId, input.actions)
        const match = input.match ?? current.match
        const actions = input.actions ?? current.actions
        const walk = walkColumns(match, actions)
        const at = yield* now
        yield* sql`
          UPDATE mail_rules SET
            name = ${input.name ?? current.name}, enabled = ${input.enabled ?? current.enabled},
            position = ${input.position ?? current.position},
            alias_id = ${input.aliasId === undefined ? current.aliasId : input.aliasId}::int,
            match = ${pgJson(match)}::jsonb, actions = ${pgJson(actions)}::jsonb,
            stop = ${input.stop ?? current.stop},
            match_from = lower(${walk.match_from}::text), match_to = lower(${walk.match_to}::text),
            match_subject = lower(${walk.match_subject}::text), match_body = lower(${walk.match_body}::text),
            match_has_attachment = ${walk.match_has_attachment}::boolean, match_has_otp = ${walk.match_has_otp}::boolean,
            sets_read = ${walk.sets_read}, sets_starred = ${walk.sets_starred}, sets_pinned = ${walk.sets_pinned},
            sets_archived = ${walk.sets_archived}, sets_trash = ${walk.sets_trash},
            tag_ids = ${`{${walk.tag_ids.join(",")}}`}::int[], updated_at = ${at}
          WHERE account_id = ${accountId} AND id = ${id}`
        // A new position changes which rules are within the cap.
        yield* followCap(accountId, plan.mailRuleCount)
        return yield* readOne(accountId, id)
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    const remove = Effect.fn("Rules.remove")(function*(accountId: number, id: number) {
      return yield* sql.withTransaction(Effect.gen(function*() {
        const plan = yield* entitlements.lock(accountId)
        const deleted = yield* sql`DELETE FROM mail_rules WHERE account_id = ${accountId} AND id = ${id} RETURNING id`
        if (deleted.length === 0) return yield* Effect.fail(new RuleNotFound({ ruleId: id }))
        yield* followCap(accountId, plan.mailRuleCount)
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    return Rules.of({ list, create, update, remove })
  }))
}
