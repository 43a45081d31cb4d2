/** The worker role on real pg-boss: it catches up on overdue timers as soon as it starts. */
import { PgClient } from "@effect/sql-pg"
import { seededRandom } from "@burnbox/domain/aliases/index"
import { BurnboxConfig, CandidateRandom, DatabaseUrl, storeLayer } from "@burnbox/store"
import { type Harness, startHarness, TestSecret } from "@burnbox/testkit"
import { WorkerLive } from "@burnbox/worker"
import { Effect, Exit, Layer, Option, Redacted, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
beforeAll(async () => {
  h = await startHarness({ webhookAllowPrivate: true })
})
afterAll(() => h.close())

const startWorker = async () => {
  const url = Redacted.make(h.databaseUrl)
  const layer = WorkerLive.pipe(
    Layer.provide(storeLayer({ random: Layer.succeed(CandidateRandom, seededRandom(1)) })),
    Layer.provide(PgClient.layer({ url, maxConnections: 7 })),  // three are held by LISTEN (account snapshots, pipeline, delivery)
    Layer.provide(Layer.succeed(DatabaseUrl, url)),
    Layer.provide(Layer.succeed(BurnboxConfig, BurnboxConfig.make({ secret: Redacted.make(TestSecret), databaseUrl: Option.some(url) })))
  )
  const scope = Scope.makeUnsafe()
  await Effect.runPromise(Layer.buildWithScope(layer, scope))
  return () => Effect.runPromise(Scope.close(scope, Exit.void))
}

const waitFor = async <A>(probe: () => Promise<A | undefined>, ms = 20_000): Promise<A> => {
  const until = Date.now() + ms
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > until) throw new Error("timed out waiting for the worker")
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

describe("burnbox worker", () => {
  it("burns an alias whose deadline passed while no worker ran, right after it starts, with one alias.burned event", async () => {
    const session = await h.signup({ plan: "pro" })
    const token = await h.createToken(session, ["manage-aliases", "read"])
    const reservation = await h.request("/aliases/candidates", { method: "POST", token, body: { domainId: 1, style: "numeric" } })
    const candidate = reservation.body.candidates[0]
    const claimed = await h.request("/aliases", { method: "POST", token, body: { aliasId: candidate.id, reservationToken: reservation.body.reservationToken } })
    expect(claimed.status).toBe(201)
    // An endpoint for the account's events: dispatch deletes an event no endpoint receives, and
    // keeps these (their deliveries to a closed port fail, which is not what this test is about).
    const endpoint = await h.request("/webhooks", { method: "POST", session, body: { name: "events", url: "https://127.0.0.1:9/hook", subscription: { mode: "all" } } })
    expect(endpoint.status, endpoint.text).toBe(201)
    // The deadline passed an hour ago (real time: the worker reads the real clock).
    await h.query("UPDATE aliases SET self_destruct_at = now() - interval '1 hour' WHERE id = $1", [candidate.id])
    const stop = await startWorker()
    try {
      const burned = await waitFor(async () => {
        const [row] = await h.query("SELECT status, burned_at FROM aliases WHERE id = $1", [candidate.id])
        return row.status === "burned" ? row : undefined
      })
      expect(burned.burned_at).not.toBeNull()
      const events = await h.query("SELECT type FROM events WHERE alias_id = $1 ORDER BY time", [candidate.id])
      expect(events.map((e) => e.type)).toEqual(["alias.claimed", "alias.burned"])
    } finally {
      await stop()
    }
  })
})
