/**
 * Tags against the embedded PostgreSQL, called directly: names unique per account whatever
 * their letter case, colours kept in uppercase hex, lists in name order with the count of
 * tagged messages outside the trash.
 */
import { buildTestMessage } from "@burnbox/domain/mail/index"
import { Mailstore, Tags } from "@burnbox/store"
import { seedAlias, TestDatabase } from "@burnbox/testkit"
import { assert, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"

const Store = Layer.mergeAll(Tags.layer, Mailstore.layer).pipe(Layer.provideMerge(TestDatabase))

let seeded = 0
/** An account with one alias. */
const owner = () => seedAlias(`tag.owner.${++seeded}`)

/** A message delivered to the alias, and tagged by its owner. */
const taggedMessage = (seed: { accountId: number; aliasId: number; address: string }, tagId: number) =>
  Effect.gen(function*() {
    const mailstore = yield* Mailstore
    const sql = yield* SqlClient.SqlClient
    const raw = buildTestMessage({ from: "shop@example.com", subject: "receipt", text: "thanks" }, { to: seed.address, date: new Date() })
    const [accepted] = yield* mailstore.accept({
      deliveries: [{ aliasId: seed.aliasId, accountId: seed.accountId, recipient: seed.address }],
      raw,
      source: "test",
      envelopeFrom: null,
      clientAddress: null,
      clientHelo: null
    })
    yield* sql`INSERT INTO message_tags (message_id, account_id, tag_id) VALUES (${accepted!.id}, ${seed.accountId}, ${tagId})`
    return accepted!.id
  }).pipe(Effect.orDie)

layer(Store)("Tags", (it) => {
  it.effect("a new tag keeps its name as given and its colour in uppercase; no colour is null", () =>
    Effect.gen(function*() {
      const tags = yield* Tags
      const { accountId } = yield* owner()
      const receipts = yield* tags.create(accountId, { name: "Receipts", color: "#a1b2c3" })
      assert.deepStrictEqual(receipts, { id: receipts.id, name: "Receipts", color: "#A1B2C3" })
      const plain = yield* tags.create(accountId, { name: "plain" })
      assert.deepStrictEqual(plain, { id: plain.id, name: "plain", color: null })
    }))

  it.effect("the list is in name order whatever the letter case, each tag with its message count, and only the account's own", () =>
    Effect.gen(function*() {
      const tags = yield* Tags
      const { accountId } = yield* owner()
      const stranger = yield* owner()
      const zebra = yield* tags.create(accountId, { name: "zebra" })
      const apple = yield* tags.create(accountId, { name: "Apple" })
      const mango = yield* tags.create(accountId, { name: "mango", color: "#00FF00" })
      yield* tags.create(stranger.accountId, { name: "Apricot" })
      assert.deepStrictEqual(yield* tags.list(accountId), [
        { ...apple, messageCount: 0 },
        { ...mango, messageCount: 0 },
        { ...zebra, messageCount: 0 }
      ])
    }))

  it.effect("a tag's message count leaves out messages in the trash", () =>
    Effect.gen(function*() {
      const tags = yield* Tags
      const sql = yield* SqlClient.SqlClient
      const seed = yield* owner()
      const tag = yield* tags.create(seed.accountId, { name: "orders" })
      yield* taggedMessage(seed, tag.id)
      const trashed = yield* taggedMessage(seed, tag.id)
      assert.strictEqual((yield* tags.list(seed.accountId))[0]!.messageCount, 2)
      yield* sql`UPDATE messages SET trashed_at = now(), trash_purge_at = now() + interval '7 days' WHERE id = ${trashed}`
      assert.deepStrictEqual(yield* tags.list(seed.accountId), [{ ...tag, messageCount: 1 }])
    }))

  it.effect("an update changes only what it names: a null colour clears it, a name keeps its colour", () =>
    Effect.gen(function*() {
      const tags = yield* Tags
      const { accountId } = yield* owner()
      const tag = yield* tags.create(accountId, { name: "Work", color: "#123ABC" })
      assert.deepStrictEqual(yield* tags.update(accountId, tag.id, { name: "Office" }), { id: tag.id, name: "Office", color: "#123ABC" })
      assert.deepStrictEqual(yield* tags.update(accountId, tag.id, { color: "#fedcba" }), { id: tag.id, name: "Office", color: "#FEDCBA" })
      assert.deepStrictEqual(yield* tags.update(accountId, tag.id, { color: null }), { id: tag.id, name: "Office", color: null })
      assert.deepStrictEqual(yield* tags.update(accountId, tag.id, {}), { id: tag.id, name: "Office", color: null })
    }))

  it.effect("a tag may be renamed to another letter case of its own name; names are unique per account, not across accounts", () =>
    Effect.gen(function*() {
      const tags = yield* Tags
      const { accountId } = yield* owner()
      const other = yield* owner()
      const tag = yield* tags.create(accountId, { name: "travel" })
      assert.strictEqual((yield* tags.update(accountId, tag.id, { name: "Travel" })).name, "Travel")
      assert.strictEqual((yield* tags.create(other.accountId, { name: "TRAVEL" })).name, "TRAVEL")
    }))

  it.effect("a removed tag is gone from the list and from its messages", () =>
    Effect.gen(function*() {
      const tags = yield* Tags
      const sql = yield* SqlClient.SqlClient
      const seed = yield* owner()
      const gone = yield* tags.create(seed.accountId, { name: "gone" })
      const stays = yield* tags.create(seed.accountId, { name: "stays" })
      const message = yield* taggedMessage(seed, gone.id)
      yield* tags.remove(seed.accountId, gone.id)
      assert.deepStrictEqual(yield* tags.list(seed.accountId), [{ ...stays, messageCount: 0 }])
      const left = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM message_tags WHERE message_id = ${message}`
      assert.strictEqual(left[0]!.n, 0)
    }))
})
