/** The rules of test-mail injection (spec 2.19, 4.8). */
import { Schema } from "effect"
import { FieldReasons } from "../platform/Problem.ts"

/** The injected message breaks a rule of spec 2.19 the request schema cannot state; `fields` names each. */
export class InvalidTestMessage extends Schema.TaggedError<InvalidTestMessage>()("InvalidTestMessage", {
  fields: FieldReasons
}) {}

/** The plan's test messages of the day are used up; `retryAfter` seconds until one frees. */
export class TestMessagesPerDayReached extends Schema.TaggedError<TestMessagesPerDayReached>()("TestMessagesPerDayReached", {
  limit: Schema.Int,
  retryAfter: Schema.Int
}) {}

export type TestMailError = InvalidTestMessage | TestMessagesPerDayReached
