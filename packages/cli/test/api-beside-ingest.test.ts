/**
 * `burnbox start` keeps the API fast while mail pours in (#36 item 3): the SMTP ingest and the
 * worker run on a thread of their own, at a lower OS priority, with their own connection pool
 * (IngestWorker.ts), so a read neither waits behind their callbacks in one event loop nor for a
 * connection their writes hold.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { PgClient } from "@effect/sql-pg"
import { removeCluster } from "@burnbox/store"
import { ServiceProcess, SmtpClient } from "@burnbox/testkit"
import { Deferred, Effect, Fiber, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let dataDir: string
let service: ServiceProcess
let token: string
let alias: { readonly id: number; readonly address: string }

const api = (path: string, init: RequestInit = {}) =>
  fetch(`${service.baseUrl}/api/v1${path}`, {
    ...init,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    signal: AbortSignal.timeout(10_000)
  })

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "burnbox-api-beside-ingest-"))
  service = await ServiceProcess.create({ dataDir })
  await service.start("start")
  const email = "reader@example.com"
  expect((await service.cli(["admin", "account", "create", "--email", email, "--password", "correct horse battery", "--plan", "pro"])).code).toBe(0)
  const issued = await service.cli(["admin", "token", "create", "--email", email, "--scopes", "read,manage-aliases"])
  token = (JSON.parse(issued.stdout) as { secret: string }).secret
  const reservation = await (await api("/aliases/candidates", { method: "POST", body: JSON.stringify({ domainId: 1, style: "numeric" }) })).json() as {
    reservationToken: string
    candidates: Array<{ id: number }>
  }
  const claimed = await api("/aliases", { method: "POST", body: JSON.stringify({ aliasId: reservation.candidates[0]!.id, reservationToken: reservation.reservationToken }) })
  expect(claimed.status).toBe(201)
  alias = await claimed.json() as { id: number; address: string }
}, 180_000)

afterAll(async () => {
  await service?.stop()
  removeCluster(dataDir)
  rmSync(dataDir, { recursive: true, force: true })
}, 60_000)

/** The service's threads: kernel name and nice value (Linux /proc). */
const threads = (pid: number) =>
  readdirSync(`/proc/${pid}/task`).map((tid) => {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return { tid: Number(tid), name: readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim(), nice: Number(fields[16]) }
  })

/** A process's nice value (Linux /proc). */
const niceOf = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16])
}

/** A small pool of the test's own on the service's embedded database. */
const databaseLayer = () => {
  const database = service.embeddedDatabase()
  return PgClient.layer({
    host: database.host, port: database.port, database: database.database, username: database.user, password: Redacted.make(database.password), maxConnections: 2
  }).pipe(Layer.orDie)
}

const message = (subject: string) =>
  new TextEncoder().encode(`From: shop@example.com\r\nTo: ${alias.address}\r\nSubject: ${subject}\r\n\r\nYour code is 123456\r\n`)

describe.runIf(process.platform === "linux")("burnbox start: the API beside the ingest and the worker", () => {
  it("the ingest and the worker run on a thread of their own at nice 10, their mail threads too; the API's main thread keeps nice 0", async () => {
    // One message worked, so the mail threads exist.
    const reply = await SmtpClient.sendOne(service.smtpPort, alias.address, message("first"))
    expect(reply.code).toBe(250)
    const all = threads(service.pid!)
    expect(all.find((t) => t.tid === service.pid)?.nice).toBe(0)
    // The kernel keeps 15 characters of a thread's name.
    const ingest = all.filter((t) => t.name === "burnbox-ingest-")
    expect(ingest.map((t) => t.nice)).toEqual([10])
    const mail = all.filter((t) => t.name === "burnbox-mail")
    expect(mail.length).toBeGreaterThan(0)
    expect(mail.every((t) => t.nice === 10), JSON.stringify(mail)).toBe(true)
  }, 60_000)

  it("the PostgreSQL backends of the ingest and worker's pool run at nice 10, the API's pool's at nice 0", async () => {
    // The API's pool has a connection once it has answered a read that queries.
    expect((await api("/messages?limit=1")).status).toBe(200)
    const pools = await Effect.runPromise(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // New backends are lowered within a second.
      yield* Effect.sleep("1500 millis")
      return yield* sql<{ name: string; pid: number }>`
        SELECT application_name AS name, pid FROM pg_stat_activity WHERE application_name LIKE 'burnbox/%'`
    }).pipe(Effect.provide(databaseLayer()), Effect.scoped))
    const byPool = new Map<string, Array<number>>()
    for (const row of pools) byPool.set(row.name, [...(byPool.get(row.name) ?? []), niceOf(row.pid)])
    const nices = [...byPool.values()].map((values) => [...new Set(values)]).sort((a, b) => a[0]! - b[0]!)
    expect(nices).toEqual([[0], [10]])
  }, 60_000)

  it("reads answer while the writers wait: with messages locked against writes, a sent message waits for its 250 while GET /messages and GET /me answer", async () => {
    const locked = Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const held = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      // EXCLUSIVE: plain reads go on, every insert and update of messages waits (the accept, the claims, the store).
      const lock = yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`LOCK TABLE messages IN EXCLUSIVE MODE`
        yield* Deferred.succeed(held, undefined)
        yield* Deferred.await(release)
      })).pipe(Effect.forkChild)
      yield* Deferred.await(held)
      const sending = yield* Effect.promise(async () => {
        const client = await SmtpClient.connect(service.smtpPort)
        return { client, reply: client.transaction("shop@example.com", alias.address, message("held")) }
      })
      // The accept's statement is waiting for the lock.
      for (let i = 0; ; i++) {
        const waiting = yield* sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name LIKE 'burnbox/%'`
        if (waiting[0]!.n > 0) break
        if (i === 100) return yield* Effect.die(new Error("no statement of the service waited for the lock"))
        yield* Effect.sleep("100 millis")
      }
      const reads = yield* Effect.promise(async () => {
        const started = performance.now()
        const [list, me] = await Promise.all([api("/messages?limit=50"), api("/me")])
        return { list: list.status, me: me.status, listed: (await list.json() as { items: Array<unknown> }).items.length, ms: performance.now() - started }
      })
      const pending = yield* Effect.promise(() => Promise.race([sending.reply.then(() => "answered"), new Promise((resolve) => setTimeout(() => resolve("waiting"), 200))]))
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(lock)
      const after = yield* Effect.promise(() => sending.reply)
      yield* Effect.promise(() => sending.client.quit())
      return { reads, pending, after }
    }).pipe(
      Effect.provide(databaseLayer()),
      Effect.orDie
    )
    const { reads, pending, after } = await Effect.runPromise(Effect.scoped(locked))
    expect(reads.list).toBe(200)
    expect(reads.me).toBe(200)
    // the first message; the held one is not stored yet
    expect(reads.listed).toBe(1)
    expect(reads.ms).toBeLessThan(5_000)
    // The write was held all along, and goes through once the lock is gone.
    expect(pending).toBe("waiting")
    expect(after.reply?.code).toBe(250)
  }, 120_000)
})
