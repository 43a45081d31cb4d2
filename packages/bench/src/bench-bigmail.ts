/**
 * Big mail: burnbox's RSS growth while 15 MB messages are accepted (SMTP DATA -> 250) and while
 * they are worked (the pipeline: parse, renderings, index), for 1 and for several at once.
 * Goals (issue #36): growth <= 3x the bytes in flight while accepting, <= 6x while working; several
 * at once are bounded by the work budget (the big-mail budget of MailWorkers).
 *
 * Usage: pnpm bench:bigmail
 *
 * What it does, for each kind of big message (BIGMAIL_KINDS, default "attachment,text") and each
 * number sent at once (BIGMAIL_CONCURRENCY, default "1,4"), each on a fresh service:
 * 1. starts `burnbox start` (API, SMTP ingest and pipeline in one node process) as
 *    process.execPath directly, so the child's pid is the node process whose memory is measured;
 *    creates a pro account (quota raised), a token and an alias;
 * 2. sends one small message and waits until it is processed (code paths warm), waits 2 s, then
 *    samples VmRSS for 1 s: the baseline is the median; tries to reset the kernel's peak-RSS
 *    mark (VmHWM) with /proc/<pid>/clear_refs (not every kernel allows it);
 * 3. builds the big messages (just under the 15,728,640-byte limit: BIGMAIL_BYTES, default
 *    15,728,000), then sends them at once over one SMTP connection each while sampling VmRSS every
 *    5 ms, through the 250s and until the pipeline has processed them (processing_status in
 *    PostgreSQL), and 3 s after; kinds: "attachment" = a short text part with a code plus a base64
 *    attachment filling the rest (the usual shape of a big mail), "text" = a plain-text body of
 *    that size in 900-character lines;
 * 4. prints baseline, growth until the last 250 ("accepted"), growth over the whole run ("worked":
 *    the largest sample from the first byte until 3 s after the last is processed, or VmHWM when
 *    its reset worked), each over the bytes sent, the goals beside them, RSS after and the timings;
 * 5. the reference: one message to smtp-server alone (lib/bare-smtp-server.ts: burnbox's SMTP
 *    library with its options, storing nothing), measured the same way: what receiving alone costs.
 *
 * 6. one line per case for scripts (packages/bench/test/bigmail-memory.test.ts):
 *    `bigmail result: <kind> x<at once> accepted <growth / bytes sent>x worked <growth / bytes sent>x`.
 *
 * Environment: BIGMAIL_KINDS, BIGMAIL_CONCURRENCY, BIGMAIL_BYTES, BIGMAIL_REFERENCE (0: no
 * smtp-server reference), BENCH_LOG_DIR; BURNBOX_* settings
 * pass through to the service (e.g. BURNBOX_MAIL_WORK_BIG_BYTES).
 */
import { randomBytes } from "node:crypto"
import { writeFileSync } from "node:fs"
import { availableParallelism, cpus } from "node:os"
import { listenerPorts, SmtpClient } from "@burnbox/testkit"
import { Burnbox, serviceSource, Session } from "./lib/burnbox.ts"
import { envInt, epochMs, fmt, loadAverage, median, memoryOf, mib, sleep, table, waitFor } from "./lib/common.ts"
import { startBareSmtpServer } from "./lib/smtp.ts"

const limit = 15_728_640
const bytes = envInt("BIGMAIL_BYTES", 15_728_000, 1_000)
const kinds = (process.env["BIGMAIL_KINDS"] ?? "attachment,text").split(",").map((k) => k.trim()).filter((k) => k !== "")
const concurrencies = (process.env["BIGMAIL_CONCURRENCY"] ?? "1,4").split(",").map((n) => Number(n.trim())).filter((n) => Number.isInteger(n) && n >= 1)
/** Whether to measure smtp-server alone as well (BIGMAIL_REFERENCE=0: not). */
const withReference = process.env["BIGMAIL_REFERENCE"] !== "0"
/** The goals of issue #36, as growth over the bytes in flight. */
const acceptGoal = 3
const workGoal = 6
const sampleEveryMs = 5
const processTimeoutMs = 180_000
const overallTimeoutMs = 15 * 60_000
const cores = availableParallelism()

const session = new Session("bench:bigmail")
const log = session.log

/** A message of exactly `total` bytes (CRLF lines, no line starting with "."), carrying `code`. */
const buildMessage = (kind: string, total: number, to: string, code: string): Buffer => {
  const boundary = "bench-boundary-7f3a"
  const common = [
    "From: Big Sender <big@bench.localhost>",
    `To: <${to}>`,
    `Subject: Your big-mail code is ${code}`,
    `Message-ID: <bigmail-${kind}-${Date.now()}@bench.localhost>`,
    `Date: ${new Date().toUTCString().replace("GMT", "+0000")}`,
    "MIME-Version: 1.0"
  ]
  let head: string
  let tail: string
  let lineOf: (i: number) => string
  if (kind === "attachment") {
    head = [
      ...common,
      `Content-Type: multipart/mixed; boundary="${boundary}"`,
      "",
      `--${boundary}`,
      "Content-Type: text/plain; charset=utf-8",
      "",
      `Hello, your verification code is ${code}. The report is attached.`,
      `--${boundary}`,
      "Content-Type: application/octet-stream; name=\"report.bin\"",
      "Content-Disposition: attachment; filename=\"report.bin\"",
      "Content-Transfer-Encoding: base64",
      "",
      ""
    ].join("\r\n")
    tail = `--${boundary}--\r\n`
    // Random bytes, base64 in 76-character lines (57 bytes each).
    const pool = randomBytes(57 * 1024)
    lineOf = (i) => pool.subarray((i % 1024) * 57, (i % 1024) * 57 + 57).toString("base64")
  } else {
    head = [...common, "Content-Type: text/plain; charset=utf-8", "", `Hello, your verification code is ${code}.`, ""].join("\r\n")
    tail = "End of the big text.\r\n"
    // 900-character lines (SMTP allows 998): ~17,500 lines, under the parser's 50,000 un-encoded lines (with
    // 76-character lines a 15 MB text body has ~200,000 and the pipeline marks it failed: too_many_unencoded_lines).
    const words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua "
    const long = words.repeat(10)
    lineOf = (i) => long.slice(i % 40, (i % 40) + 900)
  }
  const parts: Array<Buffer> = [Buffer.from(head, "latin1")]
  let length = parts[0]!.length + tail.length
  for (let i = 0; ; i++) {
    const line = lineOf(i) + "\r\n"
    if (length + line.length > total) break
    parts.push(Buffer.from(line, "latin1"))
    length += line.length
  }
  // Pad to the exact size with a short last line (base64: a multiple of 4 characters, "=" padded is fine
  // only at the end, so use a text-safe filler the decoder ignores in text, and "A"s in base64).
  const room = total - length
  if (room >= 2) {
    const fill = kind === "attachment" ? "A".repeat(Math.max(0, Math.floor((room - 2) / 4) * 4)) : "x".repeat(room - 2)
    parts.push(Buffer.from(fill + "\r\n", "latin1"))
    length += fill.length + 2
  }
  parts.push(Buffer.from(tail, "latin1"))
  return Buffer.concat(parts)
}

interface Result {
  readonly kind: string
  /** messages sent at once */
  readonly count: number
  /** bytes of one message */
  readonly size: number
  readonly baseline: number
  readonly peakSampled: number
  readonly hwmReset: boolean
  readonly hwmAfter: number
  readonly after: number
  readonly samples: number
  /** first byte -> the last 250, ms */
  readonly acceptMs: number
  /** the last 250 -> the last processed, ms */
  readonly processMs: number
  readonly statuses: ReadonlyArray<string>
  /** the largest sample until the last 250 */
  readonly peakReceiving: number
}

/** Sends one message over a new SMTP connection; answers the reply to its body. */
const sendOver = async (port: number, to: string, data: Buffer): Promise<{ reply: string; sentAt: number; repliedAt: number }> => {
  const c = await SmtpClient.connect(port, { ehlo: "bench.localhost", idleMs: 120_000 })
  let sentAt = 0
  const { envelope, reply } = await c.transaction("big@bench.localhost", to, data, {
    stuffed: true,
    mailParameters: `SIZE=${data.length}`,
    timeoutMs: 120_000,
    onSent: () => sentAt = epochMs()
  })
  if (reply === undefined) throw new Error(`envelope refused: ${envelope.map((r) => `${r.code} ${r.text}`).join(" / ")}`)
  const repliedAt = epochMs()
  await c.quit()
  return { reply: `${reply.code} ${reply.text}`, sentAt, repliedAt }
}

/**
 * Lets the process settle, then takes its baseline (median VmRSS over 1 s) and tries to reset
 * the kernel's peak-RSS mark (VmHWM) with /proc/<pid>/clear_refs (not every kernel allows it).
 */
const settle = async (pid: number): Promise<{ baseline: number; hwmReset: boolean }> => {
  await sleep(2_000)
  const quiet: Array<number> = []
  for (let i = 0; i < 20; i++) {
    quiet.push(memoryOf(pid)?.rss ?? Number.NaN)
    await sleep(50)
  }
  const baseline = median(quiet)
  const hwmBefore = memoryOf(pid)?.hwm ?? Number.NaN
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5")
    const hwm = memoryOf(pid)?.hwm ?? Number.NaN
    return { baseline, hwmReset: hwm < hwmBefore || hwm <= baseline * 1.05 }
  } catch {
    return { baseline, hwmReset: false }
  }
}

type Phase = "receiving" | "processing" | "after"
/** Samples VmRSS of `pid` every few ms until stopped: the largest sample, and the largest of each phase (set `phase`). */
const sampleRss = (pid: number, baseline: number) => {
  const state = {
    phase: "receiving" as Phase,
    peak: baseline,
    peakAt: "baseline",
    samples: 0,
    peakBy: { receiving: baseline, processing: baseline, after: baseline } as Record<Phase, number>,
    stop: () => clearInterval(timer)
  }
  const timer = setInterval(() => {
    const rss = memoryOf(pid)?.rss
    if (rss === undefined || !Number.isFinite(rss)) return
    state.samples++
    state.peakBy[state.phase] = Math.max(state.peakBy[state.phase], rss)
    if (rss > state.peak) {
      state.peak = rss
      state.peakAt = state.phase
    }
  }, sampleEveryMs)
  return state
}

/**
 * The reference: smtp-server alone (lib/bare-smtp-server.ts, burnbox's SMTP library with
 * its options, reading each message to its end and storing nothing) receiving the same message,
 * measured the same way. Its growth is what receiving costs before anything is kept.
 */
const measureBare = async (kind: string): Promise<{ kind: string; size: number; growth: number; reply: string }> => {
  const [port] = (await listenerPorts(1)) as [number]
  const server = await startBareSmtpServer(session, port)
  const pid = server.pid!
  try {
    await sendOver(port, "x@y.test", buildMessage("text", 4_000, "x@y.test", "111111"))
    const { baseline, hwmReset } = await settle(pid)
    const sampler = sampleRss(pid, baseline)
    const message = buildMessage(kind, bytes, "x@y.test", "654321")
    const sent = await sendOver(port, "x@y.test", message)
    sampler.phase = "after"
    await sleep(1_000)
    sampler.stop()
    const hwm = memoryOf(pid)?.hwm ?? Number.NaN
    const peak = hwmReset && Number.isFinite(hwm) ? Math.max(sampler.peak, hwm) : sampler.peak
    return { kind, size: message.length, growth: peak - baseline, reply: sent.reply }
  } finally {
    server.kill("SIGTERM")
  }
}

const measure = async (kind: string, count: number): Promise<Result> => {
  session.checkInterrupted()
  const name = `${kind}-x${count}`
  const burnbox = await Burnbox.create(session, { logName: `bench-bigmail-${name}` })
  session.afterCleanup(() => burnbox.summarizeLog())
  await burnbox.start("start")
  const pid = burnbox.pid!
  const token = await burnbox.setupAccount(`bench-bigmail-${name}@example.com`)
  const alias = await burnbox.claimAlias(token)
  const db = await burnbox.db()
  const statusOf = async (id: number) => {
    const row = (await db.query<{ processing_status: string; failure_reason: string | null }>(
      `SELECT processing_status, failure_reason FROM messages WHERE id = $1`, [id]
    )).rows[0]
    return row === undefined ? undefined : row.processing_status + (row.failure_reason === null ? "" : `: ${row.failure_reason}`)
  }
  const send = async (data: Buffer) => {
    const sent = await sendOver(burnbox.smtpPort, alias.address, data)
    const id = Number(/stored as (\d+)/.exec(sent.reply)?.[1] ?? Number.NaN)
    if (!sent.reply.startsWith("250") || !Number.isInteger(id)) throw new Error(`message refused: ${sent.reply}`)
    return { ...sent, id }
  }
  const processed = (id: number) => waitFor(async () => {
    burnbox.checkAlive()
    const status = await statusOf(id)
    return status === "processed" || status?.startsWith("failed") === true ? status : undefined
  }, processTimeoutMs, `message ${id} processed`, 20)

  // Warm the paths with a small message, then let the process settle.
  const small = await send(buildMessage("text", 4_000, alias.address, "111111"))
  await processed(small.id)
  await sleep(2_000)
  const { baseline, hwmReset } = await settle(pid)
  const messages = Array.from({ length: count }, (_, i) => buildMessage(kind, bytes, alias.address, String(654321 + i)))
  const size = messages[0]!.length
  if (size >= limit) throw new Error(`the message is ${size} bytes, not under the ${limit}-byte limit`)
  log(`${name}: baseline RSS ${mib(baseline)}; sending ${count} x ${fmt(size)} bytes at once (VmHWM reset: ${hwmReset ? "yes" : "no"})`)
  const sampler = sampleRss(pid, baseline)
  try {
    const started = epochMs()
    // Each message is processed-waited as soon as its own 250 comes; the phase ends with the last 250.
    let accepted = 0
    const outcomes = await Promise.all(messages.map(async (message) => {
      const big = await send(message)
      if (++accepted === count) sampler.phase = "processing"
      burnbox.checkAlive()
      const status = await processed(big.id)
      return { ...big, status, processedAt: epochMs() }
    }))
    const lastReply = Math.max(...outcomes.map((o) => o.repliedAt))
    const lastProcessed = Math.max(...outcomes.map((o) => o.processedAt))
    sampler.phase = "after"
    await sleep(3_000)
    const after = memoryOf(pid)?.rss ?? Number.NaN
    const hwmAfter = memoryOf(pid)?.hwm ?? Number.NaN
    log(`${name}: last 250 ${((lastReply - started) / 1000).toFixed(2)} s after the first byte; last processed ${((lastProcessed - lastReply) / 1000).toFixed(2)} s after it; peak RSS ${mib(sampler.peak)} (${sampler.peakAt})`)
    return {
      kind,
      count,
      size,
      baseline,
      peakSampled: sampler.peak,
      hwmReset,
      hwmAfter,
      after,
      samples: sampler.samples,
      acceptMs: lastReply - started,
      processMs: lastProcessed - lastReply,
      statuses: outcomes.map((o) => o.status),
      peakReceiving: sampler.peakBy.receiving
    }
  } finally {
    sampler.stop()
    await burnbox.closeDb(db)
    await burnbox.stop()
  }
}

const main = async (): Promise<number> => {
  const loadBefore = loadAverage()
  const results: Array<Result> = []
  const references: Array<Awaited<ReturnType<typeof measureBare>>> = []
  for (const kind of kinds) {
    if (kind !== "attachment" && kind !== "text") throw new Error(`BIGMAIL_KINDS: unknown kind "${kind}" (attachment, text)`)
    for (const count of concurrencies) {
      results.push(await measure(kind, count))
      log(`load average ${loadAverage()}`)
    }
    if (withReference) references.push(await measureBare(kind))
  }
  const peakOf = (r: Result) => r.hwmReset && Number.isFinite(r.hwmAfter) ? Math.max(r.peakSampled, r.hwmAfter) : r.peakSampled
  const ratio = (growth: number, r: Result) => growth / (r.size * r.count)
  const out: Array<string> = []
  out.push("")
  out.push(`Big messages (just under the ${fmt(limit)}-byte limit) through SMTP, storage and the pipeline, 1 and several at once; burnbox node process memory`)
  out.push(`machine: ${cores} cores (${cpus()[0]?.model ?? "unknown CPU"}), Node ${process.version}; load average before ${loadBefore}, after ${loadAverage()}`)
  out.push(`service code: ${serviceSource()}`)
  out.push("")
  out.push(table(
    ["message", "at once", "bytes each", "baseline RSS", "accepted: growth", "/ bytes sent", `goal <= ${acceptGoal}x`, "worked: growth", "/ bytes sent", `goal <= ${workGoal}x`, "RSS 3 s after", "first byte -> last 250", "last 250 -> processed", "samples"],
    results.map((r) => {
      const accepted = r.peakReceiving - r.baseline
      const worked = peakOf(r) - r.baseline
      return [
        r.kind,
        String(r.count),
        fmt(r.size),
        mib(r.baseline),
        mib(accepted),
        `${ratio(accepted, r).toFixed(2)}x`,
        ratio(accepted, r) <= acceptGoal ? "met" : "NOT MET",
        mib(worked),
        `${ratio(worked, r).toFixed(2)}x`,
        ratio(worked, r) <= workGoal ? "met" : "NOT MET",
        mib(r.after),
        `${fmt(r.acceptMs)} ms`,
        `${fmt(r.processMs)} ms`,
        fmt(r.samples)
      ]
    })
  ))
  out.push(`accepted = the largest VmRSS sample (every ${sampleEveryMs} ms) from the first byte until the last 250, over the baseline (median VmRSS over 1 s,`)
  out.push("idle, after one small message); worked = the largest sample from the first byte until 3 s after the last message is processed (or")
  out.push("VmHWM when the reset of the kernel's peak mark worked), over the baseline. Both over the bytes sent (messages x bytes each); with several")
  out.push("at once the pipeline works the first while the others are still accepted. The embedded PostgreSQL (its own processes) is not included.")
  for (const r of results) out.push(`${r.kind} x${r.count}: pipeline outcomes: ${r.statuses.join(", ")}; VmHWM after ${mib(r.hwmAfter)}${r.hwmReset ? "" : " (not reset)"}`)
  for (const r of results) {
    out.push(`bigmail result: ${r.kind} x${r.count} accepted ${ratio(r.peakReceiving - r.baseline, r).toFixed(2)}x worked ${ratio(peakOf(r) - r.baseline, r).toFixed(2)}x`)
  }
  if (references.length > 0) out.push("")
  if (references.length > 0) out.push(table(["reference: smtp-server alone, storing nothing", "bytes", "growth", "growth / size", "reply"], references.map((r) => [
    r.kind, fmt(r.size), mib(r.growth), `${(r.growth / r.size).toFixed(2)}x`, r.reply
  ])))
  if (references.length > 0) {
    out.push("The same message to burnbox's SMTP library with burnbox's options and nothing behind it (lib/bare-smtp-server.ts),")
    out.push("measured the same way (baseline after one small message; peak until 1 s after the 250): what receiving costs before anything is kept.")
  }
  process.stdout.write(out.join("\n") + "\n")
  return 0
}

await session.run(overallTimeoutMs, main)
