/** The rules of accounts. */
import { Schema } from "effect"

/** One account per email address, compared case-insensitively. */
export class EmailTaken extends Schema.TaggedError<EmailTaken>()("EmailTaken", {}) {}

export type AccountError = EmailTaken
