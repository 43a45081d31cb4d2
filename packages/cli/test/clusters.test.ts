/**
 * `burnbox admin clusters`: of root's clusters (here a folder laid out as /var/lib/burnbox/clusters
 * is), those whose data dir is gone or names another cluster now are listed with their size and
 * removed on request; a cluster whose data dir still names it, or whose PostgreSQL runs, is kept.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { orphanClusters } from "@burnbox/cli/Detach"
import { afterAll, describe, expect, it } from "vitest"

const root = mkdtempSync(join(tmpdir(), "burnbox-clusters-"))
const dir = join(root, "clusters")
afterAll(() => rmSync(root, { recursive: true, force: true }))

/** A cluster folder with `bytes` of data, recorded as belonging to `dataDir`. */
const cluster = (id: string, dataDir: string | null, bytes: number, files: Record<string, string> = {}) => {
  mkdirSync(join(dir, id), { recursive: true })
  writeFileSync(join(dir, id, "PG_VERSION"), "x".repeat(bytes))
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, id, name), text)
  if (dataDir !== null) writeFileSync(join(dir, `${id}.datadir`), `${dataDir}\n`)
}
const dataDir = (name: string, id: string) => {
  const path = join(root, name)
  mkdirSync(path)
  writeFileSync(join(path, "cluster-id"), `${id}\n`)
  return path
}

describe("admin clusters", () => {
  it("lists the clusters whose data dir is gone or names another, and removes only those on request", () => {
    cluster("aaaaaaaaaaaaaaaa", dataDir("kept", "aaaaaaaaaaaaaaaa"), 10)
    cluster("bbbbbbbbbbbbbbbb", join(root, "deleted"), 100)
    cluster("cccccccccccccccc", dataDir("renamed", "dddddddddddddddd"), 1000)
    cluster("eeeeeeeeeeeeeeee", null, 5)
    cluster("ffffffffffffffff", join(root, "deleted-but-running"), 7, { "postmaster.pid": `${process.pid}\n` })
    mkdirSync(join(dir, "postgres-18.4.0"))

    const listed = orphanClusters({ dir, remove: false })
    expect(listed.clusters.map((c) => [c.id, c.dataDir, c.removed])).toEqual([
      ["bbbbbbbbbbbbbbbb", join(root, "deleted"), false],
      ["cccccccccccccccc", join(root, "renamed"), false],
      ["eeeeeeeeeeeeeeee", null, false]
    ])
    // Each holds its PG_VERSION's bytes and a folder's own.
    expect(listed.clusters.map((c) => c.bytes)).toEqual([expect.any(Number), expect.any(Number), expect.any(Number)])
    expect(listed.clusters[1]!.bytes - listed.clusters[0]!.bytes).toBe(900)
    expect(listed.bytes).toBe(listed.clusters.reduce((sum, c) => sum + c.bytes, 0))
    expect(readdirSync(dir)).toHaveLength(10)

    const removed = orphanClusters({ dir, remove: true })
    expect(removed.clusters.map((c) => [c.id, c.removed])).toEqual([
      ["bbbbbbbbbbbbbbbb", true],
      ["cccccccccccccccc", true],
      ["eeeeeeeeeeeeeeee", true]
    ])
    expect(readdirSync(dir).sort()).toEqual(["aaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaa.datadir", "ffffffffffffffff", "ffffffffffffffff.datadir", "postgres-18.4.0"])
    expect(orphanClusters({ dir, remove: false }).clusters).toEqual([])
  })

  it("answers an empty list where there is no clusters folder", () => {
    expect(orphanClusters({ dir: join(root, "none"), remove: true })).toEqual({ clusters: [], bytes: 0 })
  })
})
