import { SqlError } from "effect/sql"

/** A unique constraint refused the write: the caller maps it to its own conflict. */
export const isUniqueViolation = (error: unknown): boolean =>
  SqlError.isSqlError(error) && error.reason._tag === "UniqueViolation"

/**
 * PostgreSQL refused text a statement carried: a NUL (U+0000), which no text or jsonb value can
 * hold (SQLSTATE 22021 character_not_in_repertoire, 22P05 untranslatable_character). The text
 * came from the request, so the request is what is wrong.
 */
export const isRefusedText = (error: unknown): boolean => {
  if (!SqlError.isSqlError(error)) return false
  const code = (error.reason as { readonly cause?: { readonly code?: unknown } }).cause?.code
  return code === "22021" || code === "22P05"
}
