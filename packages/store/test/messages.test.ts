/**
 * Messages, MessageActions and Mailstore against the embedded PostgreSQL, without the HTTP
 * server: accepted bytes kept exactly (BlobStore), lists and details that show a reader only the
 * mailboxes it reaches (MailboxAccess), the trash and restore on the test clock, bulk actions.
 */
import { assert, layer } from "@effect/vitest"
import { AliasNotFound, MessageNotFound } from "@burnbox/domain"
import { BlobStore, Keyring, MailQueue, Mailstore, MessageActions, Messages } from "@burnbox/store"
import { seedAlias, TestDatabase } from "@burnbox/testkit"
import { Clock, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { acceptMail, acceptRaw, deliverMail, processAll } from "./store-mail.ts"

const Store = Layer.mergeAll(Messages.layer, MessageActions.layer, Mailstore.layer, MailQueue.layer, BlobStore.layer).pipe(
  Layer.provideMerge(Keyring.layer),
  Layer.provideMerge(TestDatabase)
)

const dayMs = 86_400_000
const baseUrl = "https://burnbox.test/api/v1"

/** The ids of a list's page, and its total. */
const listed = (accountId: number, filters: Parameters<Messages["Service"]["list"]>[1] = {}) =>
  Effect.gen(function*() {
    const messages = yield* Messages
    const page = yield* messages.list(accountId, filters).pipe(Effect.orDie)
    return { ids: page.items.map((m) => m.id), total: page.total }
  })

layer(Store, { timeout: 120_000 })("Messages", (it) => {
  it.effect("accept keeps the raw bytes byte for byte, and only their owner reads them back", () =>
    Effect.gen(function*() {
      const messages = yield* Messages
      const blobs = yield* BlobStore
      const owner = yield* seedAlias("msg.raw")
      const stranger = yield* seedAlias("msg.raw.stranger")
      // 8-bit bytes, a bare LF, a lone CR and trailing spaces: nothing is normalized.
      const raw = Buffer.concat([
        Buffer.from("From: a@example.com\r\nTo: msg.raw@burnbox.test\r\nSubject: bytes\r\n\r\n", "latin1"),
        Buffer.from([0xe9, 0xff, 0x00, 0x0a, 0x0d, 0x20, 0x20, 0x0d, 0x0a])
      ])
      const id = yield* acceptRaw(owner, raw)
      assert.strictEqual(Buffer.compare(Option.getOrThrow(yield* blobs.readRaw(id)), raw), 0)
      const read = yield* messages.raw(owner.accountId, id)
      assert.strictEqual(Buffer.compare(read!, raw), 0)
      assert.deepInclude(yield* Effect.flip(messages.raw(stranger.accountId, id)), { _tag: "MessageNotFound" })
    }))

  it.effect("a list and a detail show a reader its own mail only", () =>
    Effect.gen(function*() {
      const messages = yield* Messages
      const actions = yield* MessageActions
      const me = yield* seedAlias("msg.me")
      const them = yield* seedAlias("msg.them")
      const first = yield* acceptMail(me, { subject: "first otter", text: "code 482913" })
      const second = yield* acceptMail(me, {
        subject: "second otter",
        html: "<p>hello</p>",
        attachments: [{ filename: "a.txt", contentType: "text/plain", contentBase64: Buffer.from("a").toString("base64") }]
      })
      const theirs = yield* acceptMail(them, { subject: "their otter", text: "not yours" })
      yield* processAll
      assert.deepStrictEqual(yield* listed(me.accountId), { ids: [second, first], total: 2 })
      assert.deepStrictEqual(yield* listed(them.accountId), { ids: [theirs], total: 1 })
      assert.deepStrictEqual(yield* listed(me.accountId, { q: "otter" }), { ids: [second, first], total: 2 })

      const detail = yield* messages.detail(me.accountId, second, baseUrl)
      assert.strictEqual(detail!.subject, "second otter")
      assert.deepStrictEqual(detail!.alias, { id: me.aliasId, address: me.address, label: null, domain: "burnbox.test" })
      assert.strictEqual(detail!.rawUrl, `${baseUrl}/messages/${second}/raw`)
      assert.deepStrictEqual(detail!.attachments.map((a) => [a.filename, a.sizeBytes]), [["a.txt", 1]])
      assert.strictEqual((yield* messages.detail(me.accountId, first, baseUrl))!.otpCodes[0], "482913")

      // Another account's message is as absent as one that does not exist.
      assert.deepInclude(yield* Effect.flip(messages.detail(me.accountId, theirs, baseUrl)), { _tag: "MessageNotFound" })
      assert.deepInclude(yield* Effect.flip(actions.html(them.accountId, second, false)), { _tag: "MessageNotFound" })
      assert.deepInclude(yield* Effect.flip(actions.attachment(them.accountId, second, detail!.attachments[0]!.id, false)), { _tag: "AttachmentNotFound" })
      assert.isDefined(yield* actions.attachment(me.accountId, second, detail!.attachments[0]!.id, false))
      const refused = yield* Effect.flip(actions.updateState(them.accountId, second, { isRead: true }))
      assert.deepStrictEqual(refused, new MessageNotFound({ messageId: second }))
    }))

  it.effect("DELETE moves a message to the trash with its purge deadline fixed; it leaves the list and its search until restored, marks intact", () =>
    Effect.gen(function*() {
      const messages = yield* Messages
      const actions = yield* MessageActions
      const mailbox = yield* seedAlias("msg.trash")
      const start = yield* Clock.currentTimeMillis
      const early = yield* deliverMail(mailbox, { subject: "early heron", text: "x" })
      const late = yield* deliverMail(mailbox, { subject: "late heron", text: "y" })
      yield* actions.updateState(mailbox.accountId, late, { starred: true, pinned: true })

      // A pro account keeps mail 90 days and trash 30: the earlier of the two deadlines wins.
      yield* TestClock.adjust(dayMs)
      yield* actions.remove(mailbox.accountId, early, false)
      yield* TestClock.adjust(69 * dayMs)
      yield* actions.remove(mailbox.accountId, late, false)
      const trashedEarly = (yield* messages.detail(mailbox.accountId, early, baseUrl))!
      const trashedLate = (yield* messages.detail(mailbox.accountId, late, baseUrl))!
      assert.deepStrictEqual([trashedEarly.trashed, trashedEarly.trashedAt, trashedEarly.trashPurgeAt], [
        true,
        new Date(start + dayMs).toISOString(),
        new Date(start + 31 * dayMs).toISOString()
      ])
      assert.deepStrictEqual([trashedLate.trashedAt, trashedLate.trashPurgeAt], [
        new Date(start + 70 * dayMs).toISOString(),
        trashedLate.expiresAt
      ])
      assert.deepStrictEqual(yield* listed(mailbox.accountId), { ids: [], total: 0 })
      assert.deepStrictEqual(yield* listed(mailbox.accountId, { q: "heron" }), { ids: [], total: 0 })
      assert.deepStrictEqual(yield* listed(mailbox.accountId, { trashed: "true" }), { ids: [late, early], total: 2 })

      yield* actions.restore(mailbox.accountId, late)
      const restored = (yield* messages.detail(mailbox.accountId, late, baseUrl))!
      assert.deepStrictEqual([restored.trashed, restored.trashPurgeAt, restored.starred, restored.pinned], [false, null, true, true])
      assert.deepStrictEqual(yield* listed(mailbox.accountId, { q: "heron" }), { ids: [late], total: 1 })
    }))

  it.effect("a repeated DELETE on a trashed message keeps it in the trash, bytes and purge date unchanged", () =>
    Effect.gen(function*() {
      const messages = yield* Messages
      const actions = yield* MessageActions
      const blobs = yield* BlobStore
      const mailbox = yield* seedAlias("msg.again")
      const id = yield* deliverMail(mailbox, { subject: "twice", text: "z" })
      yield* actions.remove(mailbox.accountId, id, false)
      const first = (yield* messages.detail(mailbox.accountId, id, baseUrl))!.trashPurgeAt
      yield* TestClock.adjust(dayMs)
      yield* actions.remove(mailbox.accountId, id, false)
      const again = (yield* messages.detail(mailbox.accountId, id, baseUrl))!
      assert.deepStrictEqual([again.trashed, again.trashPurgeAt], [true, first])
      assert.isTrue(Option.isSome(yield* blobs.readRaw(id)))
    }))

  it.effect("on a plan without a trash DELETE destroys the message with its bytes, and so does a permanent DELETE on any plan", () =>
    Effect.gen(function*() {
      const messages = yield* Messages
      const actions = yield* MessageActions
      const blobs = yield* BlobStore
      const sql = yield* SqlClient.SqlClient
      const free = yield* seedAlias("msg.free")
      yield* sql`UPDATE accounts SET plan = 'free' WHERE id = ${free.accountId}`
      const gone = yield* deliverMail(free, { subject: "no trash here", text: "a" })
      yield* actions.remove(free.accountId, gone, false)
      assert.deepInclude(yield* Effect.flip(messages.detail(free.accountId, gone, baseUrl)), { _tag: "MessageNotFound" })
      assert.isTrue(Option.isNone(yield* blobs.readRaw(gone)))

      const pro = yield* seedAlias("msg.forever")
      const forever = yield* deliverMail(pro, { subject: "forever", text: "b" })
      yield* actions.remove(pro.accountId, forever, true)
      assert.deepInclude(yield* Effect.flip(messages.detail(pro.accountId, forever, baseUrl)), { _tag: "MessageNotFound" })
      assert.isTrue(Option.isNone(yield* blobs.readRaw(forever)))
    }))

  it.effect("bulk: state actions count real changes only; delete and restore answer one outcome per id", () =>
    Effect.gen(function*() {
      const actions = yield* MessageActions
      const mailbox = yield* seedAlias("msg.bulk")
      const a = yield* deliverMail(mailbox, { subject: "bulk a", text: "a" })
      const b = yield* deliverMail(mailbox, { subject: "bulk b", text: "b" })
      yield* actions.updateState(mailbox.accountId, a, { isRead: true })
      const read = yield* actions.bulk(mailbox.accountId, { ids: [a, b], action: "mark_read" })
      assert.deepStrictEqual(read, { updated: 1, deleted: 0, trashed: 0, restored: 0, outcomes: [] })
      assert.deepStrictEqual(yield* listed(mailbox.accountId, { unread: "true" }), { ids: [], total: 0 })

      const deleted = yield* actions.bulk(mailbox.accountId, { ids: [b, a], action: "delete" })
      assert.deepStrictEqual([deleted.deleted, deleted.trashed, deleted.outcomes.map((o) => [o.id, o.outcome])], [2, 2, [[b, "trashed"], [a, "trashed"]]])
      const restored = yield* actions.bulk(mailbox.accountId, { ids: [a], action: "restore" })
      assert.deepStrictEqual([restored.restored, restored.outcomes], [1, [{ id: a, outcome: "restored", trashPurgeAt: null }]])
      assert.deepStrictEqual(yield* listed(mailbox.accountId), { ids: [a], total: 1 })
    }))

  it.effect("bulk with another account's id refuses the whole call and changes nothing", () =>
    Effect.gen(function*() {
      const actions = yield* MessageActions
      const mine = yield* seedAlias("msg.bulk.mine")
      const theirs = yield* seedAlias("msg.bulk.theirs")
      const own = yield* deliverMail(mine, { subject: "mine", text: "m" })
      const foreign = yield* deliverMail(theirs, { subject: "theirs", text: "t" })
      const refused = yield* Effect.flip(actions.bulk(mine.accountId, { ids: [own, foreign], action: "delete" }))
      assert.deepStrictEqual(refused, new MessageNotFound({ messageId: foreign }))
      assert.deepStrictEqual(yield* listed(mine.accountId), { ids: [own], total: 1 })
      assert.deepStrictEqual(yield* listed(theirs.accountId), { ids: [foreign], total: 1 })
    }))

  it.effect("emptying the trash destroys what is in it and says how much remains; another account's alias is AliasNotFound", () =>
    Effect.gen(function*() {
      const actions = yield* MessageActions
      const blobs = yield* BlobStore
      const mailbox = yield* seedAlias("msg.empty")
      const stranger = yield* seedAlias("msg.empty.stranger")
      const kept = yield* deliverMail(mailbox, { subject: "kept", text: "k" })
      const trashed = yield* deliverMail(mailbox, { subject: "trashed", text: "t" })
      yield* actions.remove(mailbox.accountId, trashed, false)
      assert.deepStrictEqual(yield* actions.emptyTrash(mailbox.accountId, mailbox.aliasId), { deleted: 1, remaining: 0 })
      assert.isTrue(Option.isNone(yield* blobs.readRaw(trashed)))
      assert.deepStrictEqual(yield* listed(mailbox.accountId), { ids: [kept], total: 1 })
      const refused = yield* Effect.flip(actions.emptyTrash(stranger.accountId, mailbox.aliasId))
      assert.deepStrictEqual(refused, new AliasNotFound({ aliasId: mailbox.aliasId }))
    }))
})
