/**
 * Accounts and their in-memory snapshots against the embedded PostgreSQL, called directly:
 * what an account holds when created, how it is found, what its plan and overrides resolve to,
 * and when a process's snapshot of it gives way to the database.
 */
import { DefaultPlans } from "@burnbox/domain"
import { AccountChangesChannel, AccountSnapshots, Accounts, SnapshotMaxAgeMs, Entitlements } from "@burnbox/store"
import { eventually, TestDatabase } from "@burnbox/testkit"
import { assert, layer } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Clock, Effect, Layer, Queue } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"

const Store = AccountSnapshots.layer.pipe(Layer.provideMerge(Accounts.layer), Layer.provideMerge(Entitlements.layer), Layer.provideMerge(TestDatabase))

const Password = "correct horse battery"
let created = 0
const newAccount = (plan?: "free" | "premium" | "pro") =>
  Effect.gen(function*() {
    const accounts = yield* Accounts
    const email = `owner${++created}@example.com`
    return yield* accounts.create(plan === undefined ? { email, password: Password } : { email, password: Password, plan })
  }).pipe(Effect.orDie)

/** An alias of the account on the test domain, in `status`, written straight into the table. */
const aliasOf = (accountId: number, localPart: string, status: "active" | "paused" | "burned") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`
      INSERT INTO aliases (account_id, domain_id, local_part, local_key, style, status, claimed_at)
      SELECT ${accountId}, id, ${localPart}, ${localPart}, 'words', ${status}, now() FROM domains WHERE name = 'burnbox.test'`
  }).pipe(Effect.orDie)

layer(Store)("Accounts", (it) => {
  it.effect("a new account keeps its email as given (trimmed), starts empty, and is on the free plan unless told otherwise", () =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const account = yield* accounts.create({ email: "  Ada.Lovelace@Example.com ", password: Password })
      assert.deepStrictEqual(account, {
        id: account.id,
        email: "Ada.Lovelace@Example.com",
        plan: "free",
        isAdmin: false,
        handle: null,
        mailboxDensity: "default",
        pushEnabled: false,
        pushNudgeDismissed: false,
        storageUsedBytes: 0,
        aliasesLifetimeClaimed: 0,
        activeAliasCount: 0,
        entitlements: DefaultPlans.free,
        overrides: {}
      })
      const admin = yield* accounts.create({ email: "operator@example.com", password: Password, plan: "pro", isAdmin: true })
      assert.strictEqual(admin.plan, "pro")
      assert.isTrue(admin.isAdmin)
      assert.deepStrictEqual(admin.entitlements, DefaultPlans.pro)
    }))

  it.effect("an account is found by its email in any letter case and with spaces around it, and by its id", () =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const account = yield* accounts.create({ email: "Grace.Hopper@Example.com", password: Password, plan: "premium" })
      assert.deepStrictEqual(yield* accounts.findByEmail("grace.hopper@example.com"), account)
      assert.deepStrictEqual(yield* accounts.findByEmail(" GRACE.HOPPER@EXAMPLE.COM "), account)
      assert.deepStrictEqual(yield* accounts.get(account.id), account)
      assert.isUndefined(yield* accounts.findByEmail("nobody@example.com"))
      assert.isUndefined(yield* accounts.get(987_654))
    }))

  it.effect("authenticate answers the account for its password only, and nothing for an unknown email", () =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const account = yield* newAccount()
      assert.deepStrictEqual(yield* accounts.authenticate(account.email.toUpperCase(), Password), account)
      assert.isUndefined(yield* accounts.authenticate(account.email, "wrong horse battery"))
      assert.isUndefined(yield* accounts.authenticate("nobody@example.com", Password))
    }))

  it.effect("a plan change and overrides change the resolved entitlements; the plan row itself stays", () =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const account = yield* newAccount()
      const upgraded = yield* accounts.changePlan(account.id, "pro")
      assert.strictEqual(upgraded.plan, "pro")
      assert.deepStrictEqual(upgraded.entitlements, DefaultPlans.pro)
      const overridden = yield* accounts.changeOverrides(account.id, { activeAliasCap: 7, bulkExport: false, requestsPerMinute: 30 })
      assert.deepStrictEqual(overridden.overrides, { activeAliasCap: 7, bulkExport: false, requestsPerMinute: 30 })
      assert.deepStrictEqual(overridden.entitlements, { ...DefaultPlans.pro, activeAliasCap: 7, bulkExport: false, requestsPerMinute: 30 })
      assert.deepStrictEqual((yield* accounts.changeOverrides(account.id, {})).entitlements, DefaultPlans.pro)
    }))

  it.effect("stored overrides of an unknown key or of the wrong kind are ignored", () =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const sql = yield* SqlClient.SqlClient
      const account = yield* newAccount("premium")
      yield* sql`
        UPDATE accounts SET overrides = ${JSON.stringify({ maxPinned: "9", activeAliasCap: -1, claimsPerDay: 1.5, bulkExport: 1, noSuchKey: 4, retentionDays: 45 })}::jsonb
        WHERE id = ${account.id}`
      const read = yield* accounts.get(account.id)
      assert.deepStrictEqual(read!.entitlements, { ...DefaultPlans.premium, retentionDays: 45 })
    }))

  it.effect("the active alias count counts active aliases only; density is the reader's setting", () =>
    Effect.gen(function*() {
      const accounts = yield* Accounts
      const account = yield* newAccount("pro")
      yield* aliasOf(account.id, "counted.one", "active")
      yield* aliasOf(account.id, "counted.two", "active")
      yield* aliasOf(account.id, "not.counted.paused", "paused")
      yield* aliasOf(account.id, "not.counted.burned", "burned")
      yield* accounts.setDensity(account.id, "compact")
      const read = yield* accounts.get(account.id)
      assert.strictEqual(read!.activeAliasCount, 2)
      assert.strictEqual(read!.mailboxDensity, "compact")
    }))
})

/** The snapshot `peek` would serve now, on the test's clock. */
const peekNow = (id: number) =>
  Effect.gen(function*() {
    const snapshots = yield* AccountSnapshots
    return snapshots.peek(id, yield* Clock.currentTimeMillis)
  })

/** Reads the account through the snapshots until this process keeps it (it listens for changes first). */
const kept = (id: number) =>
  eventually(
    Effect.gen(function*() {
      const snapshots = yield* AccountSnapshots
      yield* snapshots.get(id)
      return yield* peekNow(id)
    }),
    (row) => row !== undefined
  ).pipe(Effect.map((row) => row!))

/** A write whose notification never comes (its session fires no triggers), as if it were lost. */
const writeUnannounced = (id: number, density: "comfortable" | "compact") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`SET LOCAL session_replication_role = replica`
      yield* sql`UPDATE accounts SET mailbox_density = ${density} WHERE id = ${id}`
    }))
  }).pipe(Effect.orDie)

layer(Store)("AccountSnapshots", (it) => {
  it.effect("a kept snapshot is served without reading the database, until the account's change notification arrives", () =>
    Effect.gen(function*() {
      const snapshots = yield* AccountSnapshots
      const sql = yield* SqlClient.SqlClient
      const account = yield* newAccount()
      const snapshot = yield* kept(account.id)
      assert.strictEqual(yield* snapshots.get(account.id), snapshot)
      // Another process's write: only its notification can tell this process (the test clock
      // does not move, so the snapshot never grows old here).
      yield* sql`UPDATE accounts SET mailbox_density = 'comfortable' WHERE id = ${account.id}`
      const changed = yield* eventually(snapshots.get(account.id), (row) => row?.mailboxDensity === "comfortable")
      assert.notStrictEqual(changed, snapshot)
      assert.deepStrictEqual(changed, { ...snapshot, mailboxDensity: "comfortable" })
    }))

  it.effect("a change to how many aliases are active reaches the snapshot through its notification", () =>
    Effect.gen(function*() {
      const snapshots = yield* AccountSnapshots
      const account = yield* newAccount("pro")
      assert.strictEqual((yield* kept(account.id)).activeAliasCount, 0)
      yield* aliasOf(account.id, "snapshot.counted", "active")
      assert.strictEqual((yield* eventually(snapshots.get(account.id), (row) => row?.activeAliasCount === 1))!.activeAliasCount, 1)
    }))

  it.effect("reserved candidates coming and going tell no process to forget the account; a claimed alias does", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const pg = yield* PgClient.PgClient
      const account = yield* newAccount("pro")
      const changes = yield* pg.listen(AccountChangesChannel)
      const heard = Effect.map(Queue.take(changes), (notification) => notification.payload)
      // Listening from here on: a notification of its own comes through first.
      yield* sql`SELECT pg_notify(${AccountChangesChannel}, 'ready')`
      while ((yield* heard) !== "ready") { /* a change of an account of another test */ }
      const [reservation] = yield* sql<{ id: number }>`
        INSERT INTO alias_reservations (account_id, token_digest, expires_at)
        VALUES (${account.id}, ${new Uint8Array([account.id, 1, 2, 3])}, now() + interval '10 minutes') RETURNING id`
      yield* sql`
        INSERT INTO aliases (account_id, domain_id, local_part, local_key, style, status, reservation_id)
        SELECT ${account.id}, id, 'reserved.quiet', 'reserved.quiet', 'words', 'reserved', ${reservation!.id} FROM domains WHERE name = 'burnbox.test'`
      yield* sql`DELETE FROM aliases WHERE account_id = ${account.id} AND status = 'reserved'`
      // Notifications arrive in commit order: nothing comes between 'ready' and this marker.
      yield* sql`SELECT pg_notify(${AccountChangesChannel}, 'marker')`
      assert.strictEqual(yield* heard, "marker")
      yield* aliasOf(account.id, "claimed.heard", "active")
      assert.strictEqual(yield* heard, String(account.id))
      yield* sql`DELETE FROM aliases WHERE account_id = ${account.id}`
      assert.strictEqual(yield* heard, String(account.id))
    }).pipe(Effect.scoped))

  it.effect("a snapshot is trusted for SnapshotMaxAgeMs at most, even when no notification came", () =>
    Effect.gen(function*() {
      const snapshots = yield* AccountSnapshots
      const account = yield* newAccount()
      const snapshot = yield* kept(account.id)
      yield* writeUnannounced(account.id, "compact")
      yield* TestClock.adjust(SnapshotMaxAgeMs / 2 - 1)
      assert.strictEqual(yield* snapshots.get(account.id), snapshot)
      yield* TestClock.adjust(SnapshotMaxAgeMs / 2 + 1)
      assert.isUndefined(yield* peekNow(account.id))
      assert.strictEqual((yield* snapshots.get(account.id))!.mailboxDensity, "compact")
    }))

  it.effect("a snapshot past half its age is still served, and read again in the background", () =>
    Effect.gen(function*() {
      const snapshots = yield* AccountSnapshots
      const account = yield* newAccount()
      const snapshot = yield* kept(account.id)
      yield* writeUnannounced(account.id, "comfortable")
      yield* TestClock.adjust(SnapshotMaxAgeMs / 2)
      assert.strictEqual(yield* snapshots.get(account.id), snapshot)
      const refreshed = yield* eventually(peekNow(account.id), (row) => row !== snapshot)
      assert.strictEqual(refreshed!.mailboxDensity, "comfortable")
    }))

  it.effect("forget drops the snapshot at once, so this process reads its own write", () =>
    Effect.gen(function*() {
      const snapshots = yield* AccountSnapshots
      const accounts = yield* Accounts
      const account = yield* newAccount()
      yield* kept(account.id)
      yield* accounts.setDensity(account.id, "compact")
      snapshots.forget(account.id)
      assert.isUndefined(yield* peekNow(account.id))
      assert.strictEqual((yield* snapshots.get(account.id))!.mailboxDensity, "compact")
    }))
})
