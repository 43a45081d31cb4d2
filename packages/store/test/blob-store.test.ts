/**
 * BlobStore against the embedded PostgreSQL: the exact bytes of accepted mail (small ones whole,
 * big ones staged piece by piece), reads limited to the reader's mailboxes, the claim's inline
 * bytes, and attachments written, listed, read and removed.
 */
import { assert, layer } from "@effect/vitest"
import { BlobStore, inflateRaw, MailboxAccess, MailQueue, Mailstore, RawPieceBytes } from "@burnbox/store"
import { seedAlias, TestDatabase } from "@burnbox/testkit"
import { Effect, Layer, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { acceptRaw, deliverMail } from "./store-mail.ts"

const Store = Layer.mergeAll(BlobStore.layer, MailboxAccess.layer, Mailstore.layer, MailQueue.layer).pipe(Layer.provideMerge(TestDatabase))

/** Every byte value, CR and LF and NUL included, many times over: whatever arrives is kept. */
const everyByte = (length: number) => Uint8Array.from({ length }, (_, i) => (i * 7 + (i >> 8)) % 256)

/** Bytes that do not compress (a fixed pseudo-random sequence). */
const noise = (length: number) => {
  const out = new Uint8Array(length)
  let x = 2_463_534_242
  for (let i = 0; i < length; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    out[i] = x & 255
  }
  return out
}

const largeObjects = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_largeobject_metadata`
  return row!.n
})

layer(Store, { timeout: 120_000 })("BlobStore", (it) => {
  it.effect("keeps a small message's raw bytes exactly as accepted", () =>
    Effect.gen(function*() {
      const blobs = yield* BlobStore
      const mailbox = yield* seedAlias("blob.small")
      const raw = everyByte(5_000)
      const id = yield* acceptRaw(mailbox, raw)
      const stored = yield* blobs.readRaw(id)
      assert.isTrue(Option.isSome(stored))
      assert.strictEqual(Buffer.compare(Option.getOrThrow(stored), raw), 0)
    }))

  it.effect("keeps a big message, accepted in uneven pieces, byte for byte, and leaves no staging object behind", () =>
    Effect.gen(function*() {
      const blobs = yield* BlobStore
      const mailbox = yield* seedAlias("blob.big")
      const raw = everyByte(2 * RawPieceBytes + 12_345)
      // Pieces that straddle the staging pieces' boundaries.
      const pieces = [raw.subarray(0, 700_001), raw.subarray(700_001, 1_900_000), raw.subarray(1_900_000)]
      const before = yield* largeObjects
      const id = yield* acceptRaw(mailbox, pieces)
      const stored = Option.getOrThrow(yield* blobs.readRaw(id))
      assert.strictEqual(stored.byteLength, raw.byteLength)
      assert.strictEqual(Buffer.compare(stored, raw), 0)
      assert.strictEqual(yield* largeObjects, before)
    }))

  it.effect("keeps a big message that does not compress (stored in pieces, read back a piece at a time), and compresses one stored before 0028 in place", () =>
    Effect.gen(function*() {
      const blobs = yield* BlobStore
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* seedAlias("blob.noise")
      const raw = noise(2 * RawPieceBytes + 777)
      const before = yield* largeObjects
      const id = yield* acceptRaw(mailbox, [raw.subarray(0, 1_000_000), raw.subarray(1_000_000)])
      const [stored] = yield* sql<{ n: number; zstd: boolean }>`SELECT octet_length(raw) AS n, zstd FROM message_raw WHERE message_id = ${id}`
      assert.isTrue(stored!.zstd)
      assert.isAbove(stored!.n, RawPieceBytes)
      assert.strictEqual(Buffer.compare(Option.getOrThrow(yield* blobs.readRaw(id)), raw), 0)
      // As stored before migration 0028: the bytes as received.
      yield* sql`UPDATE message_raw SET raw = ${raw}, zstd = false WHERE message_id = ${id}`
      assert.strictEqual(Buffer.compare(Option.getOrThrow(yield* blobs.readRaw(id)), raw), 0)
      const compressed = yield* sql.withTransaction(blobs.compressStoredRaws(id - 1, id))
      assert.deepStrictEqual([compressed.count, compressed.bytesBefore], [1, raw.byteLength])
      assert.strictEqual(Buffer.compare(Option.getOrThrow(yield* blobs.readRaw(id)), raw), 0)
      const [after] = yield* sql<{ zstd: boolean }>`SELECT zstd FROM message_raw WHERE message_id = ${id}`
      assert.isTrue(after!.zstd)
      assert.strictEqual(yield* largeObjects, before)
    }))

  it.effect("reads a message's bytes for a reader only when the message is in a mailbox the reader reaches", () =>
    Effect.gen(function*() {
      const blobs = yield* BlobStore
      const access = yield* MailboxAccess
      const owner = yield* seedAlias("blob.owner")
      const stranger = yield* seedAlias("blob.stranger")
      const id = yield* acceptRaw(owner, everyByte(300))
      assert.isTrue(Option.isSome(yield* blobs.readRaw(id, { reachable: yield* access.mailboxes(owner.accountId, "read", "m") })))
      assert.isTrue(Option.isNone(yield* blobs.readRaw(id, { reachable: yield* access.mailboxes(stranger.accountId, "read", "m") })))
      assert.isTrue(Option.isNone(yield* blobs.readRaw(id + 1_000)))
    }))

  it.effect("inlines a claim's raw bytes up to the limit (as stored, compressed) and only says that larger ones exist", () =>
    Effect.gen(function*() {
      const blobs = yield* BlobStore
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* seedAlias("blob.inline")
      const small = yield* acceptRaw(mailbox, everyByte(100))
      const large = yield* acceptRaw(mailbox, everyByte(101))
      const [stored] = yield* sql<{ n: number }>`SELECT octet_length(raw) AS n FROM message_raw WHERE message_id = ${small}`
      const { columns, join } = blobs.inlineRaw("m.id", stored!.n)
      const rows = yield* sql`SELECT m.id, ${columns} FROM messages m ${join} WHERE m.id IN ${sql.in([small, large])} ORDER BY m.id`.pipe(
        Effect.flatMap(Schema.decodeUnknownEffect(Schema.Array(Schema.Struct({
          id: Schema.Int,
          has_raw: Schema.Boolean,
          raw: Schema.NullOr(Schema.Uint8Array),
          raw_zstd: Schema.Boolean
        }))))
      )
      assert.deepStrictEqual(rows.map((r) => [r.id, r.has_raw, r.raw === null ? null : r.raw.byteLength, r.raw_zstd]), [[small, true, stored!.n, true], [large, true, null, true]])
      const inflated = yield* inflateRaw(rows[0]!.raw!, true, 100)
      assert.strictEqual(Buffer.compare(inflated, everyByte(100)), 0)
    }))

  it.effect("lists a processed message's attachments in order without their bytes, and reads one with its bytes for its reader only", () =>
    Effect.gen(function*() {
      const blobs = yield* BlobStore
      const access = yield* MailboxAccess
      const owner = yield* seedAlias("blob.attach")
      const stranger = yield* seedAlias("blob.attach.stranger")
      const id = yield* deliverMail(owner, {
        subject: "two files",
        text: "see attached",
        attachments: [
          { filename: "notes.txt", contentType: "text/plain", contentBase64: Buffer.from("hello notes").toString("base64") },
          { filename: "setup.exe", contentType: "application/octet-stream", contentBase64: Buffer.from([0x4d, 0x5a, 0, 1]).toString("base64") }
        ]
      })
      const listed = yield* blobs.attachments(id)
      assert.deepStrictEqual(listed.map((a) => [a.filename, a.mime_type, a.size_bytes, a.dangerous]), [
        ["notes.txt", "text/plain", 11, false],
        ["setup.exe", "application/octet-stream", 4, true]
      ])
      assert.notProperty(listed[0]!, "content")
      const notes = yield* blobs.attachment(id, listed[0]!.id, yield* access.mailboxes(owner.accountId, "read", "m"))
      assert.strictEqual(Buffer.from(Option.getOrThrow(notes).content).toString("utf8"), "hello notes")
      assert.isTrue(Option.isNone(yield* blobs.attachment(id, listed[0]!.id, yield* access.mailboxes(stranger.accountId, "read", "m"))))
      // An attachment is found only under its own message.
      assert.isTrue(Option.isNone(yield* blobs.attachment(id + 1_000, listed[0]!.id, yield* access.mailboxes(owner.accountId, "read", "m"))))
    }))

  it.effect("writes attachments and removes them again (a retried message's earlier ones)", () =>
    Effect.gen(function*() {
      const blobs = yield* BlobStore
      const mailbox = yield* seedAlias("blob.rewrite")
      const id = yield* acceptRaw(mailbox, everyByte(50))
      const file = (position: number) => ({
        message_id: id,
        position,
        filename: `f${position}.bin`,
        mime_type: "application/octet-stream",
        size_bytes: 3,
        dangerous: false,
        previewable: false,
        content_id: null,
        content: Uint8Array.of(position, 0, 255)
      })
      yield* blobs.writeAttachments([file(0), file(1)])
      assert.deepStrictEqual((yield* blobs.attachments(id)).map((a) => a.filename), ["f0.bin", "f1.bin"])
      yield* blobs.removeAttachments([id])
      assert.deepStrictEqual(yield* blobs.attachments(id), [])
    }))

  it.effect("a destroyed message takes its raw bytes and attachments with it", () =>
    Effect.gen(function*() {
      const blobs = yield* BlobStore
      const sql = yield* SqlClient.SqlClient
      const mailbox = yield* seedAlias("blob.destroyed")
      const id = yield* deliverMail(mailbox, {
        subject: "soon gone",
        text: "bye",
        attachments: [{ filename: "a.txt", contentType: "text/plain", contentBase64: Buffer.from("a").toString("base64") }]
      })
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`DELETE FROM messages WHERE id = ${id}`
        yield* blobs.messagesDestroyed([id])
      }))
      assert.isTrue(Option.isNone(yield* blobs.readRaw(id)))
      assert.deepStrictEqual(yield* blobs.attachments(id), [])
    }))
})
