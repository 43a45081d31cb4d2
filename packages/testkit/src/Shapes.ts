import { Schema } from "effect"
import { expect } from "vitest"

/**
 * Decodes an answer body against a contract schema, refusing any property the schema does
 * not name: "no extra properties" is checked, not assumed.
 */
export const expectShape = <S extends Schema.Top>(schema: S, body: unknown): S["Type"] => {
  const result = Schema.decodeUnknownExit(schema as any, { onExcessProperty: "error", errors: "all" })(body)
  if (result._tag === "Failure") {
    expect.fail(`body does not match ${String((schema.ast.annotations as any)?.identifier ?? "schema")}: ${String(result.cause)}\n${JSON.stringify(body)}`)
  }
  return (result as any).value
}

/** The Problem shape of spec 7, with the expected code. */
export const expectProblem = (answer: { status: number; body: any }, status: number, code: string) => {
  expect(answer.status, JSON.stringify(answer.body)).toBe(status)
  expect(answer.body?.error?.code, JSON.stringify(answer.body)).toBe(code)
  expect(typeof answer.body.error.message).toBe("string")
  const keys = Object.keys(answer.body.error)
  expect(keys.every((k) => ["code", "message", "fields"].includes(k))).toBe(true)
  expect(Object.keys(answer.body)).toEqual(["error"])
}
