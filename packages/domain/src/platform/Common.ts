import { Schema, SchemaTransformation } from "effect"
import { isCalendarDate } from "../search/query.ts"

/** An identifier exposed by the interface: an integer >= 1. */
export const Id = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))

/** A count or a size: an integer >= 0. */
export const NonNegativeInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

/** An RFC 3339 timestamp as it appears on the wire (always UTC, with milliseconds). */
export const DateTimeString = Schema.String.annotate({ format: "date-time" })

const rfc3339 = /^(\d{4}-\d{2}-\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:Z|([+-])(\d{2}):(\d{2}))$/

/** The parts of an RFC 3339 date-time with a zone, as written; undefined for any other text. */
export const dateTimeParts = (text: string) => {
  const parts = rfc3339.exec(text)
  if (parts === null) return undefined
  const [, date = "", hour, minute, second, fraction = "", sign = "+", zoneHours = "00", zoneMinutes = "00"] = parts
  return {
    date,
    hour: Number(hour),
    minute: Number(minute),
    second: Number(second),
    /** The digits after the seconds' point, as written ("" for none). */
    fraction,
    zoneHours: Number(zoneHours),
    zoneMinutes: Number(zoneMinutes),
    /** The zone's offset from UTC, signed. */
    offsetMinutes: (sign === "-" ? -1 : 1) * (Number(zoneHours) * 60 + Number(zoneMinutes))
  }
}

/** Whether `text` is an RFC 3339 date-time with a zone that names a real instant (no 2026-02-30, no 24:00, no leap second). */
export const isDateTime = (text: string): boolean => {
  const parts = dateTimeParts(text)
  return parts !== undefined && isCalendarDate(parts.date) && parts.hour <= 23 && parts.minute <= 59 && parts.second <= 59 &&
    parts.zoneHours <= 23 && parts.zoneMinutes <= 59
}

/** A date-time on input: RFC 3339 with a zone, a real instant, at most nine digits of fraction. */
export const DateTimeInput = Schema.String.check(Schema.makeFilter(isDateTime, { message: "invalid_date_time" }))

/**
 * A whole number as a path or query parameter writes it, decoded to `to` (an integer with its
 * range): decimal digits, perhaps after a minus (so that -1 is out of range rather than not a
 * number). `1e3`, `1.0`, `+1`, ` 1` and `0x10` are not numbers here, though JavaScript reads them.
 * `description` is what the OpenAPI document says of the parameter (it documents the string).
 */
export const intFromDigits = <To extends Schema.Codec<number, number>>(to: To, description?: string) =>
  Schema.String.check(Schema.isPattern(/^-?\d+$/u, { message: "invalid_type" })).annotate(description === undefined ? {} : { description })
    .pipe(Schema.decodeTo(to, SchemaTransformation.numberFromString))

/** A page size as a query parameter writes it: 1 to 100, 50 when absent (spec 4.5, 4.9). */
export const PageLimit = intFromDigits(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 })), "Page size: a whole number from 1 to 100 (default 50).")

/** A path parameter `{id}`: digits only, decoded to an integer >= 1. */
export const IdFromPath = intFromDigits(Id)

/** An email address as the interface accepts it: one @, no spaces, at most 254 characters. */
export const Email = Schema.String.check(
  Schema.isMaxLength(254),
  Schema.isPattern(/^[^\s@]+@[^\s@]+\.[^\s@]+$/u, { message: "invalid_email" })
).annotate({ format: "email" })

/** Formats a database timestamp for the wire. */
export const toIso = (date: Date): string => date.toISOString()
export const toIsoOrNull = (date: Date | null): string | null => (date === null ? null : date.toISOString())
