import type { Reporter, TestModule } from "vitest/node"

/** What the summary reads of a test module (vitest's `TestModule` is one). */
export interface SummarizedModule {
  readonly state: () => string
  /** Errors outside any test: a failed hook of the module, or its collection failing. */
  readonly errors: () => ReadonlyArray<unknown>
  readonly children: {
    readonly allTests: () => Iterable<{ readonly result: () => { readonly state: string } }>
    /** Each suite's errors are its failed hooks (beforeAll, afterAll). */
    readonly allSuites: () => Iterable<{ readonly errors: () => ReadonlyArray<unknown> }>
  }
}

export interface Summary {
  readonly passed: number
  readonly failed: number
  readonly skipped: number
}

/**
 * Counts the tests of a run. Vitest reports the tests under a failed `beforeAll` as skipped: in
 * a module whose hooks failed, every test that did not pass counts as failed, and a failed
 * module with no failed test (no tests collected, or only an `afterAll` failed) counts as one.
 */
export const summarize = (modules: Iterable<SummarizedModule>): Summary => {
  let passed = 0
  let failed = 0
  let skipped = 0
  for (const module of modules) {
    const hooksFailed = module.errors().length > 0 || [...module.children.allSuites()].some((suite) => suite.errors().length > 0)
    let failedHere = 0
    for (const test of module.children.allTests()) {
      const state = test.result().state
      if (state === "passed") passed++
      else if (state === "failed" || hooksFailed) failedHere++
      else skipped++
    }
    if (failedHere === 0 && (hooksFailed || module.state() === "failed")) failedHere = 1
    failed += failedHere
  }
  return { passed, failed, skipped }
}

/**
 * Ends a run with the plain line `N passed, N failed, N skipped`, which CI reads to tell a
 * run that tested something from one that tested nothing.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>) {
    const { passed, failed, skipped } = summarize(testModules)
    process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`)
  }
}
