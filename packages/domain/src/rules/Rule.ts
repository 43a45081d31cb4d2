/**
 * Mail rules (decisions.md "Mail rules", behind the plan's `mailRuleCount`): what a rule is on
 * the wire, and the pure rules of the walk the pipeline makes over an account's rules.
 */
import { Schema } from "effect"
import { DateTimeString, Id, NonNegativeInt } from "../platform/Common.ts"

/** A case-insensitive substring a message must contain: 1..200 characters. */
export const RuleText = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(200))
export const RuleName = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(80))

/** All the conditions given must hold; none given matches every message. */
export const RuleMatch = Schema.Struct({
  from: Schema.optionalKey(RuleText),
  to: Schema.optionalKey(RuleText),
  subject: Schema.optionalKey(RuleText),
  body: Schema.optionalKey(RuleText),
  hasAttachment: Schema.optionalKey(Schema.Boolean),
  hasOtp: Schema.optionalKey(Schema.Boolean)
}).annotate({ identifier: "RuleMatch" })
export type RuleMatch = typeof RuleMatch.Type

/** The mark actions: each sets one of the owner's marks on the message. */
export const RuleMarkType = Schema.Literals(["star", "pin", "archive", "mark_read", "trash"])
export type RuleMarkType = typeof RuleMarkType.Type

export const RuleAction = Schema.Union([
  Schema.Struct({ type: Schema.Literal("tag"), tagId: Id }),
  Schema.Struct({ type: RuleMarkType })
]).annotate({ identifier: "RuleAction" })
export type RuleAction = typeof RuleAction.Type

export const RuleActions = Schema.Array(RuleAction).check(Schema.isMinLength(1), Schema.isMaxLength(5))

/** decisions.md "Mail rules": the resource, exactly. */
export const Rule = Schema.Struct({
  id: Id,
  name: Schema.String,
  enabled: Schema.Boolean,
  position: NonNegativeInt,
  aliasId: Schema.NullOr(Id),
  match: RuleMatch,
  actions: Schema.Array(RuleAction),
  stop: Schema.Boolean,
  createdAt: DateTimeString,
  updatedAt: DateTimeString
}).annotate({ identifier: "Rule" })
export type Rule = typeof Rule.Type

export const RuleList = Schema.Struct({ items: Schema.Array(Rule), limit: NonNegativeInt }).annotate({ identifier: "RuleList" })
export type RuleList = typeof RuleList.Type

export const CreateRule = Schema.Struct({
  name: RuleName,
  enabled: Schema.optionalKey(Schema.Boolean),
  position: Schema.optionalKey(NonNegativeInt),
  aliasId: Schema.optionalKey(Schema.NullOr(Id)),
  match: Schema.optionalKey(RuleMatch),
  actions: RuleActions,
  stop: Schema.optionalKey(Schema.Boolean)
})
export type CreateRule = typeof CreateRule.Type

export const UpdateRule = Schema.Struct({
  name: Schema.optionalKey(RuleName),
  enabled: Schema.optionalKey(Schema.Boolean),
  position: Schema.optionalKey(NonNegativeInt),
  aliasId: Schema.optionalKey(Schema.NullOr(Id)),
  match: Schema.optionalKey(RuleMatch),
  actions: Schema.optionalKey(RuleActions),
  stop: Schema.optionalKey(Schema.Boolean)
})
export type UpdateRule = typeof UpdateRule.Type

/** The tags a rule's actions name (each checked to be the account's own when the rule is written). */
export const ruleTagIds = (actions: ReadonlyArray<RuleAction>): ReadonlyArray<number> => [
  ...new Set(actions.flatMap((action) => action.type === "tag" ? [action.tagId] : []))
]

