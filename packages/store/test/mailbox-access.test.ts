/**
 * MailboxAccess against the embedded PostgreSQL: who reaches a mailbox (the owner; a guest with a
 * live share, as its role; a stranger, an invited, suspended or former guest not at all), and the
 * condition the message statements select an account's mailboxes with.
 */
import { assert, describe, it as plain, layer } from "@effect/vitest"
import { MailboxAccess, Mailstore, NotGuestCacheMs, roleAllows } from "@burnbox/store"
import { seedAlias, seedShare, TestDatabase } from "@burnbox/testkit"
import { Effect, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { SqlClient } from "effect/sql"
import { acceptMail } from "./store-mail.ts"

const Store = Layer.mergeAll(MailboxAccess.layer, Mailstore.layer).pipe(Layer.provideMerge(TestDatabase))

layer(Store, { timeout: 120_000 })("MailboxAccess", (it) => {
  it.effect("the account that owns an alias reaches its mailbox as owner", () =>
    Effect.gen(function*() {
      const access = yield* MailboxAccess
      const owner = yield* seedAlias("access.owner")
      assert.deepStrictEqual(yield* access.role(owner.accountId, owner.aliasId), Option.some("owner"))
    }))

  it.effect("a stranger reaches no one else's mailbox, and no one reaches an alias that does not exist", () =>
    Effect.gen(function*() {
      const access = yield* MailboxAccess
      const owner = yield* seedAlias("access.mine")
      const stranger = yield* seedAlias("access.stranger")
      assert.deepStrictEqual(yield* access.role(stranger.accountId, owner.aliasId), Option.none())
      assert.deepStrictEqual(yield* access.role(owner.accountId, stranger.aliasId), Option.none())
      assert.deepStrictEqual(yield* access.role(owner.accountId, 999_999), Option.none())
    }))

  it.effect("the mailboxes condition selects the account's own mail only, for reading and for deleting", () =>
    Effect.gen(function*() {
      const access = yield* MailboxAccess
      const sql = yield* SqlClient.SqlClient
      const owner = yield* seedAlias("access.reader")
      const stranger = yield* seedAlias("access.other")
      const mine = [yield* acceptMail(owner, { subject: "one", text: "1" }), yield* acceptMail(owner, { subject: "two", text: "2" })]
      yield* acceptMail(stranger, { subject: "theirs", text: "3" })
      const selected = (accountId: number, use: "read" | "delete") =>
        Effect.map(
          Effect.flatMap(access.mailboxes(accountId, use, "m"), (reachable) => sql<{ id: number }>`SELECT m.id FROM messages m WHERE ${reachable} ORDER BY m.id`),
          (rows) => rows.map((r) => r.id)
        )
      assert.deepStrictEqual(yield* selected(owner.accountId, "read"), mine)
      assert.deepStrictEqual(yield* selected(owner.accountId, "delete"), mine)
      // Unqualified, for a statement on messages alone.
      const unqualified = yield* sql<{ id: number }>`SELECT id FROM messages WHERE ${yield* access.mailboxes(owner.accountId, "read")} ORDER BY id`
      assert.deepStrictEqual(unqualified.map((r) => r.id), mine)
    }))

  it.effect("for an owner the condition is the message's own account, as every message statement had it", () =>
    Effect.gen(function*() {
      const access = yield* MailboxAccess
      const sql = yield* SqlClient.SqlClient
      const [text, params] = sql`SELECT 1 FROM messages m WHERE ${yield* access.mailboxes(42, "read", "m")}`.compile()
      assert.strictEqual(text, "SELECT 1 FROM messages m WHERE m.account_id = $1")
      assert.deepStrictEqual(params, [42])
    }))

  it.effect("a guest with a live share reaches the mailbox as its role: a viewer reads it, a collaborator also deletes from it", () =>
    Effect.gen(function*() {
      const access = yield* MailboxAccess
      const sql = yield* SqlClient.SqlClient
      const owner = yield* seedAlias("access.shared")
      const second = yield* seedAlias("access.shared.second")
      const viewer = yield* seedAlias("access.viewer")
      const collaborator = yield* seedAlias("access.collaborator")
      yield* seedShare({ aliasId: owner.aliasId, ownerId: owner.accountId, guestId: viewer.accountId, role: "viewer" })
      yield* seedShare({ aliasId: owner.aliasId, ownerId: owner.accountId, guestId: collaborator.accountId, role: "collaborator" })
      assert.deepStrictEqual(yield* access.role(viewer.accountId, owner.aliasId), Option.some("viewer"))
      assert.deepStrictEqual(yield* access.role(collaborator.accountId, owner.aliasId), Option.some("collaborator"))
      assert.deepStrictEqual(yield* access.role(viewer.accountId, second.aliasId), Option.none())
      const shared = yield* acceptMail(owner, { subject: "shared", text: "s" })
      yield* acceptMail(second, { subject: "not shared", text: "n" })
      const own = yield* acceptMail(viewer, { subject: "viewer's own", text: "v" })
      const selected = (accountId: number, use: "read" | "delete", excludeShared = false) =>
        Effect.flatMap(access.mailboxes(accountId, use, "m", { excludeShared }), (reachable) =>
          Effect.map(sql<{ id: number }>`SELECT m.id FROM messages m WHERE ${reachable} ORDER BY m.id`, (rows) => rows.map((r) => r.id)))
      assert.deepStrictEqual(yield* selected(viewer.accountId, "read"), [shared, own])
      assert.deepStrictEqual(yield* selected(viewer.accountId, "read", true), [own])
      assert.deepStrictEqual(yield* selected(viewer.accountId, "delete"), [own])
      assert.deepStrictEqual(yield* selected(collaborator.accountId, "delete"), [shared])
      assert.deepStrictEqual([...(yield* access.accountsReadBy(viewer.accountId))].sort(), [viewer.accountId, owner.accountId].sort())
      // The owner's own condition stays the owner-only one.
      const [text] = sql`SELECT 1 FROM messages m WHERE ${yield* access.mailboxes(owner.accountId, "read", "m")}`.compile()
      assert.strictEqual(text, "SELECT 1 FROM messages m WHERE m.account_id = $1")
    }))

  it.effect("an account known to be nobody's guest reads no shares for NotGuestCacheMs; a share started in this process reaches it at once", () =>
    Effect.gen(function*() {
      const access = yield* MailboxAccess
      const owner = yield* seedAlias("access.cache.owner")
      const other = yield* seedAlias("access.cache.other")
      const guest = yield* seedAlias("access.cache.guest")
      assert.deepStrictEqual(yield* access.shared(guest.accountId), [])
      // A share started by another process (written straight into the table) reaches the guest once the answer is stale.
      yield* seedShare({ aliasId: owner.aliasId, ownerId: owner.accountId, guestId: guest.accountId, role: "viewer" })
      assert.deepStrictEqual(yield* access.shared(guest.accountId), [])
      yield* TestClock.adjust(NotGuestCacheMs)
      assert.deepStrictEqual((yield* access.shared(guest.accountId)).map((m) => m.aliasId), [owner.aliasId])
      // A guest with live shares reads them on every request: none is cached, so a second share shows at once when forgotten...
      yield* seedShare({ aliasId: other.aliasId, ownerId: other.accountId, guestId: guest.accountId, role: "viewer" })
      assert.deepStrictEqual((yield* access.shared(guest.accountId)).map((m) => m.aliasId).sort(), [owner.aliasId, other.aliasId].sort())
      // ...and a share started in this process (Shares.accept, a resumed plan) is forgotten at once.
      const late = yield* seedAlias("access.cache.late")
      assert.deepStrictEqual(yield* access.shared(late.accountId), [])
      yield* seedShare({ aliasId: owner.aliasId, ownerId: owner.accountId, guestId: late.accountId, role: "viewer" })
      yield* access.forgetGuests([late.accountId])
      assert.deepStrictEqual((yield* access.shared(late.accountId)).map((m) => m.aliasId), [owner.aliasId])
    }))

  it.effect("an invited, a suspended and a former guest reach nothing", () =>
    Effect.gen(function*() {
      const access = yield* MailboxAccess
      const owner = yield* seedAlias("access.stopped")
      const invited = yield* seedAlias("access.invited")
      const suspended = yield* seedAlias("access.suspended")
      const former = yield* seedAlias("access.former")
      const left = yield* seedAlias("access.left")
      yield* seedShare({ aliasId: owner.aliasId, ownerId: owner.accountId, guestId: invited.accountId, status: "pending" })
      yield* seedShare({ aliasId: owner.aliasId, ownerId: owner.accountId, guestId: suspended.accountId, suspended: true })
      yield* seedShare({ aliasId: owner.aliasId, ownerId: owner.accountId, guestId: former.accountId, status: "ended" })
      yield* seedShare({ aliasId: owner.aliasId, ownerId: owner.accountId, guestId: left.accountId, status: "left" })
      for (const guest of [invited, suspended, former, left]) {
        assert.deepStrictEqual(yield* access.role(guest.accountId, owner.aliasId), Option.none())
        assert.deepStrictEqual(yield* access.shared(guest.accountId), [])
        assert.deepStrictEqual(yield* access.accountsReadBy(guest.accountId), [guest.accountId])
      }
    }))
})

describe("roles", () => {
  plain("a viewer reads a mailbox; only an owner or a collaborator deletes from it", () => {
    assert.isTrue(roleAllows("owner", "read") && roleAllows("owner", "delete"))
    assert.isTrue(roleAllows("collaborator", "read") && roleAllows("collaborator", "delete"))
    assert.isTrue(roleAllows("viewer", "read"))
    assert.isFalse(roleAllows("viewer", "delete"))
  })
})
