import { Schema } from "effect"

/** An identifier exposed by the interface: an integer >= 1. */
export const Id = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))

/** A count or a size: an integer >= 0. */
export const NonNegativeInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

/** An RFC 3339 timestamp as it appears on the wire (always UTC, with milliseconds). */
export const DateTimeString = Schema.String.annotate({ format: "date-time" })

/** A path parameter `{id}`: digits only, decoded to an integer >= 1. */
export const IdFromPath = Schema.NumberFromString.pipe(Schema.decodeTo(Id))

/** An email address as the interface accepts it: one @, no spaces, at most 254 characters. */
export const Email = Schema.String.check(
  Schema.isMaxLength(254),
  Schema.isPattern(/^[^\s@]+@[^\s@]+\.[^\s@]+$/, { message: "invalid_email" })
).annotate({ format: "email" })

/** Formats a database timestamp for the wire. */
export const toIso = (date: Date): string => date.toISOString()
export const toIsoOrNull = (date: Date | null): string | null => (date === null ? null : date.toISOString())
