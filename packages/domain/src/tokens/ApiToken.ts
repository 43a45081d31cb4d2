import { Schema } from "effect"
import { DateTimeInput, DateTimeString, Id } from "../platform/Common.ts"

/** The five bearer scopes of spec 5.3. */
export const Scopes = ["read", "manage-aliases", "delete", "webhooks", "test"] as const
export const Scope = Schema.Literals(Scopes)
export type Scope = typeof Scope.Type

/** Every token starts with this prefix (decisions.md, fixed). */
export const TokenPrefix = "bbx_pat_"

export const TokenStatus = Schema.Literals(["active", "suspended", "revoked"])

export const ScopeList = Schema.Array(Scope).check(Schema.isMinLength(1), Schema.isMaxLength(5), Schema.isUnique())

/** decisions.md, "Authentication endpoints". */
export const ApiToken = Schema.Struct({
  id: Id,
  name: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(80)),
  scopes: ScopeList,
  prefix: Schema.String,
  status: TokenStatus,
  createdAt: DateTimeString,
  lastUsedAt: Schema.NullOr(DateTimeString),
  expiresAt: Schema.NullOr(DateTimeString)
}).annotate({ identifier: "ApiToken" })
export type ApiToken = typeof ApiToken.Type

export const CreateToken = Schema.Struct({
  name: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(80)),
  scopes: ScopeList,
  expiresAt: Schema.optionalKey(Schema.NullOr(DateTimeInput))
})

export const CreatedToken = Schema.Struct({
  token: ApiToken,
  secret: Schema.String,
  secretShownOnce: Schema.Literal(true)
})

/** The number of active tokens an account may hold (spec 5.2, 8). */
export const MaxActiveTokens = 10
