/** The rules of API tokens (spec 5). */
import { Schema } from "effect"

/** The plan's number of active tokens is reached; one must be revoked first. */
export class TokenLimitReached extends Schema.TaggedError<TokenLimitReached>()("TokenLimitReached", {
  limit: Schema.Int
}) {}

export type TokenError = TokenLimitReached
