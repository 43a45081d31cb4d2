/** What a plan includes and how much it holds (spec 2.2, 8). */
import { Schema } from "effect"

/**
 * The plan features a request can need and the account's plan can lack: the plan's boolean
 * entitlements, `testMail` (a plan with test messages per day) and `sharing` (a paid plan:
 * premium or pro, decisions.md "Sharing a mailbox").
 */
export const PlanFeature = Schema.Literals(["earlyAccessDomains", "selfDestructTimers", "developerAccess", "bulkExport", "testMail", "sharing"])
export type PlanFeature = typeof PlanFeature.Type

/** The account's plan does not include the feature the request needs. */
export class FeatureNotInPlan extends Schema.TaggedError<FeatureNotInPlan>()("FeatureNotInPlan", {
  feature: PlanFeature
}) {}

/** A message is larger than the whole storage quota of an account it is for: no eviction makes room. */
export class QuotaExceeded extends Schema.TaggedError<QuotaExceeded>()("QuotaExceeded", {
  accountId: Schema.Int,
  sizeBytes: Schema.Number,
  quotaBytes: Schema.Number
}) {}

export type PlanError = FeatureNotInPlan | QuotaExceeded
