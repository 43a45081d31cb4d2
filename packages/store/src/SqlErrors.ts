import { SqlError } from "effect/sql"

/** A unique constraint refused the write: the caller maps it to its own conflict. */
export const isUniqueViolation = (error: unknown): boolean =>
  SqlError.isSqlError(error) && error.reason._tag === "UniqueViolation"
