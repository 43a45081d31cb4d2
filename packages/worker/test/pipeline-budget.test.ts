/** The pipeline's work budget: how many permits a message takes from it. */
import { WorkBudgetKiB, workPermits } from "@burnbox/worker"
import { describe, expect, it } from "vitest"

describe("workPermits", () => {
  it("takes a permit per started KiB of the raw message", () => {
    expect(workPermits(5_150)).toBe(6)
    expect(workPermits(1_024)).toBe(1)
    expect(workPermits(1_025)).toBe(2)
  })

  it("takes at least one, so even an empty message is counted", () => {
    expect(workPermits(0)).toBe(1)
  })

  it("lets four 15 MB messages be worked on at once, not five", () => {
    const big = workPermits(15_728_000)
    expect(4 * big).toBeLessThanOrEqual(WorkBudgetKiB)
    expect(5 * big).toBeGreaterThan(WorkBudgetKiB)
  })

  it("takes the whole budget, never more, for a message larger than it", () => {
    expect(workPermits(64 * 1024 * 1024, 16 * 1024)).toBe(16 * 1024)
    expect(workPermits(16 * 1024 * 1024, 16 * 1024)).toBe(16 * 1024)
  })
})
