/**
 * A string as PostgreSQL can store it in a text column: without NUL characters (text cannot
 * hold them) and with each lone surrogate replaced by U+FFFD (JSON carries one as an escape
 * that PostgreSQL refuses, where the driver's UTF-8 encoding would have replaced it).
 */
export const pgText = (value: string): string => value.replace(/\u0000/g, "").toWellFormed()
