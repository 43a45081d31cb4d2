/**
 * Haraka 3.3.4, the production Node.js MTA, as a reference for bench:smtp: found (HARAKA_BIN,
 * /tmp/haraka) or installed with npm into a temporary folder, then started on 127.0.0.1 from a
 * config folder this module writes (`haraka -i` for the defaults, then our smtp.ini, log.ini and
 * plugins). One process (smtp.ini `nodes` unset), as burnbox runs one; no reverse DNS lookup of
 * the client and every recipient accepted (a tiny plugin), as burnbox does neither lookup nor
 * relay check for its test load; TCP_NODELAY on its sockets (see `harakaNoDelay`). The queue, by mode:
 * - `discard`: Haraka's own `queue/discard` (YES_REALLY_DO_DISCARD=1): 250 and nothing kept;
 * - `file`: a plugin that streams each message to its own file and answers 250 when the file is
 *   written and closed (in the page cache: not durable);
 * - `file-fsync`: the same, with fsync of the file before the 250, which is what burnbox
 *   promises (its PostgreSQL commit); the directory is not fsynced (as Postfix does not per file).
 */
import type { ChildProcess } from "node:child_process"
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { exited, SmtpClient } from "@burnbox/testkit"
import type { Session } from "./burnbox.ts"
import { sleep } from "./common.ts"
import { npmInstalled } from "./smtp.ts"

/**
 * TCP_NODELAY on Haraka's client sockets (SMTP_HARAKA_NODELAY, on by default): Haraka answers
 * pipelined MAIL, RCPT and DATA in separate small writes with Nagle's algorithm on (its socket
 * wrapper ignores setNoDelay), so a pipelining client waits for its own delayed ACK, ~40 ms a
 * message (273 msg/s over 16 connections here, against 1,945 with TCP_NODELAY). The reference is
 * Haraka at its best, so the bench turns it on; smtp-source does not pipeline and is not affected.
 */
export const harakaNoDelay = (process.env["SMTP_HARAKA_NODELAY"] ?? "1") !== "0"

export type HarakaMode = "discard" | "file" | "file-fsync"

export const harakaVersion = "3.3.4"
export const harakaHint = `Haraka ${harakaVersion} is missing: install it outside the workspace with \`npm install --prefix /tmp/haraka Haraka@${harakaVersion}\` (or set HARAKA_BIN to its bin/haraka).`

/** Haraka's bin: HARAKA_BIN, /tmp/haraka, else installed with npm when `install`; undefined when none works. */
export const harakaBin = async (session: Session, install: boolean): Promise<string | undefined> => {
  const found = [process.env["HARAKA_BIN"], "/tmp/haraka/node_modules/Haraka/bin/haraka"].find((p): p is string => p !== undefined && p !== "" && existsSync(p))
  return found ?? (install ? await npmInstalled(session, `Haraka@${harakaVersion}`, "Haraka/bin/haraka") : undefined)
}

const acceptPlugin = `// bench: no reverse DNS lookup of the client, every recipient accepted; with BENCH_HARAKA_NODELAY=1 replies leave at once (TCP_NODELAY)
const noDelay = process.env.BENCH_HARAKA_NODELAY === '1'
exports.register = function () {
  this.register_hook('lookup_rdns', 'rdns')
  this.register_hook('rcpt', 'accept')
}
exports.rdns = (next, connection) => {
  if (noDelay) (connection.client.targetsocket ?? connection.client).setNoDelay(true)
  next(OK, 'bench.localhost')
}
exports.accept = (next) => next(OK)
`

const fileQueuePlugin = `// bench: each message streamed to its own file; 250 once written and closed (fsync first with BENCH_HARAKA_FSYNC=1)
const fs = require('node:fs')
const path = require('node:path')
const dir = process.env.BENCH_HARAKA_QUEUE
const sync = process.env.BENCH_HARAKA_FSYNC === '1'
let seq = 0
exports.register = function () { this.register_hook('queue', 'write') }
exports.write = (next, connection) => {
  const ws = fs.createWriteStream(path.join(dir, process.pid + '-' + (++seq) + '.eml'), { autoClose: false })
  ws.on('error', (err) => next(DENYSOFT, err.message))
  ws.on('finish', () => {
    const done = (err) => fs.close(ws.fd, () => err ? next(DENYSOFT, err.message) : next(OK))
    if (sync) fs.fsync(ws.fd, done)
    else done(null)
  })
  connection.transaction.message_stream.pipe(ws)
}
`

export interface Haraka {
  readonly child: ChildProcess
  /** where the `file` modes write the messages */
  readonly queueDir: string
}

/** Starts Haraka (`bin`, run on this Node.js) on 127.0.0.1:port in `mode` and waits for its greeting. */
export const startHaraka = async (session: Session, bin: string, port: number, mode: HarakaMode): Promise<Haraka> => {
  const dir = session.tempDir(`bench-haraka-${mode}-`)
  execFileSync(process.execPath, [bin, "-i", dir], { stdio: "ignore" })
  const queueDir = join(dir, "queue")
  mkdirSync(queueDir, { recursive: true })
  mkdirSync(join(dir, "plugins"), { recursive: true })
  writeFileSync(join(dir, "config", "smtp.ini"), `listen=127.0.0.1:${port}\n`)
  writeFileSync(join(dir, "config", "log.ini"), "[main]\nlevel=warn\n")
  writeFileSync(join(dir, "plugins", "bench_accept.js"), acceptPlugin)
  writeFileSync(join(dir, "plugins", "bench_queue_file.js"), fileQueuePlugin)
  writeFileSync(join(dir, "config", "plugins"), `bench_accept\n${mode === "discard" ? "queue/discard" : "bench_queue_file"}\n`)
  const env = {
    ...process.env,
    BENCH_HARAKA_QUEUE: queueDir,
    BENCH_HARAKA_FSYNC: mode === "file-fsync" ? "1" : "0",
    BENCH_HARAKA_NODELAY: harakaNoDelay ? "1" : "0",
    ...(mode === "discard" ? { YES_REALLY_DO_DISCARD: "1" } : {})
  }
  const child = session.spawn(`Haraka (${mode})`, process.execPath, [bin, "-c", dir], { env, stdio: ["ignore", "ignore", "pipe"] })
  let stderr = ""
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => stderr = (stderr + chunk).slice(-2_000))
  const deadline = Date.now() + 30_000
  while (!(await SmtpClient.greets(port, 1_000))) {
    if (exited(child)) throw new Error(`Haraka (${mode}) exited during startup (code ${child.exitCode}): ${stderr.trim()}`)
    if (Date.now() > deadline) throw new Error(`Haraka (${mode}) did not greet on 127.0.0.1:${port} within 30 s: ${stderr.trim()}`)
    await sleep(100)
  }
  return { child, queueDir }
}
