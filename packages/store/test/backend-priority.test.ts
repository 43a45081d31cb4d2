/**
 * A pool with `backendNice` (`burnbox start`'s ingest and worker, #36 item 3) lowers its
 * PostgreSQL backends' priority: their nice value, and, where the kernel schedules by autogroup,
 * their session's group (each backend is a session of its own, so its nice alone ranked it only
 * against itself).
 */
import { existsSync, readFileSync } from "node:fs"
import { getPriority } from "node:os"
import { assert, describe, it } from "@effect/vitest"
import { BurnboxConfig, DatabaseUrl, MigratedDatabase, SqlLive } from "@burnbox/store"
import { freshDatabase, TestSecret } from "@burnbox/testkit"
import { Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"

const autogroupNice = (pid: number): number | undefined => {
  const file = `/proc/${pid}/autogroup`
  if (!existsSync(file)) return undefined
  return Number(readFileSync(file, "utf8").trim().split(/\s+/).pop())
}

describe("SqlLive backendNice", () => {
  it.live.skipIf(process.platform !== "linux")("lowers its backends' nice value and their autogroup's", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const pool = SqlLive({ maxConnections: 2, backendNice: 7 }).pipe(
        Layer.provide(Layer.succeed(DatabaseUrl, url)),
        Layer.provide(Layer.succeed(MigratedDatabase, { applied: [] })),
        // the embedded cluster of this machine: no DATABASE_URL of its own
        Layer.provide(Layer.succeed(BurnboxConfig, BurnboxConfig.make({ secret: Redacted.make(TestSecret), databaseUrl: Option.none() })))
      )
      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const [own] = yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`
        const pid = own!.pid
        // The pool looks for its backends every second: wait (ten seconds at most) for its first pass.
        for (let tries = 0; tries < 200 && getPriority(pid) !== 7; tries++) yield* Effect.sleep("50 millis")
        assert.strictEqual(getPriority(pid), 7)
        const group = autogroupNice(pid)
        if (group !== undefined) assert.strictEqual(group, 7)
      }).pipe(Effect.provide(pool))
    }))
})
