/**
 * BlobStore: the one owner of message bytes (architecture.md, "BlobStore"): the exact raw bytes
 * of each message (`message_raw`) and its attachments (`attachments`, their content with what
 * describes it). The live layer keeps them in PostgreSQL, beside the message rows; an
 * S3-compatible layer would keep the bytes under keys, with these tables holding the keys, and
 * nothing that calls it would change.
 *
 * Raw bytes are stored zstd-compressed (`message_raw.zstd`, migration 0028; issue #36), once:
 * `compressRaw` makes them before the accepting statement and every reader gets the bytes as
 * received. Rows stored before are read as they are, and converted in the background
 * (`StorageCompaction`).
 *
 * Readers ask it for bytes; a reader on behalf of an account passes the condition on the message
 * row `m` that its mailboxes meet (MailboxAccess), so the bytes of mail the account does not
 * reach are never read. Writers compose it into their own transactions: the accepting statement
 * takes the raw bytes as a fragment (a big message staged piece by piece first, `stageRaw`), the
 * pipeline's store writes attachments, and a message destroyed takes its bytes with it.
 */
import { constants as zlibConstants, createZstdCompress, zstdCompressSync, zstdDecompress, zstdDecompressSync } from "node:zlib"
import { memoryStep } from "@burnbox/domain/platform/MemorySteps"
import { PgTypes } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Result, Schema } from "effect"
import { SqlClient, type SqlError, SqlSchema, type Statement } from "effect/sql"
import { rowsDecoder } from "./Rows.ts"

/**
 * Raw bytes above this size go to PostgreSQL in pieces of this size (staged in a large object
 * inside the accepting transaction), so the driver never builds one protocol frame of the
 * whole message: a 15 MB message costs the process its own bytes plus a piece, not three copies.
 */
export const RawPieceBytes = 1024 * 1024
/**
 * The bytes of one piece written to a large object (`stage`) or read back (`readRaw`): a little
 * under RawPieceBytes, so the driver's buffer for the message that carries it, which it sizes in
 * powers of two, is 1 MiB and not 2 MiB.
 */
const StagePieceBytes = RawPieceBytes - 16 * 1024
/** At most this many parts of a piece are joined by PostgreSQL (`||`); more are joined before. */
const MaxJoinedParts = 32

/**
 * The raw bytes of one accepted message, zstd-compressed (`compressRaw`): `whole` when the
 * compressed bytes are small, else their `pieces`, staged before the insert. `size` is the
 * message's own size (as received: quotas and counters count it).
 */
export interface RawBytes {
  readonly size: number
  readonly whole: Uint8Array | null
  readonly pieces: ReadonlyArray<Uint8Array>
}

/**
 * Raw bytes up to this size are compressed and decompressed on the calling thread (tens of
 * microseconds for the usual mail); larger ones in libuv's thread pool, off the event loop.
 */
export const InlineZstdBytes = 256 * 1024
/** zstd's default level: ~3x faster than PostgreSQL's pglz, and smaller. */
const zstdOptions = { params: { [zlibConstants.ZSTD_c_compressionLevel]: 3 } }

const compressedPieces = (pieces: ReadonlyArray<Uint8Array>) =>
  Effect.callback<Array<Uint8Array>>((resume) => {
    const out: Array<Uint8Array> = []
    const zstd = createZstdCompress({ ...zstdOptions, chunkSize: 256 * 1024 })
    zstd.on("data", (chunk: Uint8Array) => out.push(chunk))
    zstd.on("end", () => resume(Effect.succeed(out)))
    zstd.on("error", (error) => resume(Effect.die(error)))
    for (const piece of pieces) zstd.write(piece)
    zstd.end()
  })

/**
 * The exact bytes as received (one array, or the pieces in order: a big message need never be
 * joined), compressed as `message_raw` keeps them: a big message in the thread pool, its
 * compressed pieces as the compressor makes them.
 */
export const compressRaw = (raw: Uint8Array | ReadonlyArray<Uint8Array>): Effect.Effect<RawBytes> => {
  const list = raw instanceof Uint8Array ? [raw] : raw
  const size = list.reduce((n, c) => n + c.byteLength, 0)
  if (size <= InlineZstdBytes) {
    return Effect.sync(() => ({ size, whole: zstdCompressSync(list.length === 1 ? list[0]! : Buffer.concat(list, size), zstdOptions), pieces: [] }))
  }
  return compressedPieces(list).pipe(Effect.map((pieces) => {
    const stored = pieces.reduce((n, c) => n + c.byteLength, 0)
    return stored <= RawPieceBytes ? { size, whole: Buffer.concat(pieces, stored), pieces: [] } : { size, whole: null, pieces }
  }))
}

/**
 * The bytes as received from the bytes `message_raw` holds (`zstd`: compressed; else as they
 * were stored before migration 0028). `size`: the message's own size, which decides whether
 * the work is done on this thread.
 */
export const inflateRaw = (stored: Uint8Array, zstd: boolean, size: number): Effect.Effect<Uint8Array> =>
  !zstd
    ? Effect.succeed(stored)
    : size <= InlineZstdBytes
    ? Effect.sync((): Uint8Array => zstdDecompressSync(stored))
    : Effect.callback<Uint8Array>((resume) =>
      zstdDecompress(stored, (error, result) => resume(error === null ? Effect.succeed(result) : Effect.die(error)))
    )

/** A message's raw bytes as `message_raw` holds them. */
export interface StoredRaw {
  readonly bytes: Uint8Array
  /** Compressed (give them to `inflateRaw`), else as received (stored before migration 0028). */
  readonly zstd: boolean
  /** The message's own size. */
  readonly size: number
}

/** The raw bytes of a batch of accepted messages, ready for the accepting statement (`stageRaw`). */
export interface StagedRaw {
  readonly raws: ReadonlyArray<RawBytes>
  /** The large object holding each big message's bytes, by position in `raws`; null for a whole one. */
  readonly objects: ReadonlyArray<number | null>
}

/** What `compressStoredRaws` did. */
export interface CompressedRaws {
  readonly count: number
  readonly bytesBefore: number
  readonly bytesAfter: number
}

/** What describes an attachment (MessageDetail.attachments). */
export const AttachmentInfo = Schema.Struct({
  id: Schema.Int,
  filename: Schema.String,
  mime_type: Schema.String,
  size_bytes: Schema.Int,
  dangerous: Schema.Boolean,
  previewable: Schema.Boolean
})
export type AttachmentInfo = typeof AttachmentInfo.Type

/** An attachment with its bytes. */
export const StoredAttachment = Schema.Struct({
  filename: Schema.String,
  mime_type: Schema.String,
  dangerous: Schema.Boolean,
  previewable: Schema.Boolean,
  content: Schema.Uint8Array
})
export type StoredAttachment = typeof StoredAttachment.Type

/** An attachment the pipeline found in a message, to store (a row of `attachments`, so a type, not an interface: `sql.insert` takes records). */
export type NewAttachment = {
  readonly message_id: number
  readonly position: number
  readonly filename: string
  readonly mime_type: string
  readonly size_bytes: number
  readonly dangerous: boolean
  readonly previewable: boolean
  readonly content_id: string | null
  readonly content: Uint8Array
}

/** Attachments one insert writes (9 parameters each, well under PostgreSQL's 32767). */
const AttachmentsPerInsert = 1_000

const bytea = (values: ReadonlyArray<Uint8Array | null>) => PgTypes.array(values, PgTypes.OID.bytea).pipe(Result.getOrThrow)
const oids = (values: ReadonlyArray<number | null>) => PgTypes.array(values, PgTypes.OID.oid).pipe(Result.getOrThrow)

export class BlobStore extends Context.Service<BlobStore, {
  /**
   * The raw bytes of a message. With `reachable` (a condition on the message row `m`, e.g.
   * MailboxAccess.mailboxes), only when the message meets it.
   */
  readonly readRaw: (messageId: number, options?: { readonly reachable: Statement.Fragment }) => Effect.Effect<Option.Option<Uint8Array>>
  /** The raw bytes of a message as stored (compressed or not: `inflateRaw` makes them the bytes as received). */
  readonly readStoredRaw: (messageId: number) => Effect.Effect<Option.Option<StoredRaw>>
  /**
   * A claim's raw bytes, read with its rows: the select-list items `has_raw`, `raw` (the stored
   * bytes when at most `inlineBytes` of them, else null: read them with `readRaw`) and `raw_zstd`
   * (give `raw` to `inflateRaw` with it) and the join they need, for rows whose message id is
   * `messageId` (a column reference).
   */
  readonly inlineRaw: (messageId: string, inlineBytes: number) => { readonly columns: Statement.Fragment; readonly join: Statement.Fragment }
  /** What describes each attachment of a message, in order. */
  readonly attachments: (messageId: number) => Effect.Effect<ReadonlyArray<AttachmentInfo>>
  /** One attachment with its bytes, when its message meets `reachable` (a condition on the message row `m`). */
  readonly attachment: (messageId: number, attachmentId: number, reachable: Statement.Fragment) => Effect.Effect<Option.Option<StoredAttachment>>

  /**
   * Writes the bytes of the big messages of a batch ahead of the accepting statement, a piece
   * per statement, inside the accepting transaction (a rollback takes them away); `unstageRaw`
   * once the statement has copied them.
   */
  readonly stageRaw: (raws: ReadonlyArray<RawBytes>) => Effect.Effect<StagedRaw, SqlError.SqlError>
  readonly unstageRaw: (staged: StagedRaw) => Effect.Effect<void, SqlError.SqlError>
  /**
   * Writes `pieces` in order to a new large object, about a MiB per statement, in the caller's
   * transaction; answers its oid, which a statement reads with `lo_get(oid)` and `unstage` removes.
   * Bytes a statement needs whole, without the driver copying them into one protocol message.
   */
  readonly stage: (pieces: ReadonlyArray<Uint8Array>) => Effect.Effect<number, SqlError.SqlError>
  readonly unstage: (objects: ReadonlyArray<number>) => Effect.Effect<void, SqlError.SqlError>
  /**
   * A data-modifying step that stores the raw bytes of a batch: for each row of `input` (`ord`,
   * and `n`, the message's place in `staged.raws` from 1) the message `ids` gave it (`ord`, `id`).
   */
  readonly insertRawBatch: (staged: StagedRaw) => Statement.Fragment
  /** A data-modifying step that stores the raw bytes of `staged.raws[index]` for the message of `message` (a CTE with `id`). */
  readonly insertRawOne: (staged: StagedRaw, index: number, message: string) => Statement.Fragment

  /**
   * Compresses the raw bytes stored before migration 0028 of the messages with ids in
   * (`afterId`, `upTo`], in the caller's transaction (their rows locked until it commits; readers
   * do not wait for them). Answers how many, and their bytes before and after.
   */
  readonly compressStoredRaws: (afterId: number, upTo: number) => Effect.Effect<CompressedRaws, SqlError.SqlError>

  /** Stores attachments; in the caller's transaction. */
  readonly writeAttachments: (attachments: ReadonlyArray<NewAttachment>) => Effect.Effect<void, SqlError.SqlError>
  /** Removes the attachments of messages (stored by an earlier attempt); in the caller's transaction. */
  readonly removeAttachments: (messageIds: ReadonlyArray<number>) => Effect.Effect<void, SqlError.SqlError>
  /**
   * The messages are being destroyed in the caller's transaction. In PostgreSQL their bytes go
   * with their rows (message_raw and attachments reference messages ON DELETE CASCADE): nothing
   * to do. An object store removes their objects here.
   */
  readonly messagesDestroyed: (messageIds: ReadonlyArray<number>) => Effect.Effect<void, SqlError.SqlError>

  // Export archives (#33): a ZIP written piece by piece as it is built, read back in ranges.
  /** The raw bytes of messages, by id (those that have them). */
  readonly readRaws: (messageIds: ReadonlyArray<number>) => Effect.Effect<ReadonlyMap<number, Uint8Array>>
  /** A new, empty archive; answers its key. */
  readonly createArchive: Effect.Effect<number>
  /** Writes `bytes` at `offset` of the archive. */
  readonly writeArchive: (archive: number, offset: number, bytes: Uint8Array) => Effect.Effect<void>
  /** `length` bytes of the archive from `offset` (fewer at its end). */
  readonly readArchive: (archive: number, offset: number, length: number) => Effect.Effect<Uint8Array>
  /** Deletes the archive (nothing when it is gone already). */
  readonly removeArchive: (archive: number) => Effect.Effect<void>
}>()("burnbox/BlobStore") {
  /** Message bytes in PostgreSQL (`message_raw`, `attachments`). */
  static readonly layer = Layer.effect(BlobStore, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    // A raw message up to RawPieceBytes comes whole with its size; a larger one is read a piece at
    // a time into one array of its size: read whole, the driver would hold its protocol message
    // (the size, grown by doubling) and then copy the bytes out of it, ~3 times the message.
    const decodeSized = rowsDecoder(Schema.Struct({
      size: Schema.Int,
      stored: Schema.Int,
      zstd: Schema.Boolean,
      raw: Schema.NullOr(Schema.Uint8Array)
    }))
    const decodePiece = rowsDecoder(Schema.Struct({ piece: Schema.NullOr(Schema.Uint8Array) }))
    const readStored = (messageId: number, options?: { readonly reachable: Statement.Fragment }): Effect.Effect<Option.Option<StoredRaw>, SqlError.SqlError> =>
      Effect.gen(function*() {
        const [found] = yield* sql`
        SELECT m.size_bytes AS size, octet_length(r.raw) AS stored, r.zstd,
               CASE WHEN octet_length(r.raw) <= ${RawPieceBytes} THEN r.raw END AS raw
        FROM message_raw r JOIN messages m ON m.id = r.message_id
        WHERE m.id = ${messageId} AND ${options?.reachable ?? sql`true`}`.pipe(Effect.flatMap(decodeSized))
        if (found === undefined) return Option.none<StoredRaw>()
        if (found.raw !== null) return Option.some({ bytes: found.raw, zstd: found.zstd, size: found.size })
        const whole = new Uint8Array(found.stored)
        for (let offset = 0; offset < found.stored; offset += StagePieceBytes) {
          const [row] = yield* sql`
            SELECT substring(raw FROM ${offset + 1} FOR ${StagePieceBytes}) AS piece FROM message_raw
            WHERE message_id = ${messageId} AND zstd = ${found.zstd}`.pipe(Effect.flatMap(decodePiece))
          // Gone (the message was deleted) or converted meanwhile: read again, or as if it had never been there.
          if (row === undefined || row.piece === null || row.piece.byteLength !== Math.min(StagePieceBytes, found.stored - offset)) {
            return found.zstd ? Option.none<StoredRaw>() : yield* readStored(messageId, options)
          }
          whole.set(row.piece, offset)
        }
        memoryStep("main.read.stored", found.size)
        return Option.some({ bytes: whole, zstd: found.zstd, size: found.size })
      })
    const readRaw = (messageId: number, options?: { readonly reachable: Statement.Fragment }) =>
      readStored(messageId, options).pipe(Effect.flatMap(Option.match({
        onNone: () => Effect.succeedNone,
        onSome: (stored) => Effect.asSome(inflateRaw(stored.bytes, stored.zstd, stored.size))
      })))
    const readRawOrDie = (messageId: number, options?: { readonly reachable: Statement.Fragment }) =>
      readRaw(messageId, options).pipe(Effect.orDie)
    const readStoredRaw = (messageId: number) => readStored(messageId).pipe(Effect.orDie)

    const inlineRaw = (messageId: string, inlineBytes: number) => ({
      columns: sql`(r.message_id IS NOT NULL) AS has_raw,
               CASE WHEN octet_length(r.raw) <= ${inlineBytes} THEN r.raw END AS raw, r.zstd AS raw_zstd`,
      join: sql`LEFT JOIN message_raw r ON r.message_id = ${sql.literal(messageId)}`
    })

    const attachmentsOf = SqlSchema.findAll({
      Request: Schema.Int,
      Result: AttachmentInfo,
      execute: (messageId) => sql`
          SELECT id, filename, mime_type, size_bytes, dangerous, previewable FROM attachments WHERE message_id = ${messageId} ORDER BY position`
    })
    const attachments = (messageId: number) => attachmentsOf(messageId).pipe(Effect.orDie)

    const decodeAttachment = rowsDecoder(StoredAttachment)
    const attachment = (messageId: number, attachmentId: number, reachable: Statement.Fragment) =>
      sql`
        SELECT a.filename, a.mime_type, a.dangerous, a.previewable, a.content
        FROM attachments a JOIN messages m ON m.id = a.message_id
        WHERE a.id = ${attachmentId} AND a.message_id = ${messageId} AND ${reachable}`.pipe(
        Effect.flatMap(decodeAttachment),
        Effect.map((rows) => Option.fromUndefinedOr(rows[0])),
        Effect.orDie
      )

    const decodeOid = rowsDecoder(Schema.Struct({ oid: Schema.Number }))
    const createLargeObject = sql`SELECT lo_create(0) AS oid`.pipe(Effect.flatMap(decodeOid), Effect.map((rows) => rows[0]!.oid))
    /** Writes `pieces`, in order, to a new large object, StagePieceBytes per statement; answers its oid. */
    const stage = (pieces: ReadonlyArray<Uint8Array>) =>
      Effect.gen(function*() {
        const oid = yield* createLargeObject
        let offset = 0
        let piece: Array<Uint8Array> = []
        let pieceBytes = 0
        const flush = Effect.suspend(() => {
          if (pieceBytes === 0) return Effect.void
          // The piece's parts (SMTP chunks are ~64 KiB) are joined by PostgreSQL, not copied into
          // one array here: the driver copies each into its bind message in any case. Many small
          // parts (a sender writing in small segments) are joined here, to keep the statement short.
          const bytes = piece.length <= MaxJoinedParts
            ? sql.join(" || ", false)(piece.map((part) => sql`${part}`))
            : sql`${Buffer.concat(piece, pieceBytes)}`
          const at = offset
          offset += pieceBytes
          piece = []
          pieceBytes = 0
          return sql`SELECT lo_put(${PgTypes.oid(oid)}, ${at}, ${bytes})`.pipe(Effect.asVoid)
        })
        for (const chunk of pieces) {
          for (let start = 0; start < chunk.byteLength;) {
            const take = Math.min(chunk.byteLength - start, StagePieceBytes - pieceBytes)
            piece.push(chunk.subarray(start, start + take))
            pieceBytes += take
            start += take
            if (pieceBytes === StagePieceBytes) yield* flush
          }
        }
        yield* flush
        return oid
      })
    const stageRaw = (raws: ReadonlyArray<RawBytes>) =>
      Effect.gen(function*() {
        const objects: Array<number | null> = []
        for (const raw of raws) objects.push(raw.whole === null ? yield* stage(raw.pieces) : null)
        return { raws, objects } satisfies StagedRaw
      })
    const unstage = (objects: ReadonlyArray<number>) =>
      objects.length === 0 ? Effect.void : sql`SELECT lo_unlink(o) FROM unnest(${oids(objects)}) AS o`.pipe(Effect.asVoid)
    const unstageRaw = (staged: StagedRaw) => unstage(staged.objects.filter((oid) => oid !== null))

    const insertRawBatch = (staged: StagedRaw) =>
      sql`
            INSERT INTO message_raw (message_id, raw, zstd)
            SELECT ids.id, coalesce(r.raw, lo_get(r.staged)), true FROM input i JOIN ids USING (ord)
            JOIN unnest(${bytea(staged.raws.map((raw) => raw.whole))},
                        ${oids(staged.objects)})
              WITH ORDINALITY AS r(raw, staged, n) ON r.n = i.n`
    const insertRawOne = (staged: StagedRaw, index: number, message: string) =>
      sql`
              INSERT INTO message_raw (message_id, raw, zstd)
              SELECT id, coalesce(${staged.raws[index]!.whole}::bytea, lo_get(${PgTypes.oid(staged.objects[index] ?? null)})), true
              FROM ${sql.literal(message)}`

    const decodeStoredRaws = rowsDecoder(Schema.Struct({
      message_id: Schema.Int,
      stored: Schema.Int,
      raw: Schema.NullOr(Schema.Uint8Array)
    }))
    const compressStoredRaws = (afterId: number, upTo: number) =>
      Effect.gen(function*() {
        const rows = yield* sql`
          SELECT message_id, octet_length(raw) AS stored, CASE WHEN octet_length(raw) <= ${InlineZstdBytes} THEN raw END AS raw
          FROM message_raw WHERE message_id > ${afterId} AND message_id <= ${upTo} AND NOT zstd
          ORDER BY message_id FOR UPDATE`.pipe(Effect.flatMap(decodeStoredRaws))
        let bytesAfter = 0
        const whole: Array<{ readonly id: number; readonly raw: Uint8Array }> = []
        for (const row of rows) {
          // A big one alone, read a piece at a time and written from a large object (as accepted).
          const bytes = row.raw ?? Option.getOrThrow(yield* readRaw(row.message_id))
          const compressed = yield* compressRaw(bytes)
          if (compressed.whole !== null) {
            whole.push({ id: row.message_id, raw: compressed.whole })
            bytesAfter += compressed.whole.byteLength
            continue
          }
          const oid = yield* stage(compressed.pieces)
          yield* sql`UPDATE message_raw SET raw = lo_get(${PgTypes.oid(oid)}), zstd = true WHERE message_id = ${row.message_id}`
          yield* unstage([oid])
          bytesAfter += compressed.pieces.reduce((n, piece) => n + piece.byteLength, 0)
        }
        if (whole.length > 0) {
          yield* sql`
            UPDATE message_raw r SET raw = c.raw, zstd = true
            FROM unnest(${whole.map((w) => w.id)}::int4[], ${bytea(whole.map((w) => w.raw))}) AS c(id, raw)
            WHERE r.message_id = c.id`
        }
        return { count: rows.length, bytesBefore: rows.reduce((n, row) => n + row.stored, 0), bytesAfter } satisfies CompressedRaws
      })

    // An attachment over RawPieceBytes is staged in a large object a piece at a time and copied
    // from it by its insert: as a parameter, the driver would copy it twice more (its bind message,
    // grown by doubling, and the frame around it).
    const writeAttachments = (rows: ReadonlyArray<NewAttachment>) =>
      Effect.gen(function*() {
        const small = rows.filter((row) => row.content.byteLength <= RawPieceBytes)
        for (let i = 0; i < small.length; i += AttachmentsPerInsert) {
          const [first, ...rest] = small.slice(i, i + AttachmentsPerInsert)
          yield* sql`INSERT INTO attachments ${sql.insert([first!, ...rest])}`
        }
        for (const { content, ...row } of rows.filter((big) => big.content.byteLength > RawPieceBytes)) {
          const oid = yield* stage([content])
          yield* sql`
            INSERT INTO attachments (message_id, position, filename, mime_type, size_bytes, dangerous, previewable, content_id, content)
            VALUES (${row.message_id}, ${row.position}, ${row.filename}, ${row.mime_type}, ${row.size_bytes}, ${row.dangerous},
                    ${row.previewable}, ${row.content_id}, lo_get(${PgTypes.oid(oid)}))`
          yield* unstage([oid])
        }
      })
    const removeAttachments = (messageIds: ReadonlyArray<number>) =>
      messageIds.length === 0 ? Effect.void : sql`DELETE FROM attachments WHERE message_id IN ${sql.in(messageIds)}`.pipe(Effect.asVoid)

    const RawOf = Schema.Struct({ message_id: Schema.Int, raw: Schema.Uint8Array, zstd: Schema.Boolean, size: Schema.Int })
    const decodeRaws = rowsDecoder(RawOf)
    const readRaws = (messageIds: ReadonlyArray<number>) =>
      messageIds.length === 0
        ? Effect.succeed(new Map<number, Uint8Array>())
        : sql`
          SELECT r.message_id, r.raw, r.zstd, m.size_bytes AS size
          FROM message_raw r JOIN messages m ON m.id = r.message_id WHERE r.message_id IN ${sql.in(messageIds)}`.pipe(
          Effect.flatMap(decodeRaws),
          Effect.flatMap((rows) => Effect.forEach(rows, (row) => Effect.map(inflateRaw(row.raw, row.zstd, row.size), (raw) => [row.message_id, raw] as const))),
          Effect.map((entries) => new Map(entries)),
          Effect.orDie
        )
    // Archives are large objects: written and read a piece at a time, never whole in memory.
    const createArchive = createLargeObject.pipe(Effect.orDie)
    const writeArchive = (archive: number, offset: number, bytes: Uint8Array) =>
      sql`SELECT lo_put(${PgTypes.oid(archive)}, ${offset}, ${bytes})`.pipe(Effect.asVoid, Effect.orDie)
    const decodeArchivePiece = rowsDecoder(Schema.Struct({ piece: Schema.Uint8Array }))
    const readArchive = (archive: number, offset: number, length: number) =>
      sql`SELECT lo_get(${PgTypes.oid(archive)}, ${offset}, ${length}) AS piece`.pipe(
        Effect.flatMap(decodeArchivePiece),
        Effect.map((rows) => rows[0]!.piece),
        Effect.orDie
      )
    const removeArchive = (archive: number) =>
      sql`SELECT lo_unlink(oid) FROM pg_largeobject_metadata WHERE oid = ${PgTypes.oid(archive)}`.pipe(Effect.asVoid, Effect.orDie)

    return BlobStore.of({
      readRaws,
      createArchive,
      writeArchive,
      readArchive,
      removeArchive,
      readRaw: readRawOrDie,
      readStoredRaw,
      inlineRaw,
      attachments,
      attachment,
      stageRaw,
      unstageRaw,
      stage,
      unstage,
      insertRawBatch,
      insertRawOne,
      compressStoredRaws,
      writeAttachments,
      removeAttachments,
      messagesDestroyed: () => Effect.void
    })
  }))
}
