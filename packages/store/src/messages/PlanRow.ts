/**
 * An account's plan as the messages' statements read it: `plans.entitlements` and the account's
 * `overrides` (jsonb), decoded, for `resolveEntitlements`.
 */
import { PlanLimits } from "@burnbox/domain"
import { Schema } from "effect"

/** A plan row: PlanEntitlements, i.e. PlanLimits with the trash window and the request limits. */
export const PlanEntitlementsJson = Schema.Struct({
  ...PlanLimits.fields,
  trashRetentionDays: Schema.Int,
  requestsPerMinute: Schema.Int,
  requestsPerDay: Schema.Int
})

/** An account's overrides (`burnbox admin account override`); keys and types are judged by resolveEntitlements. */
export const PlanOverridesJson = Schema.Record(Schema.String, Schema.Union([Schema.Number, Schema.Boolean]))

/** Both, as the columns `entitlements` and `overrides` of a row. */
export const planColumns = { entitlements: PlanEntitlementsJson, overrides: PlanOverridesJson }
