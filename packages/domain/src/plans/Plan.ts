import { Schema, SchemaTransformation } from "effect"
import { NonNegativeInt } from "../platform/Common.ts"
import type { PlanFeature } from "./errors.ts"

export const PlanCode = Schema.Literals(["free", "premium", "pro"])
export type PlanCode = typeof PlanCode.Type

/** Resolved entitlements of an account: its plan's row with the account's overrides applied (spec 2.2). */
export const PlanLimits = Schema.Struct({
  code: PlanCode,
  name: Schema.String,
  activeAliasCap: Schema.Int,
  aliasLifetimeCap: Schema.Int,
  claimsPerDay: Schema.Int,
  candidateShufflesPerHour: Schema.Int,
  retentionDays: Schema.Int,
  maxPinned: Schema.Int,
  mailRuleCount: Schema.Int,
  apiTokenCount: Schema.Int,
  webhookCount: Schema.Int,
  testMessagesPerDay: Schema.Int,
  candidateShufflesUnlimited: Schema.Boolean,
  earlyAccessDomains: Schema.Boolean,
  selfDestructTimers: Schema.Boolean,
  bulkExport: Schema.Boolean,
  developerAccess: Schema.Boolean,
  storageQuotaBytes: NonNegativeInt
})
export type PlanLimits = typeof PlanLimits.Type

/** A plan row's entitlements: PlanLimits, and beyond them the trash window and the per-token request limits. */
export const PlanEntitlements = Schema.Struct({
  ...PlanLimits.fields,
  trashRetentionDays: Schema.Int,
  requestsPerMinute: Schema.Int,
  requestsPerDay: Schema.Int
})
export type PlanEntitlements = typeof PlanEntitlements.Type

/** The plan fields an account's overrides may set: every entitlement but the plan's code and name. */
type OverridableKey = Exclude<keyof PlanEntitlements, "code" | "name">

/**
 * The keys `burnbox admin account override` accepts, with the type of each value: derived from
 * PlanEntitlements, so a new plan field is overridable the moment it is declared.
 */
export const OverridableKeys: Readonly<Record<OverridableKey, "int" | "boolean">> = Object.fromEntries(
  Object.entries(PlanEntitlements.fields)
    .filter(([key]) => key !== "code" && key !== "name")
    .map(([key, field]) => [key, field === Schema.Boolean ? "boolean" : "int"])
) as Record<OverridableKey, "int" | "boolean">

const overridableKind = (key: string): "int" | "boolean" | undefined =>
  Object.hasOwn(OverridableKeys, key) ? OverridableKeys[key as OverridableKey] : undefined

/** Whether `value` can override `key`: a known key, with a whole number >= 0 or a boolean as the key takes. */
const isOverride = (key: string, value: unknown): value is number | boolean => {
  const kind = overridableKind(key)
  return (kind === "int" && typeof value === "number" && Number.isInteger(value) && value >= 0) ||
    (kind === "boolean" && typeof value === "boolean")
}

/**
 * An account's overrides as stored (a JSON object), decoded to the entries that override
 * something: unknown keys and values of the wrong kind are dropped, as resolveEntitlements
 * would ignore them.
 */
export const PlanOverrides = Schema.Record(Schema.String, Schema.Unknown).pipe(
  Schema.decodeTo(
    Schema.Record(Schema.String, Schema.Union([Schema.Number, Schema.Boolean])),
    SchemaTransformation.transform({
      decode: (stored) => {
        const applied: Record<string, number | boolean> = {}
        for (const [key, value] of Object.entries(stored)) if (isOverride(key, value)) applied[key] = value
        return applied
      },
      encode: (applied) => applied
    })
  )
)
export type PlanOverrides = typeof PlanOverrides.Type

const MiB = 1024 * 1024

/** The plan rows seeded by the first migration (decisions.md, "Plans"). */
export const DefaultPlans: Readonly<Record<PlanCode, PlanEntitlements>> = {
  free: {
    code: "free",
    name: "Free",
    activeAliasCap: 3,
    aliasLifetimeCap: 50,
    claimsPerDay: 5,
    candidateShufflesPerHour: 10,
    candidateShufflesUnlimited: false,
    retentionDays: 3,
    trashRetentionDays: 0,
    maxPinned: 3,
    mailRuleCount: 0,
    apiTokenCount: 0,
    webhookCount: 0,
    testMessagesPerDay: 0,
    earlyAccessDomains: false,
    selfDestructTimers: false,
    bulkExport: false,
    developerAccess: false,
    storageQuotaBytes: 50 * MiB,
    requestsPerMinute: 600,
    requestsPerDay: 100_000
  },
  premium: {
    code: "premium",
    name: "Premium",
    activeAliasCap: 20,
    aliasLifetimeCap: 500,
    claimsPerDay: 30,
    candidateShufflesPerHour: 60,
    candidateShufflesUnlimited: false,
    retentionDays: 30,
    trashRetentionDays: 7,
    maxPinned: 20,
    mailRuleCount: 10,
    apiTokenCount: 0,
    webhookCount: 0,
    testMessagesPerDay: 0,
    earlyAccessDomains: true,
    selfDestructTimers: true,
    bulkExport: false,
    developerAccess: false,
    storageQuotaBytes: 1024 * MiB,
    requestsPerMinute: 600,
    requestsPerDay: 100_000
  },
  pro: {
    code: "pro",
    name: "Pro",
    activeAliasCap: 200,
    aliasLifetimeCap: 10_000,
    claimsPerDay: 200,
    candidateShufflesPerHour: 0,
    candidateShufflesUnlimited: true,
    retentionDays: 90,
    trashRetentionDays: 30,
    maxPinned: 100,
    mailRuleCount: 50,
    apiTokenCount: 10,
    webhookCount: 10,
    testMessagesPerDay: 500,
    earlyAccessDomains: true,
    selfDestructTimers: true,
    bulkExport: true,
    developerAccess: true,
    storageQuotaBytes: 10 * 1024 * MiB,
    requestsPerMinute: 600,
    requestsPerDay: 100_000
  }
}

/** Applies an account's overrides to its plan row. Unknown keys and wrongly typed values are ignored. */
export const resolveEntitlements = (plan: PlanEntitlements, overrides: PlanOverrides): PlanEntitlements => {
  const resolved: Record<string, unknown> = { ...plan }
  for (const [key, value] of Object.entries(overrides)) if (isOverride(key, value)) resolved[key] = value
  return resolved as unknown as PlanEntitlements
}

const planLimitKeys = Object.keys(PlanLimits.fields) as ReadonlyArray<keyof PlanLimits>

/** The PlanLimits view of resolved entitlements: exactly the fields of spec 2.2, in their order, nothing more. */
export const toPlanLimits = (e: PlanEntitlements): PlanLimits =>
  Object.fromEntries(planLimitKeys.map((key) => [key, e[key]])) as unknown as PlanLimits

/**
 * An account's plan as a statement reads it: the plan row's entitlements and the account's
 * overrides, decoded to the resolved entitlements (the only way the store turns the two into one).
 */
export const ResolvedPlan = Schema.Struct({ entitlements: PlanEntitlements, overrides: PlanOverrides }).pipe(
  Schema.decodeTo(
    PlanEntitlements,
    SchemaTransformation.transform({
      decode: ({ entitlements, overrides }) => resolveEntitlements(entitlements, overrides),
      encode: (entitlements) => ({ entitlements, overrides: {} })
    })
  )
)

/**
 * Parses `key=value[,key=value...]` for `burnbox admin account override --set`.
 * Returns the overrides or the first offending pair.
 */
export const parseOverrides = (input: string): { ok: true; overrides: PlanOverrides } | { ok: false; error: string } => {
  const overrides: Record<string, number | boolean> = {}
  for (const pair of input.split(",").map((p) => p.trim()).filter((p) => p.length > 0)) {
    const [key, value, ...rest] = pair.split("=")
    if (key === undefined || value === undefined || rest.length > 0) return { ok: false, error: `expected key=value, got "${pair}"` }
    const kind = overridableKind(key)
    if (kind === undefined) return { ok: false, error: `unknown key "${key}"` }
    if (kind === "boolean") {
      if (value !== "true" && value !== "false") return { ok: false, error: `${key} takes true or false` }
      overrides[key] = value === "true"
    } else {
      if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) return { ok: false, error: `${key} takes a whole number >= 0` }
      overrides[key] = Number(value)
    }
  }
  return { ok: true, overrides }
}

/** Whether resolved entitlements include a feature (the one rule behind every FeatureNotInPlan). */
export const planIncludes = (plan: PlanEntitlements, feature: PlanFeature): boolean =>
  feature === "testMail" ? plan.testMessagesPerDay > 0 : feature === "sharing" ? plan.code !== "free" : plan[feature]
