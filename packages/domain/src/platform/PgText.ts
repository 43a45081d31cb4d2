/**
 * A string as PostgreSQL can store it in a text column: without NUL characters (text cannot
 * hold them) and with each lone surrogate replaced by U+FFFD (JSON carries one as an escape
 * that PostgreSQL refuses, where the driver's UTF-8 encoding would have replaced it).
 */
export const pgText = (value: string): string => value.replace(/\u0000/g, "").toWellFormed()

/**
 * A value as the text of a `json`/`jsonb` parameter (every one the store sends goes through
 * this), its strings read as a text parameter's
 * would be: each lone surrogate becomes U+FFFD, as the driver's UTF-8 encoding makes it of a
 * text parameter, instead of the `\ud800` escape `JSON.stringify` writes and PostgreSQL refuses
 * as invalid JSON. A NUL is kept: PostgreSQL refuses it in JSON as in text, and the request that
 * carried it is answered 422 (`isRefusedText`).
 */
export const pgJson = (value: unknown): string =>
  JSON.stringify(value, (_key, item: unknown) => (typeof item === "string" ? item.toWellFormed() : item))
