/**
 * An account's plan as the messages' statements read it: `plans.entitlements` and the account's
 * `overrides` (jsonb), decoded with the domain's schemas (one each), for `resolveEntitlements`.
 * Overrides of an unknown key or the wrong kind are dropped when decoded, as the rule ignores them.
 */
import { PlanEntitlements, PlanOverrides } from "@burnbox/domain"

/** Both, as the columns `entitlements` and `overrides` of a row. */
export const planColumns = { entitlements: PlanEntitlements, overrides: PlanOverrides }
