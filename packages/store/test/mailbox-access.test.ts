/**
 * MailboxAccess against the embedded PostgreSQL: who reaches a mailbox (the owner; a stranger
 * not at all), and the condition the message statements select an account's mailboxes with.
 */
import { assert, describe, it as plain, layer } from "@effect/vitest"
import { MailboxAccess, Mailstore, roleAllows } from "@burnbox/store"
import { seedAlias, TestDatabase } from "@burnbox/testkit"
import { Effect, Layer, Option } from "effect"
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
          sql<{ id: number }>`SELECT m.id FROM messages m WHERE ${access.mailboxes(accountId, use, "m")} ORDER BY m.id`,
          (rows) => rows.map((r) => r.id)
        )
      assert.deepStrictEqual(yield* selected(owner.accountId, "read"), mine)
      assert.deepStrictEqual(yield* selected(owner.accountId, "delete"), mine)
      // Unqualified, for a statement on messages alone.
      const unqualified = yield* sql<{ id: number }>`SELECT id FROM messages WHERE ${access.mailboxes(owner.accountId, "read")} ORDER BY id`
      assert.deepStrictEqual(unqualified.map((r) => r.id), mine)
    }))

  it.effect("for an owner the condition is the message's own account, as every message statement had it", () =>
    Effect.gen(function*() {
      const access = yield* MailboxAccess
      const sql = yield* SqlClient.SqlClient
      const [text, params] = sql`SELECT 1 FROM messages m WHERE ${access.mailboxes(42, "read", "m")}`.compile()
      assert.strictEqual(text, "SELECT 1 FROM messages m WHERE m.account_id = $1")
      assert.deepStrictEqual(params, [42])
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
