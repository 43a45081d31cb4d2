/** The rules of accounts and signing in. */
import { Schema } from "effect"

/** One account per email address, compared case-insensitively. */
export class EmailTaken extends Schema.TaggedError<EmailTaken>()("EmailTaken", {}) {}

/** The email and password name no account. */
export class InvalidCredentials extends Schema.TaggedError<InvalidCredentials>()("InvalidCredentials", {}) {}

/** Too many failed sign-ins for the email or from the address; `retryAfter` seconds until the window frees. */
export class SignInThrottled extends Schema.TaggedError<SignInThrottled>()("SignInThrottled", {
  retryAfter: Schema.Int
}) {}

export type AccountError = EmailTaken | InvalidCredentials | SignInThrottled
