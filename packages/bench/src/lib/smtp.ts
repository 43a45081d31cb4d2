/**
 * SMTP load for the benchmarks: a closed-loop or paced load generator over many connections of
 * the testkit's SmtpClient (with PIPELINING: one write of MAIL+RCPT+DATA, then the body) that
 * records every reply, 5 KB test messages carrying a code, and the external reference tools
 * (Postfix smtp-source/smtp-sink, maildev) with install hints when missing.
 *
 * All traffic goes to 127.0.0.1. Connections may bind distinct loopback source addresses
 * (127.0.0.2, 127.0.0.3, ...), so 50 connections look like 50 sending hosts: burnbox limits
 * connections per client address (MaxConnectionsPerAddress), as a defence against one abusive
 * sender, and a benchmark of "50 concurrent connections" should not measure that limit.
 */
import { type ChildProcess, execFile } from "node:child_process"
import { accessSync, constants, existsSync } from "node:fs"
import { userInfo } from "node:os"
import { delimiter, join } from "node:path"
import { fileURLToPath } from "node:url"
import { exited, SmtpClient, type SmtpReply, SmtpRefusal, waitForExit } from "@burnbox/testkit"
import { sleep } from "./common.ts"
import type { Session } from "./burnbox.ts"

// ---------------------------------------------------------------------------------------------
// Messages

export interface OutgoingMessage {
  readonly from: string
  readonly to: string
  /** The message: CRLF line ends, dot-stuffed, ending in CRLF, without the final ".\r\n". */
  readonly data: Buffer
}

/** The six-digit code in message `index` of a `messageFactory`. */
export const codeOf = (index: number) => String((index * 7919 + 104_729) % 1_000_000).padStart(6, "0")

const filler = "The quick brown fox jumps over the lazy dog, and a burnbox benchmark pads this message. "

/** Words for varied bodies: common English words, so a body compresses about as text does. */
const vocabulary = (
  "the of and to in is you that it he was for on are as with his they at be this have from or one had by word but not what all were we " +
  "when your can said there use an each which she do how their if will up other about out many then them these so some her would make " +
  "like him into time has look two more write go see number no way could people my than first water been call who oil its now find long " +
  "down day did get come made may part account verify code login password reset confirm email address order invoice shipping delivery " +
  "payment receipt support team welcome thanks regards please click link below expires minutes security alert device sign new request"
).split(" ")

/** A deterministic pseudo-random sequence (mulberry32), so varied bodies are the same in every run. */
const seeded = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
}

/** Body lines of about `room` bytes: the filler sentence repeated (`variant` undefined) or words drawn at random (with numbers) from the vocabulary. */
const fillerLines = (room: number, variant: number | undefined): Array<string> => {
  const random = variant === undefined ? undefined : seeded(variant + 1)
  const lines: Array<string> = []
  let length = 0
  while (length < room) {
    const left = room - length
    let line: string
    if (random === undefined) {
      line = filler.slice(0, Math.max(1, Math.min(76, left))).replace(/^\./, ",")
    } else {
      const words: Array<string> = []
      let width = 0
      while (width < Math.min(72, left)) {
        const word = random() < 0.08 ? String(Math.floor(random() * 100_000)) : vocabulary[Math.floor(random() * vocabulary.length)]!
        words.push(word)
        width += word.length + 1
      }
      line = words.join(" ").slice(0, Math.max(1, Math.min(76, left)))
    }
    lines.push(line)
    length += line.length + 2
  }
  return lines
}

/**
 * A factory of ~`size`-byte text messages, each with its sequence number in the Message-ID,
 * the subject and the body, and a six-digit code in the subject and the body (the code is
 * `codeOf(index)`). Built from a template with fixed-width fields, so a message costs a copy.
 * With `bodies` > 1, message i takes the i mod `bodies`-th of that many bodies of words drawn at
 * random (compressing about as text does) instead of one repeated sentence.
 */
export const messageFactory = (options: {
  readonly from: string
  /**
   * The recipient: `{seq}` in it is replaced with the sequence number (e.g. a +subaddress), or a
   * function of the sequence number and of the connection (slot) that sends the message.
   */
  readonly to: string | ((index: number, connection: number) => string)
  readonly size: number
  readonly tag: string
  readonly bodies?: number
}) => {
  const recipientOf = (index: number, connection = 0) => typeof options.to === "function" ? options.to(index, connection) : options.to.replace("{seq}", String(index))
  const seqWidth = 9
  const seqMark = "#".repeat(seqWidth)
  const codeMark = "@@@@@@"
  const head = [
    `From: Bench Sender <${options.from}>`,
    `To: <${recipientOf(0).replace(/\+[^@]*@/, "@")}>`,
    `Subject: Your ${options.tag} code is ${codeMark} (message ${seqMark})`,
    `Message-ID: <${options.tag}-${seqMark}@bench.localhost>`,
    `Date: ${new Date().toUTCString().replace("GMT", "+0000")}`,
    "MIME-Version: 1.0",
    "Content-Type: text/plain; charset=utf-8",
    "Content-Transfer-Encoding: 7bit",
    "",
    `Hello, your verification code is ${codeMark}.`,
    `This is message ${seqMark} of the ${options.tag} run.`,
    ""
  ].join("\r\n") + "\r\n"
  const bodies = Math.max(1, options.bodies ?? 1)
  const room = options.size - Buffer.byteLength(head) - 2
  const templates = Array.from({ length: bodies }, (_, variant) => {
    const template = Buffer.from(head + fillerLines(room, bodies === 1 ? undefined : variant).map((l) => l + "\r\n").join(""), "latin1")
    const seqAt: Array<number> = []
    const codeAt: Array<number> = []
    for (let i = template.indexOf(seqMark); i >= 0; i = template.indexOf(seqMark, i + 1)) seqAt.push(i)
    for (let i = template.indexOf(codeMark); i >= 0; i = template.indexOf(codeMark, i + 1)) codeAt.push(i)
    return { template, seqAt, codeAt }
  })
  const make = (index: number, connection = 0): OutgoingMessage => {
    const { template, seqAt, codeAt } = templates[index % bodies]!
    const data = Buffer.from(template)
    const seq = String(index).padStart(seqWidth, "0")
    const code = codeOf(index)
    for (const at of seqAt) data.write(seq, at, "latin1")
    for (const at of codeAt) data.write(code, at, "latin1")
    return { from: options.from, to: recipientOf(index, connection), data }
  }
  /** bytes of message `index` (bodies of words differ by a byte or two) */
  const sizeOf = (index: number) => templates[index % bodies]!.template.length
  return { make, size: templates[0]!.template.length, sizeOf }
}

// ---------------------------------------------------------------------------------------------
// The load generator

export interface Delivery {
  readonly index: number
  readonly connection: number
  /** epoch ms when the message was due (paced) or taken (closed loop) */
  readonly dueAt: number
  /** epoch ms when the body's final "." was written */
  readonly sentAt: number
  /** epoch ms when the reply to the body arrived */
  readonly repliedAt: number
  readonly reply: SmtpReply
}

export interface LoadOptions {
  readonly port: number
  readonly connections: number
  /** Distinct loopback source addresses: connection i binds 127.0.0.(2 + i % n); 0 binds none (127.0.0.1). */
  readonly sourceAddresses: number
  /** Message `index`, sent by connection (slot) `connection`. */
  readonly make: (index: number, connection: number) => OutgoingMessage
  /** Closed loop: send this many messages as fast as the connections allow. */
  readonly messages?: number
  /** Paced (open loop): this many messages per second for `seconds` seconds. */
  readonly rate?: number
  readonly seconds?: number
  /** Reconnect after a connection failure (default true); the crash test turns it off. */
  readonly reconnect?: boolean
  /** A new connection for every message, as smtp-source does without -d (default false). */
  readonly connectionPerMessage?: boolean
  /** Called for each reply to a message body (in reply order). */
  readonly onDelivery?: (delivery: Delivery) => void
  /** Stops issuing new messages when this answers true (checked before each message). */
  readonly stop?: () => boolean
  /** Closed loop: stop issuing new messages this many seconds after the start (all connections open). */
  readonly durationSeconds?: number
  /** Hard bound on the whole load, ms. */
  readonly timeoutMs: number
}

export interface LoadResult {
  /** messages taken from the schedule */
  readonly issued: number
  /** messages whose body was completely written */
  readonly bodiesSent: number
  /** 2xx replies to a body */
  readonly accepted: number
  /** non-2xx replies (to the envelope or the body), by "code text" */
  readonly rejected: ReadonlyMap<string, number>
  /** bodies written whose reply never came (the connection died): their indexes */
  readonly inFlight: ReadonlyArray<number>
  /** connection-level failures, by message */
  readonly errors: ReadonlyMap<string, number>
  /** connections opened */
  readonly connectionsOpened: number
  /** epoch ms of the first message issued and of the last reply */
  readonly startedAt: number
  readonly endedAt: number
  /** 2xx replies per second between the first issue and the last reply */
  readonly acceptedPerSecond: number
  /** paced: the largest lag between a message's due time and its MAIL write, ms */
  readonly maxStartLagMs: number
  /** ms spent opening the persistent connections before the start (greeting, EHLO) */
  readonly connectMs: number
}

const bump = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1)

/**
 * Runs SMTP load against 127.0.0.1:port. Closed loop with `messages`, or paced with `rate` and
 * `seconds` (messages are due at start + i/rate and go to the next free connection; a message
 * waits in a queue when all connections are busy, so a slow server shows as lag, not as a lower
 * offered rate going unnoticed).
 */
export const runSmtpLoad = async (options: LoadOptions): Promise<LoadResult> => {
  const paced = options.rate !== undefined
  const total = paced ? Math.round(options.rate! * (options.seconds ?? 10)) : options.messages ?? 0
  const rejected = new Map<string, number>()
  const errors = new Map<string, number>()
  const inFlight: Array<number> = []
  let issued = 0
  let bodiesSent = 0
  let accepted = 0
  let connectionsOpened = 0
  let maxStartLagMs = 0
  const deadline = Date.now() + options.timeoutMs
  let finished = false

  // Persistent connections are opened (greeted, EHLO answered) before the clock starts, so the
  // figures measure mail, not connection setup (smtp-server delays its greeting 100 ms and
  // looks the client's address up in DNS first).
  const sourceOf = (slot: number) => options.sourceAddresses > 0 ? `127.0.0.${2 + (slot % options.sourceAddresses)}` : undefined
  const preopened: Array<SmtpClient | undefined> = []
  const connectStarted = performance.now()
  if (options.connectionPerMessage !== true) {
    await Promise.all(Array.from({ length: options.connections }, async (_, slot) => {
      try {
        preopened[slot] = await SmtpClient.connect(options.port, { localAddress: sourceOf(slot), ehlo: "bench.localhost" })
        connectionsOpened++
      } catch (error) {
        bump(errors, `connect: ${error instanceof Error ? error.message.slice(0, 100) : String(error)}`)
      }
    }))
  }
  const connectMs = performance.now() - connectStarted
  const startedAt = performance.timeOrigin + performance.now()
  let endedAt = startedAt
  const stopAt = options.durationSeconds === undefined ? Number.POSITIVE_INFINITY : startedAt + options.durationSeconds * 1000

  // The schedule: closed loop hands out the next index at once; paced releases index i at its due time.
  const queue: Array<{ index: number; dueAt: number }> = []
  const idle: Array<() => void> = []
  let released = 0
  let pacer: NodeJS.Timeout | undefined
  const wake = () => {
    let n = released >= total ? idle.length : Math.min(idle.length, queue.length)
    while (n-- > 0) idle.shift()!()
  }
  if (paced) {
    const interval = 1000 / options.rate!
    const tick = () => {
      const now = performance.timeOrigin + performance.now()
      while (released < total && startedAt + released * interval <= now) {
        queue.push({ index: released, dueAt: startedAt + released * interval })
        released++
      }
      wake()
      if (released < total && !finished) pacer = setTimeout(tick, Math.max(0, Math.min(5, startedAt + released * interval - now)))
    }
    tick()
  }
  const take = async (): Promise<{ index: number; dueAt: number } | undefined> => {
    for (;;) {
      if (options.stop?.() === true || Date.now() > deadline || performance.timeOrigin + performance.now() >= stopAt) return undefined
      if (!paced) {
        if (released >= total) return undefined
        return { index: released++, dueAt: performance.timeOrigin + performance.now() }
      }
      const next = queue.shift()
      if (next !== undefined) return next
      if (released >= total) return undefined
      await new Promise<void>((ok) => idle.push(ok))
    }
  }

  const worker = async (slot: number) => {
    const localAddress = sourceOf(slot)
    let connection: SmtpClient | undefined = preopened[slot]
    let pending: { index: number; dueAt: number } | undefined
    for (;;) {
      const job = pending ?? await take()
      if (job === undefined) break
      if (pending === undefined) issued++
      pending = undefined
      let bodyWritten = false
      try {
        if (connection === undefined || connection.closed) {
          connection = await SmtpClient.connect(options.port, { localAddress, ehlo: "bench.localhost" })
          connectionsOpened++
        }
        const c = connection
        const message = options.make(job.index, slot)
        const startLag = performance.timeOrigin + performance.now() - job.dueAt
        if (paced && startLag > maxStartLagMs) maxStartLagMs = startLag
        let sentAt = 0
        const { envelope, reply } = await c.transaction(message.from, message.to, message.data, {
          stuffed: true,
          onSent: () => {
            bodyWritten = true
            bodiesSent++
            sentAt = performance.timeOrigin + performance.now()
          }
        })
        if (reply === undefined) {
          const failed = envelope.find((r) => r.code >= 400) ?? envelope[envelope.length - 1]!
          bump(rejected, `${failed.code} ${failed.text.slice(0, 80)}`)
        } else {
          const repliedAt = performance.timeOrigin + performance.now()
          endedAt = repliedAt
          if (reply.code >= 200 && reply.code < 300) accepted++
          else bump(rejected, `${reply.code} ${reply.text.slice(0, 80)}`)
          options.onDelivery?.({ index: job.index, connection: slot, dueAt: job.dueAt, sentAt, repliedAt, reply })
        }
        if (options.connectionPerMessage === true) {
          await c.quit()
          connection = undefined
        }
      } catch (error) {
        const text = error instanceof SmtpRefusal ? error.message.slice(0, 100) : error instanceof Error ? error.message : String(error)
        bump(errors, text)
        connection?.destroy()
        connection = undefined
        if (bodyWritten) inFlight.push(job.index)
        if (!(options.reconnect ?? true)) break
        // Not delivered: the same message again on a new connection (a body whose reply was lost is not resent).
        if (!bodyWritten && Date.now() < deadline) pending = job
        // A refused or failed connection: back off a little before the next attempt.
        await sleep(error instanceof SmtpRefusal ? 50 : 10)
      }
    }
    await connection?.quit()
  }

  const workers = Array.from({ length: options.connections }, (_, slot) => worker(slot))
  await Promise.all(workers)
  finished = true
  if (pacer !== undefined) clearTimeout(pacer)
  for (const resume of idle.splice(0)) resume()
  const seconds = Math.max(1e-9, (endedAt - startedAt) / 1000)
  return {
    issued,
    bodiesSent,
    accepted,
    rejected,
    inFlight,
    errors,
    connectionsOpened,
    startedAt,
    endedAt,
    acceptedPerSecond: accepted / seconds,
    maxStartLagMs,
    connectMs
  }
}

export const countsText = (map: ReadonlyMap<string, number>): string =>
  map.size === 0 ? "none" : [...map].map(([k, n]) => `${n} x "${k}"`).join("; ")

// ---------------------------------------------------------------------------------------------
// External reference tools

const onPath = (name: string, extra: ReadonlyArray<string> = []): string | undefined => {
  const dirs = [...(process.env["PATH"] ?? "").split(delimiter), "/usr/sbin", "/usr/local/sbin", "/sbin", ...extra]
  for (const dir of dirs) {
    if (dir === "") continue
    const candidate = join(dir, name)
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // next
    }
  }
  return undefined
}

export interface Tools {
  readonly smtpSource: string | undefined
  readonly smtpSink: string | undefined
  readonly maildev: string | undefined
  readonly missing: ReadonlyArray<string>
}

export const postfixHint = "Postfix's smtp-source/smtp-sink are missing: install them with `apt-get update && apt-get install -y postfix` (Debian/Ubuntu; the postfix service need not run)."
export const maildevHint = "maildev 2.2.1 is missing: install it outside the workspace with `npm install --prefix /tmp/maildev maildev@2.2.1` (or set MAILDEV_BIN to its bin/maildev)."

/** Finds smtp-source, smtp-sink (PATH, /usr/sbin) and maildev (MAILDEV_BIN, /tmp/maildev, PATH). */
export const findTools = (): Tools => {
  const smtpSource = onPath("smtp-source")
  const smtpSink = onPath("smtp-sink")
  const maildevCandidates = [process.env["MAILDEV_BIN"], "/tmp/maildev/node_modules/maildev/bin/maildev", onPath("maildev")]
  const maildev = maildevCandidates.find((p): p is string => p !== undefined && p !== "" && existsSync(p))
  const missing: Array<string> = []
  if (smtpSource === undefined || smtpSink === undefined) missing.push(postfixHint)
  if (maildev === undefined) missing.push(maildevHint)
  return { smtpSource, smtpSink, maildev, missing }
}

/**
 * A reference tool installed with npm into a temporary folder of the session (removed at the
 * end): `npm install <spec>`, answering `<folder>/node_modules/<binPath>`, or undefined (logged)
 * when npm fails (no registry here, for instance).
 */
export const npmInstalled = async (session: Session, spec: string, binPath: string): Promise<string | undefined> => {
  const dir = session.tempDir(`bench-npm-${spec.replace(/\W/g, "")}-`)
  session.log(`installing ${spec} with npm into ${dir}`)
  const ok = await new Promise<boolean>((resolve) => {
    execFile("npm", ["install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error", spec], { timeout: 180_000 }, (error, _stdout, stderr) => {
      if (error !== null) session.log(`npm install ${spec} failed: ${(stderr || error.message).trim().split("\n").slice(-3).join(" / ")}`)
      resolve(error === null)
    })
  })
  return ok ? join(dir, "node_modules", binPath) : undefined
}

/** maildev's bin: found (findTools), else installed with npm when `install`; undefined when neither works. */
export const maildevBin = async (session: Session, install: boolean): Promise<string | undefined> =>
  findTools().maildev ?? (install ? await npmInstalled(session, "maildev@2.2.1", "maildev/bin/maildev") : undefined)

const waitGreeting = async (child: ChildProcess, port: number, name: string, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs
  while (!(await SmtpClient.greets(port, 1_000))) {
    if (exited(child)) throw new Error(`${name} exited during startup (code ${child.exitCode})`)
    if (Date.now() > deadline) throw new Error(`${name} did not greet on 127.0.0.1:${port} within ${timeoutMs / 1000} s`)
    await sleep(100)
  }
}

/** Spawns a reference SMTP server and waits for its greeting on 127.0.0.1:port. */
const startReference = async (session: Session, name: string, command: string, args: ReadonlyArray<string>, port: number, timeoutMs: number): Promise<ChildProcess> => {
  const child = session.spawn(name, command, args, { stdio: ["ignore", "ignore", "pipe"] })
  let stderr = ""
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => stderr += chunk)
  try {
    await waitGreeting(child, port, name, timeoutMs)
  } catch (error) {
    throw new Error(`${error instanceof Error ? error.message : String(error)}: ${stderr.trim()}`, { cause: error })
  }
  return child
}

/** Postfix smtp-sink on 127.0.0.1:port: accepts and discards everything (backlog 1000). */
export const startSmtpSink = (session: Session, bin: string, port: number): Promise<ChildProcess> =>
  // As root smtp-sink must drop privileges to an unprivileged user: Postfix's own `postfix`.
  startReference(session, "smtp-sink", bin, [...(userInfo().uid === 0 ? ["-u", "postfix"] : []), `127.0.0.1:${port}`, "1000"], port, 10_000)

/** smtp-server alone (lib/bare-smtp-server.ts: burnbox's SMTP library, storing nothing) on 127.0.0.1. */
export const startBareSmtpServer = (session: Session, port: number): Promise<ChildProcess> =>
  startReference(session, "smtp-server alone", process.execPath, [fileURLToPath(new URL("./bare-smtp-server.ts", import.meta.url)), String(port)], port, 10_000)

/** maildev on 127.0.0.1 (SMTP `port`, web `webPort`) storing mail under `dir`. */
export const startMaildev = (session: Session, bin: string, port: number, webPort: number, dir: string): Promise<ChildProcess> =>
  startReference(session, "maildev", process.execPath, [bin, "--smtp", String(port), "--web", String(webPort), "--ip", "127.0.0.1", "--mail-directory", dir, "--silent"], port, 30_000)

export interface SourceRun {
  readonly seconds: number
  readonly exitCode: number | null
  readonly output: string
  readonly pid: number | undefined
}

/**
 * Runs Postfix smtp-source to completion (bounded by `timeoutMs`) and answers its wall time.
 * smtp-source exits non-zero (fatal) on the first reply it does not expect, unless given -A.
 */
export const runSmtpSource = async (session: Session, bin: string, args: ReadonlyArray<string>, timeoutMs: number, onStart?: (pid: number | undefined) => void): Promise<SourceRun> => {
  const started = performance.now()
  const child = session.spawn("smtp-source", bin, args, { stdio: ["ignore", "pipe", "pipe"] }, "SIGKILL")
  onStart?.(child.pid)
  let output = ""
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => output += chunk)
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => output += chunk)
  if (!(await waitForExit(child, timeoutMs))) {
    child.kill("SIGKILL")
    await waitForExit(child, 5_000)
    throw new Error(`smtp-source ${args.join(" ")} did not finish within ${timeoutMs / 1000} s`)
  }
  return { seconds: (performance.now() - started) / 1000, exitCode: child.exitCode, output: output.trim(), pid: child.pid }
}
