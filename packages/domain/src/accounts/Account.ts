import { Schema } from "effect"
import { Email, Id, NonNegativeInt } from "../platform/Common.ts"
import { PlanLimits } from "../plans/Plan.ts"

export const MailboxDensity = Schema.Literals(["default", "comfortable", "compact"])
export type MailboxDensity = typeof MailboxDensity.Type

const accountFields = {
  id: Id,
  email: Email,
  storageUsedBytes: NonNegativeInt,
  storageQuotaBytes: NonNegativeInt,
  aliasesLifetimeClaimed: NonNegativeInt,
  activeAliasCount: NonNegativeInt,
  mailboxDensity: MailboxDensity,
  plan: PlanLimits
}

/** Spec 2.1: GET /me and the bearer bootstrap's `user`. */
export const Account = Schema.Struct(accountFields).annotate({ identifier: "Account" })
export type Account = typeof Account.Type

/** Spec 2.1: the cookie-session bootstrap's `user` adds isAdmin and handle. */
export const SessionAccount = Schema.Struct({
  ...accountFields,
  isAdmin: Schema.Boolean,
  handle: Schema.NullOr(Schema.String)
}).annotate({ identifier: "SessionAccount" })
export type SessionAccount = typeof SessionAccount.Type

/** Spec 2.3. */
export const StorageUsage = Schema.Struct({
  usedBytes: NonNegativeInt,
  quotaBytes: NonNegativeInt,
  remainingBytes: NonNegativeInt,
  usageRatio: Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 }))
}).annotate({ identifier: "StorageUsage" })
export type StorageUsage = typeof StorageUsage.Type

/** usedBytes / quotaBytes capped at 1; a zero quota reports 1 (spec 2.3). */
export const storageUsage = (usedBytes: number, quotaBytes: number): StorageUsage => ({
  usedBytes,
  quotaBytes,
  remainingBytes: Math.max(0, quotaBytes - usedBytes),
  usageRatio: quotaBytes === 0 ? 1 : Math.min(1, usedBytes / quotaBytes)
})

/** The password rule (decisions.md, "Authentication endpoints"): 8 to 256 characters. */
export const PasswordLength = { min: 8, max: 256 } as const
export const Password = Schema.String.check(Schema.isMinLength(PasswordLength.min), Schema.isMaxLength(PasswordLength.max))
export const isValidPassword = Schema.is(Password)

export const Credentials = Schema.Struct({
  email: Email,
  password: Password
})

export const LoginCredentials = Schema.Struct({
  email: Schema.String.check(Schema.isMaxLength(254)),
  password: Schema.String.check(Schema.isMaxLength(PasswordLength.max))
})

export const DensityInput = Schema.Struct({ density: MailboxDensity })
