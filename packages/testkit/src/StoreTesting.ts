/**
 * Store tests: a repository against its own fresh database (cloned from the migrated template
 * of the run's embedded PostgreSQL), without the HTTP server around it.
 */
import { randomBytes } from "node:crypto"
import { PgClient } from "@effect/sql-pg"
import { BurnboxConfig, DatabaseUrl, processApplicationName, withClient, withDatabase } from "@burnbox/store"
import { Effect, Layer, Option, Redacted } from "effect"
import { TestClock } from "effect/testing"
import { clusterUrl, TestSecret } from "./Harness.ts"

/** A new database from the template, for one test file. */
export const freshDatabase = Effect.gen(function*() {
  const cluster = Redacted.make(clusterUrl())
  const name = `t_${randomBytes(6).toString("hex")}`
  yield* withClient(cluster, (client) => client.query(`CREATE DATABASE ${name} TEMPLATE burnbox_template`))
  return withDatabase(cluster, name)
})

/**
 * The SQL client of one process (its own pool and connection name) on `url`, with the config and
 * database URL services the repositories read. Several of these on one URL are several processes.
 */
export const processOn = (url: Redacted.Redacted<string>) =>
  PgClient.layer({ url, maxConnections: 4, applicationName: processApplicationName() }).pipe(
    Layer.provideMerge(Layer.succeed(DatabaseUrl, url)),
    Layer.provideMerge(Layer.succeed(BurnboxConfig, BurnboxConfig.make({ secret: Redacted.make(TestSecret), databaseUrl: Option.some(url) })))
  )

/** A fresh database and one process on it. */
export const TestDatabase = Layer.unwrap(Effect.map(freshDatabase, processOn))

/** An account with one active alias on burnbox.test (the store's fixture, written straight into the tables). */
export { seedAlias, seedShare } from "@burnbox/store/testing/Fixtures"

/**
 * Runs `check` until `done` holds of its answer: for what arrives from another connection
 * (a notification) when it arrives. `check` runs on the test's clock, which stays where it is;
 * only the short waits between tries are real time, ten seconds of them at most.
 */
export const eventually = <A, E, R>(check: Effect.Effect<A, E, R>, done: (answer: A) => boolean) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 10_000
    while (true) {
      const answer = yield* check
      if (done(answer)) return answer
      if (Date.now() > deadline) return yield* Effect.die(new Error("eventually: still not done after ten seconds"))
      yield* TestClock.withLive(Effect.sleep("2 millis"))
    }
  })
