/** The rules of an account's mail rules (decisions.md "Mail rules"). */
import { Schema } from "effect"

/** No rule of the account has this id. */
export class RuleNotFound extends Schema.TaggedError<RuleNotFound>()("RuleNotFound", {
  ruleId: Schema.Int
}) {}

/** The plan's `mailRuleCount` is reached; a rule must be deleted first. */
export class RuleLimitReached extends Schema.TaggedError<RuleLimitReached>()("RuleLimitReached", {
  limit: Schema.Int
}) {}

/**
 * A rule names what is not the account's own: `aliasId` (not one of its aliases) or a `tag`
 * action's tagId (not one of its tags).
 */
export class RuleReferenceRefused extends Schema.TaggedError<RuleReferenceRefused>()("RuleReferenceRefused", {
  fields: Schema.Record(Schema.String, Schema.String)
}) {}

export type RuleError = RuleNotFound | RuleLimitReached | RuleReferenceRefused
