/**
 * The pipeline's rules step (store/src/rules/RuleWalk.ts) without the HTTP server: a retried
 * pipeline job applies a rule's marks, tags and unread count once, whichever claim stores first
 * and however often a store is repeated.
 */
import { assert, layer } from "@effect/vitest"
import { analyzeMessage, buildTestMessage, parseMessage, workedMail } from "@burnbox/domain/mail/index"
import { ClaimTimeoutMs, Entitlements, MailQueue, Mailstore, type ProcessedMessage, Rules } from "@burnbox/store"
import { seedAlias, TestDatabase } from "@burnbox/testkit"
import { Clock, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"

const accept = (aliasId: number, accountId: number, address: string, subject: string) =>
  Effect.gen(function*() {
    const mailstore = yield* Mailstore
    const raw = buildTestMessage({ from: "Shop <shop@example.com>", subject, text: "Your code is 482913." }, {
      to: address,
      date: new Date(yield* Clock.currentTimeMillis)
    })
    const [accepted] = yield* mailstore.accept({ deliveries: [{ aliasId, accountId, recipient: address }], raw, source: "test", envelopeFrom: null, clientAddress: null, clientHelo: null })
    return accepted!.id
  }).pipe(Effect.orDie)

const worked = (claimed: ProcessedMessage["message"]) =>
  Effect.gen(function*() {
    const result = yield* Effect.promise(() => parseMessage(claimed.raw!))
    if (!result.ok) return yield* Effect.die(result.reason)
    return { message: claimed, mail: workedMail(result.message, analyzeMessage(result.message)), auth: { spf: null, dkim: null, dmarc: null }, events: [] }
  })

const Store = Layer.mergeAll(MailQueue.layer, Mailstore.layer, Rules.layer.pipe(Layer.provide(Entitlements.layer))).pipe(Layer.provideMerge(TestDatabase))

layer(Store)("the rules step", (it) => {
  it.effect("a retried job (its claim timed out and taken again) sets the rule's marks, tags and unread count once", () =>
    Effect.gen(function*() {
      const queue = yield* MailQueue
      const rules = yield* Rules
      const sql = yield* SqlClient.SqlClient
      const { accountId, address, aliasId } = yield* seedAlias("ruled.otter.1")
      const [tag] = yield* sql<{ id: number }>`
        INSERT INTO tags (account_id, name, name_key) VALUES (${accountId}, 'shop', 'shop') RETURNING id`
      yield* rules.create(accountId, {
        name: "shop",
        match: { from: "shop@example.com", hasOtp: true },
        actions: [{ type: "tag", tagId: tag!.id }, { type: "mark_read" }, { type: "star" }]
      })
      const id = yield* accept(aliasId, accountId, address, "your code")
      const unreadBefore = (yield* sql<{ unread_count: number }>`SELECT unread_count FROM aliases WHERE id = ${aliasId}`)[0]!.unread_count

      const [first] = yield* queue.claim
      yield* TestClock.adjust(ClaimTimeoutMs + 1)
      const [retry] = yield* queue.claim
      assert.deepStrictEqual([first!.id, retry!.id, retry!.attempts], [id, id, 2])
      const retried = yield* worked(retry!)
      yield* queue.store([retried])
      // The first claim's worker finishes late, and a store is repeated: neither changes anything.
      yield* queue.store([yield* worked(first!)])
      yield* queue.store([retried])

      const tags = yield* sql`SELECT account_id, tag_id FROM message_tags WHERE message_id = ${id}`
      assert.deepStrictEqual(tags, [{ account_id: accountId, tag_id: tag!.id }])
      const states = yield* sql`SELECT account_id, is_read, starred, pinned, archived FROM message_states WHERE message_id = ${id}`
      assert.deepStrictEqual(states, [{ account_id: accountId, is_read: true, starred: true, pinned: false, archived: false }])
      const [alias] = yield* sql<{ unread_count: number }>`SELECT unread_count FROM aliases WHERE id = ${aliasId}`
      assert.strictEqual(alias!.unread_count, unreadBefore - 1)
    }))
})
