/**
 * Vitest global setup for the integration project: one embedded PostgreSQL for the whole
 * run, with a migrated and seeded template database. Each test file clones the template
 * into a fresh database of its own (see Harness.ts), so state never leaks between files.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { migrate, removeCluster, seed, startEmbeddedPostgres, withClient, withDatabase } from "@burnbox/store"
import { Effect, Exit, Redacted, Scope } from "effect"
import type { TestProject } from "vitest/node"

export const TemplateDatabase = "burnbox_template"

declare module "vitest" {
  export interface ProvidedContext {
    clusterUrl: string
  }
}

export default async function setup(project: TestProject) {
  const dir = mkdtempSync(join(tmpdir(), "burnbox-test-"))
  const scope = Scope.makeUnsafe()
  const cluster = await Effect.runPromise(Scope.provide(scope)(startEmbeddedPostgres(dir, {
    // Test data is disposable: trade durability for speed.
    tuning: ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
  })))
  await Effect.runPromise(withClient(cluster.url, (client) => client.query(`CREATE DATABASE ${TemplateDatabase}`)))
  const template = withDatabase(cluster.url, TemplateDatabase)
  await Effect.runPromise(migrate(template))
  await Effect.runPromise(seed(template, [{ name: "burnbox.test", tier: "public" }, { name: "vip.test", tier: "premium_only" }]))
  project.provide("clusterUrl", Redacted.value(cluster.url))
  return async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    removeCluster(dir)
    rmSync(dir, { recursive: true, force: true })
  }
}
