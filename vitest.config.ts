import { defineConfig } from "vitest/config"

// Two projects: `unit` for the pure logic of packages/domain (no database), `integration` for
// everything that runs against the embedded PostgreSQL started once by the global setup.
export default defineConfig({
  test: {
    reporters: ["default", "./packages/testkit/src/SummaryReporter.ts"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    projects: [
      { test: { name: "unit", include: ["packages/domain/test/**/*.test.ts"] } },
      {
        test: {
          name: "integration",
          include: ["packages/{store,server,ingest,worker,testkit,cli,client,bench}/test/**/*.test.ts", "examples/*/**/*.test.ts"],
          globalSetup: ["packages/testkit/src/globalSetup.ts"],
          // Some tests run the real burnbox CLI as child processes; on a loaded 2-core machine
          // each takes seconds to start.
          testTimeout: 120_000,
          pool: "forks",
          maxWorkers: 2
        }
      },
      {
        // The web inbox in real Chromium against `burnbox start` (its own embedded PostgreSQL).
        test: {
          name: "browser",
          include: ["packages/web/test/**/*.test.ts"],
          expect: { poll: { timeout: 15_000, interval: 50 } },
          globalSetup: ["packages/web/test/setup.ts"],
          testTimeout: 60_000,
          hookTimeout: 180_000,
          pool: "forks",
          maxWorkers: 1
        }
      }
    ]
  }
})
