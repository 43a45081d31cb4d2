import { type FieldReasons, ValidationErrors, ValidationFailed } from "@burnbox/domain"
import { Effect, type SchemaIssue } from "effect"
import { HttpApiMiddleware } from "effect/http-api"

/** Reason codes for failed checks, by the check's representation id. */
const checkReasons: Readonly<Record<string, string>> = {
  "effect/schema/isMaxLength": "too_long",
  "effect/schema/isMinLength": "too_short",
  "effect/schema/isPattern": "invalid_format",
  "effect/schema/isGreaterThanOrEqualTo": "too_small",
  "effect/schema/isGreaterThan": "too_small",
  "effect/schema/isLessThanOrEqualTo": "too_large",
  "effect/schema/isLessThan": "too_large",
  "effect/schema/isBetween": "out_of_range",
  "effect/schema/isUnique": "not_unique",
  "effect/schema/isInt": "invalid_type"
}

const leafReason = (issue: SchemaIssue.Leaf): string => {
  switch (issue._tag) {
    case "MissingKey":
      return "required"
    case "UnexpectedKey":
      return "unknown_field"
    case "InvalidType":
      return "invalid_type"
    case "Forbidden":
      return "forbidden"
    case "OneOf":
      return "ambiguous"
    case "InvalidValue": {
      const message = issue.annotations?.message
      if (typeof message === "string" && /^[a-z_]+$/.test(message)) return message
      if (typeof message === "string" && message.includes("JSON")) return "invalid_json"
      return "invalid_value"
    }
  }
}

const filterReason = (issue: SchemaIssue.Filter): string => {
  const annotations = issue.filter.annotations as { message?: unknown; representation?: { id?: string } } | undefined
  if (typeof annotations?.message === "string" && /^[a-z_]+$/.test(annotations.message)) return annotations.message
  return checkReasons[annotations?.representation?.id ?? ""] ?? "invalid_value"
}

/**
 * Walks a decoding issue and names each bad field with one reason code. Nested fields are
 * dotted (`attachments.0.filename`); an issue about the whole input is named by `root`.
 */
export const fieldReasons = (issue: SchemaIssue.Issue, root: string): FieldReasons => {
  const fields: Record<string, string> = {}
  const walk = (node: SchemaIssue.Issue, path: ReadonlyArray<PropertyKey>): void => {
    const name = () => (path.length === 0 ? root : path.map(String).join("."))
    switch (node._tag) {
      case "Pointer":
        return walk(node.issue, [...path, ...node.path])
      case "Composite":
      case "AnyOf": {
        if (node.issues.length === 0) fields[name()] ??= "invalid_value"
        // A union reports every member's failure; the first names the field well enough.
        const issues = node._tag === "AnyOf" ? node.issues.slice(0, 1) : node.issues
        for (const inner of issues) walk(inner, path)
        return
      }
      case "Encoding":
        // The input failed before its transformation (a check of the encoded side, such as
        // the digits of a numeric parameter): the inner issue names it.
        return walk(node.issue, path)
      case "Filter":
        fields[name()] ??= filterReason(node)
        return
      default:
        fields[name()] ??= leafReason(node)
    }
  }
  walk(issue, [])
  if (Object.keys(fields).length === 0) fields[root] = "invalid_value"
  return fields
}

const rootName = { Params: "path", Headers: "headers", Query: "query", Payload: "body", Body: "body", ResponseHeaders: "headers" } as const

/** Every request-decoding failure of every endpoint answers 422 validation_failed with fields. */
export const ValidationErrorsLive = HttpApiMiddleware.layerSchemaErrorTransform(ValidationErrors, (error) => {
  if (error.kind === "Body" || error.kind === "ResponseHeaders") return Effect.die(error)
  return Effect.fail(ValidationFailed.withFields(fieldReasons(error.cause.issue, rootName[error.kind])))
})
