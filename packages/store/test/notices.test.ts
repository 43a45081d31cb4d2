/**
 * Account notices against the embedded PostgreSQL, called directly: what the service did on its
 * own, listed for the owner newest first.
 */
import { Notices } from "@burnbox/store"
import { seedAlias, TestDatabase } from "@burnbox/testkit"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"

const notice = (accountId: number, kind: string, data: Record<string, unknown>, at: Date) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO account_notices (account_id, kind, data, created_at) VALUES (${accountId}, ${kind}, ${JSON.stringify(data)}::jsonb, ${at})`
  }).pipe(Effect.orDie)

layer(Notices.layer.pipe(Layer.provideMerge(TestDatabase)))("Notices", (it) => {
  it.effect("an account's notices are listed newest first, with their data, and no one else's", () =>
    Effect.gen(function*() {
      const notices = yield* Notices
      const { accountId } = yield* seedAlias("notice.owner")
      const other = yield* seedAlias("notice.other")
      const first = new Date("2026-11-20T08:00:00.000Z")
      const second = new Date("2026-11-21T09:30:00.250Z")
      yield* notice(accountId, "webhook.disabled", { webhookId: 7, name: "orders", failureSince: "2026-11-17T08:00:00.000Z" }, first)
      yield* notice(other.accountId, "webhook.disabled", { webhookId: 8 }, first)
      yield* notice(accountId, "plan.changed", { from: "pro", to: "free" }, second)
      const listed = yield* notices.list(accountId)
      assert.deepStrictEqual(listed.map(({ id: _, ...rest }) => rest), [
        { kind: "plan.changed", data: { from: "pro", to: "free" }, createdAt: second.toISOString() },
        { kind: "webhook.disabled", data: { webhookId: 7, name: "orders", failureSince: "2026-11-17T08:00:00.000Z" }, createdAt: first.toISOString() }
      ])
      assert.isTrue(listed.every((n) => Number.isSafeInteger(n.id)))
      assert.isAbove(listed[0]!.id, listed[1]!.id)
    }))

  it.effect("at most the 100 newest notices are listed", () =>
    Effect.gen(function*() {
      const notices = yield* Notices
      const { accountId } = yield* seedAlias("notice.many")
      for (let i = 0; i < 101; i++) yield* notice(accountId, "note", { n: i }, new Date(Date.UTC(2026, 0, 1, 0, 0, i)))
      const listed = yield* notices.list(accountId)
      assert.strictEqual(listed.length, 100)
      assert.deepStrictEqual([listed[0]!.data, listed[99]!.data], [{ n: 100 }, { n: 1 }])
    }))
})
