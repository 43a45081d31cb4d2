/**
 * The run's summary line counts what CI reads: tests under a failed hook are failed, not skipped
 * (vitest reports them as skipped), and a failed module never counts as nothing.
 */
import { describe, expect, it } from "vitest"
import { type SummarizedModule, summarize } from "../src/SummaryReporter.ts"

/** A module of tests in these states, failed as vitest says, with these hook errors (module, then its suites). */
const moduleOf = (states: ReadonlyArray<string>, options: { state?: string; moduleErrors?: number; suiteErrors?: ReadonlyArray<number> } = {}): SummarizedModule => ({
  state: () => options.state ?? (states.includes("failed") || (options.moduleErrors ?? 0) > 0 || (options.suiteErrors ?? []).some((n) => n > 0) ? "failed" : "passed"),
  errors: () => Array.from({ length: options.moduleErrors ?? 0 }, () => new Error("hook")),
  children: {
    allTests: () => states.map((state) => ({ result: () => ({ state }) })),
    allSuites: () => (options.suiteErrors ?? [0]).map((n) => ({ errors: () => Array.from({ length: n }, () => new Error("hook")) }))
  }
})

describe("summarize", () => {
  it("counts passed, failed and skipped tests of healthy modules as they are", () => {
    expect(summarize([moduleOf(["passed", "passed", "skipped"]), moduleOf(["failed", "passed"])])).toEqual({ passed: 3, failed: 1, skipped: 1 })
  })

  it("counts the tests under a suite's failed beforeAll as failed, not skipped", () => {
    expect(summarize([moduleOf(["skipped", "skipped", "passed"], { suiteErrors: [1, 0] })])).toEqual({ passed: 1, failed: 2, skipped: 0 })
  })

  it("counts the tests of a module whose own beforeAll failed as failed", () => {
    expect(summarize([moduleOf(["skipped", "skipped"], { moduleErrors: 1, suiteErrors: [] })])).toEqual({ passed: 0, failed: 2, skipped: 0 })
  })

  it("counts a module whose only failure is an afterAll, or that collected no tests, as one failed", () => {
    expect(summarize([moduleOf(["passed"], { suiteErrors: [1] })])).toEqual({ passed: 1, failed: 1, skipped: 0 })
    expect(summarize([moduleOf([], { state: "failed", suiteErrors: [] })])).toEqual({ passed: 0, failed: 1, skipped: 0 })
  })
})
