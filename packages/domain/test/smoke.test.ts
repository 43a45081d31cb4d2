import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"

describe("toolchain", () => {
  it("runs on Node 24 with effect 4", () => {
    expect(Number(process.versions.node.split(".")[0])).toBeGreaterThanOrEqual(24)
    expect(Schema.decodeUnknownSync(Schema.Int)(3)).toBe(3)
  })
})
