/**
 * Claims of the pipeline (architecture.md "The message pipeline": nothing accepted is lost): a
 * message claimed by a process that is gone (no connection to PostgreSQL left under its name) is
 * taken over within about a second and processed, with no clock moving; one claimed by a living
 * process is left to it until the claim timeout passes on the clock. "Within about a second" is
 * checked against a generous 10 s (the takeover runs every second; a test on a busy machine
 * cannot time it closer); "left alone" is shown by a witness, a claim of a gone process made
 * after it: once the witness is taken over, a takeover has passed the living claim by.
 */
import { ClaimTimeoutMs } from "@burnbox/worker"
import { claimAlias, type Harness, injectMail, processed, type Session, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let owner: Session
let aliasId: number
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 7701 })
  owner = await h.signup({ plan: "pro" })
  aliasId = (await claimAlias(h, { session: owner })).id
})
afterAll(() => h.close())

interface Claim {
  readonly processing_status: string
  readonly processing_attempts: number
}
const claimOf = async (id: number) => (await h.query<Claim>("SELECT processing_status, processing_attempts FROM messages WHERE id = $1", [id]))[0]!

/** A processed message put back as if `worker` had claimed it just now and not finished. */
const claimedBy = async (worker: string) => {
  const id = await injectMail(h, { session: owner }, aliasId, { text: `code ${1000 + Math.floor(Math.random() * 9000)}` })
  await processed(h, { session: owner }, id)
  await h.query(
    "UPDATE messages SET processing_status = 'processing', processing_started_at = $2, processing_worker = $3, processed_at = NULL WHERE id = $1",
    [id, h.clock.now(), worker]
  )
  return id
}

/** Real time, bounded: the takeover runs every second; the clock is not touched. */
const GenerousMs = 10_000
const within = async (ms: number, probe: () => Promise<boolean>) => {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (await probe()) return true
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return false
}

/** A takeover has run since the claim of `id` was made (it took over a witness claimed later by a gone process), and left `id` claimed. */
const expectPassedBy = async (id: number) => {
  const before = await claimOf(id)
  expect(before.processing_status).toBe("processing")
  const witness = await claimedBy("burnbox/999998/deadbeef")
  expect(await within(GenerousMs, async () => (await claimOf(witness)).processing_status === "processed")).toBe(true)
  // Neither taken over nor claimed again: the same claim, the same attempts.
  expect(await claimOf(id)).toEqual(before)
}

describe("pipeline claims", () => {
  it("names this process on every connection, and the pipeline records it with a claim", async () => {
    const names = await h.query<{ name: string }>(
      "SELECT DISTINCT application_name AS name FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'burnbox/%'"
    )
    expect(names).toHaveLength(1)
    const id = await injectMail(h, { session: owner }, aliasId)
    await processed(h, { session: owner }, id)
    const [row] = await h.query<{ worker: string }>("SELECT processing_worker AS worker FROM messages WHERE id = $1", [id])
    expect(row!.worker).toBe(names[0]!.name)
  })

  it("takes over a claim of a process that is gone within seconds, without waiting for the claim timeout", async () => {
    const at = h.clock.now().getTime()
    const id = await claimedBy("burnbox/999999/deadbeef")
    const before = await claimOf(id)
    expect(await within(GenerousMs, async () => (await claimOf(id)).processing_status === "processed")).toBe(true)
    expect(h.clock.now().getTime()).toBe(at)
    // The takeover counts as an attempt.
    expect((await claimOf(id)).processing_attempts).toBe(before.processing_attempts + 1)
  })

  it("leaves a living process's claim alone until the claim timeout passes", async () => {
    const [live] = await h.query<{ name: string }>(
      "SELECT application_name AS name FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'burnbox/%' LIMIT 1"
    )
    const id = await claimedBy(live!.name)
    await expectPassedBy(id)
    h.clock.advance(ClaimTimeoutMs + 1_000)
    // Woken by the pipeline's one-second poll.
    expect(await within(GenerousMs, async () => (await claimOf(id)).processing_status === "processed")).toBe(true)
  })

  it("leaves a claim without a process name to the timeout alone", async () => {
    const id = await claimedBy("burnbox/placeholder")
    await h.query("UPDATE messages SET processing_worker = NULL WHERE id = $1", [id])
    await expectPassedBy(id)
    h.clock.advance(ClaimTimeoutMs + 1_000)
    expect(await within(GenerousMs, async () => (await claimOf(id)).processing_status === "processed")).toBe(true)
  })
})
