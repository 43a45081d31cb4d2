/** The rules of API tokens (spec 5). */
import { Schema } from "effect"

/** The plan's number of active tokens is reached; one must be revoked first. */
export class TokenLimitReached extends Schema.TaggedError<TokenLimitReached>()("TokenLimitReached", {
  limit: Schema.Int
}) {}

/** No token of the account has this id. */
export class TokenNotFound extends Schema.TaggedError<TokenNotFound>()("TokenNotFound", {
  tokenId: Schema.Int
}) {}

/** A token's expiry, when given, lies in the future. */
export class TokenExpiryNotInFuture extends Schema.TaggedError<TokenExpiryNotInFuture>()("TokenExpiryNotInFuture", {
  expiresAt: Schema.String
}) {}

export type TokenError = TokenLimitReached | TokenNotFound | TokenExpiryNotInFuture
