/**
 * The CPU-heavy part of processing one message, as it runs in a mail worker thread
 * (MailWorkThread.ts, driven by MailWorkers.ts): postal-mime parsing, the whole analysis
 * (sanitized HTML, links, codes, snippet, search text) and the DKIM verifier's reading of the
 * message. Everything that crosses the thread boundary is plain data: the raw bytes in, the
 * parsed message, its analysis and the DKIM outcome out, and DNS questions and answers for the
 * DKIM keys in between.
 *
 * No Effect here: this module is what a thread loads before it says it is ready.
 */
import { zstdDecompressSync } from "node:zlib"
// The modules themselves, not mail/index: it also holds test-message validation, which loads Effect and
// the schemas (~200 ms more for every thread to start).
import { analyzeMessage } from "@burnbox/domain/mail/analyze"
import { parseMessage } from "@burnbox/domain/mail/parse"
import { type WorkedMail, workedMail } from "@burnbox/domain/mail/worked"
import { memoryStep } from "@burnbox/domain/platform/MemorySteps"
import { type DkimOutcome, type Resolve, verifyDkim } from "./Dkim.ts"

/** One message's work. `dkim` is null when there is no sending server to check (injected test mail). */
export interface MailTask {
  /** The message's bytes; zstd-compressed (as `message_raw` keeps them) when `inflateTo` is set. */
  readonly raw: Uint8Array
  /**
   * Set for a big message read as stored: its own size, to which the thread inflates `raw` before
   * the work, so the main thread never holds the inflated bytes (nor their garbage).
   */
  readonly inflateTo?: number
  readonly dkim: { readonly sender: string | null } | null
}

export type MailWorkResult =
  | { readonly ok: false; readonly reason: string; readonly detail: string }
  | {
    readonly ok: true
    /** Its digest, attachments and encoded columns: no text of it becomes a string on the main thread. */
    readonly mail: WorkedMail
    readonly dkim: DkimOutcome | null
  }

/** Runs a message's parsing or its analysis (CPU work, no waiting): at once, or in a turn (MailWorkers' inline work). */
export type WorkTurn = <A>(work: () => Promise<A>) => Promise<A>

const atOnce: WorkTurn = (work) => work()

/**
 * zstd-compressed bytes inflated into one array of exactly `size` bytes, with a buffer of its own
 * (so it can be parsed without a copy): with zlib's output chunk that size, the bytes are written
 * once, not into 64 KiB chunks joined afterwards (twice the size; measured for 15 MB: +37 MiB of
 * RSS against +17). After a full chunk zlib allocates one more, which nothing writes (so none of
 * it becomes resident). Bytes of another size than `size` come out right all the same.
 */
export const inflateExact = (compressed: Uint8Array, size: number): Uint8Array =>
  zstdDecompressSync(compressed, { chunkSize: Math.max(64, size) })

/**
 * Parses, verifies DKIM and analyzes, in that order; a message that cannot be parsed stops at
 * the first. The parsing and the analysis run in `turn` (MailWorkers' inline work takes turns on
 * its event loop), DKIM (which may wait for its key lookups) between them, outside a turn. With
 * `release` (the thread that owns `task.raw`), the raw bytes are freed at once (their buffer
 * detached) when nothing reads them any more, before the analysis and the columns: otherwise they
 * stay until the thread's next garbage collection, a 15 MB message's bytes beside its text,
 * renderings and columns.
 */
export const doMailWork = async (
  task: MailTask,
  resolve: Resolve,
  options: { readonly release?: boolean; readonly turn?: WorkTurn } = {}
): Promise<MailWorkResult> => {
  const turn = options.turn ?? atOnce
  const size = task.inflateTo ?? task.raw.byteLength
  memoryStep("thread.start", size)
  const raw = task.inflateTo === undefined ? task.raw : inflateExact(task.raw, task.inflateTo)
  memoryStep("thread.inflated", size)
  const result = await turn(() => parseMessage(raw))
  memoryStep("thread.parsed", size)
  if (!result.ok) return { ok: false, reason: result.reason, detail: result.detail }
  const dkim = task.dkim === null ? null : await verifyDkim(raw, { resolver: resolve, sender: task.dkim.sender })
  memoryStep("thread.dkim", size)
  // The parser copies what it keeps (attachments, text): checked all the same, as freeing bytes a result still shows would empty it.
  if ((options.release === true || raw !== task.raw) && !result.message.attachments.some((attachment) => attachment.content.buffer === raw.buffer)) {
    freeBytes(raw)
  }
  const mail = await turn(async () => {
    const analysis = analyzeMessage(result.message)
    memoryStep("thread.analyzed", size)
    return workedMail(result.message, analysis)
  })
  memoryStep("thread.columns", size)
  return { ok: true, mail, dkim }
}

/** Buffers smaller than this are left to the garbage collector. */
const FreeFromBytes = 1024 * 1024

/**
 * Frees the memory of `bytes` now, not at the thread's next garbage collection (which comes late
 * on a thread that allocates little after a big message), by detaching its buffer
 * (`transfer(0)`): only a big array that is the whole of its buffer, which the caller owns and
 * no longer reads; every view of the buffer becomes empty.
 */
export const freeBytes = (bytes: Uint8Array): void => {
  const buffer = bytes.buffer
  if (!(buffer instanceof ArrayBuffer) || buffer.detached || buffer.byteLength < FreeFromBytes) return
  if (bytes.byteOffset !== 0 || bytes.byteLength !== buffer.byteLength) return
  buffer.transfer(0)
}

// -- small plain mail, worked where it is ------------------------------------------------------

/**
 * What makes a message small and plain enough to be worked on the calling (main) thread: plain
 * text of at most 8 KB, whose work is then bounded by these counts whatever the bytes are
 * (bench:hop measures the worst such message: about 1 ms), while a thread hop would cost more
 * than the work itself (bench:hop: ordinary 5 KB mail takes ~0.07 ms to work on; through a
 * thread ~0.19 ms and twice the CPU). HTML is never worked here: sanitizing costs ~0.25 ms per KB.
 */
export const InlineLimits = {
  /** The whole message, raw. No HTML at all either: the word `html` anywhere sends it to a thread. */
  bytes: 8 * 1024,
  /** `<` anywhere: bounds HTML elements, their nesting and angle-bracket addresses. */
  angleBrackets: 32,
  /** Lines: bounds header lines, soft line breaks of quoted-printable, base64 lines. */
  lines: 400,
  /** Bytes of one line (RFC 5322 allows 998 and the line end). */
  lineBytes: 1000,
  /** Lines starting with `--`: bounds MIME parts and their nesting. */
  boundaryLines: 8
} as const

/** `html`, in any case, at `i`. */
const isHtmlAt = (raw: Uint8Array, i: number) =>
  ((raw[i + 1] ?? 0) | 0x20) === 0x74 && ((raw[i + 2] ?? 0) | 0x20) === 0x6d && ((raw[i + 3] ?? 0) | 0x20) === 0x6c

/**
 * Whether `raw` is within `InlineLimits`: one pass over the bytes, stopping at the first count
 * past its limit. Anything else (larger, or with more markup, lines, or parts) goes to a thread.
 */
export const workableInline = (raw: Uint8Array): boolean => {
  if (raw.byteLength > InlineLimits.bytes) return false
  let angles = 0
  let lines = 0
  let boundaries = 0
  let lineStart = 0
  for (let i = 0; i < raw.byteLength; i++) {
    const byte = raw[i]!
    if (byte === 0x3c) {
      if (++angles > InlineLimits.angleBrackets) return false
    } else if ((byte | 0x20) === 0x68 && isHtmlAt(raw, i)) {
      return false
    } else if (byte === 0x0a) {
      if (i - lineStart > InlineLimits.lineBytes || ++lines > InlineLimits.lines) return false
      if (raw[lineStart] === 0x2d && raw[lineStart + 1] === 0x2d && ++boundaries > InlineLimits.boundaryLines) return false
      lineStart = i + 1
    }
  }
  return raw.byteLength - lineStart <= InlineLimits.lineBytes
}

// -- the messages between the main thread and a mail worker thread ----------------------------

/** One task as handed to a thread; `seq` numbers the tasks of one thread, in the order handed over. */
export interface ThreadJob {
  readonly seq: number
  readonly task: MailTask
}

/** What a thread is started with (`workerData`). */
export interface ThreadOptions {
  /**
   * One BigInt64: the thread does not start a task whose `seq` is at most this. The main thread
   * raises it when it hands the tasks queued behind a slow one to another thread.
   */
  readonly withdrawn: SharedArrayBuffer
}

export type ToThread =
  /** Tasks to do one after the other, after those handed over before. */
  | { readonly type: "work"; readonly jobs: ReadonlyArray<ThreadJob> }
  | { readonly type: "dns"; readonly id: number; readonly answer: unknown }
  | { readonly type: "dns"; readonly id: number; readonly error: { readonly message: string; readonly code: string | null } }

export type FromThread =
  /** Started; `tid` is its kernel thread id (Linux), null elsewhere. */
  | { readonly type: "ready"; readonly tid: number | null }
  | { readonly type: "done"; readonly seq: number; readonly result: MailWorkResult }
  /** The work threw: a bug, not the message's fault (the pipeline retries, then gives up). */
  | { readonly type: "crashed"; readonly seq: number; readonly message: string }
  | { readonly type: "dns"; readonly id: number; readonly name: string; readonly rrtype: string }

/**
 * `bytes` as a view of a whole ArrayBuffer of its own, so that buffer can be transferred to
 * the other thread instead of copied: itself when it is one already, else a copy. (Structured
 * clone would copy a view's whole underlying buffer, e.g. all of a sliced Buffer; and Node's
 * pool of small Buffers cannot be transferred at all.)
 */
export const ownedBytes = (bytes: Uint8Array): Uint8Array<ArrayBuffer> =>
  bytes.buffer instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
    ? new Uint8Array(bytes.buffer)
    // A copy into a new ArrayBuffer (Buffer#slice would share the memory).
    : new Uint8Array(bytes)

/** The result with each attachment's bytes and the columns in buffers of their own, and those buffers to transfer. */
export const transferableResult = (result: MailWorkResult): { readonly result: MailWorkResult; readonly transfer: Array<ArrayBuffer> } => {
  if (!result.ok) return { result, transfer: [] }
  const attachments = result.mail.attachments.map((attachment) => ({ ...attachment, content: ownedBytes(attachment.content) }))
  const columns = ownedBytes(result.mail.columns)
  return {
    result: { ...result, mail: { ...result.mail, attachments, columns } },
    transfer: [...new Set([...attachments.map((attachment) => attachment.content.buffer), columns.buffer])]
  }
}
