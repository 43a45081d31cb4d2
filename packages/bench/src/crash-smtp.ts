/**
 * Nothing accepted is lost: kill -9 burnbox under SMTP load, restart it on the same data dir,
 * and count acknowledged versus stored messages.
 *
 * Usage: ./pnpmw crash:smtp
 *
 * What it does, for CRASH_ROUNDS rounds (default 2) on one data dir:
 * 1. (first round) starts `burnbox start` (API, SMTP ingest, pipeline, embedded PostgreSQL) on
 *    a temp data dir, a pro account with raised limits, a token, a claimed alias and a webhook
 *    endpoint for all its events on a closed loopback port (an event no endpoint receives is
 *    deleted once dispatched; these stay, with deliveries that keep failing, to be counted);
 * 2. runs SMTP load: 50 connections (one loopback source address each), PIPELINING, closed
 *    loop; every message has a unique Message-ID <crash-r<round>-<seq>@bench.localhost> and a
 *    code; the generator records every 250 with its "stored as <id>" and every body it wrote
 *    without getting a reply;
 * 3. after CRASH_AFTER_MS (3000) plus up to 1 s at random, notes the pipeline's state, then
 *    SIGKILLs, at once, the burnbox node process and its whole process tree: the embedded
 *    PostgreSQL postmaster and all its backends. (A SIGKILL of node alone leaves PostgreSQL
 *    running, the postmaster being a separate process that survives its parent; killing
 *    everything is the closest a script gets to a machine crash. It is not a power cut: what
 *    PostgreSQL wrote but had not fsynced is still in the OS page cache. PostgreSQL's fsync and
 *    synchronous_commit settings, printed below, are what make a commit survive a power cut.);
 * 4. restarts burnbox on the same data dir (PostgreSQL recovers from its WAL), waits until the
 *    pipeline has no stub or processing message left (a message the killed process had claimed
 *    is taken over about a second after the restart: no connection carries its name any more);
 * 5. counts, by Message-ID in the stored raw bytes: acknowledged, stored, acknowledged but not
 *    stored (must be 0), stored but not acknowledged (allowed: the 250 was lost in flight; at
 *    most the bodies without a reply), stored twice, processed / failed / unprocessed after the
 *    restart, message.received events per message (exactly one each: a crash repeats nothing),
 *    and reads every acknowledged message back over the API (processed, with its code); and
 *    checks every account's and alias's counters (storage, received, mailbox count, and the
 *    alias's unread count where the tree keeps it with the deltas (migration 0034): row plus the
 *    deltas not folded yet) against a recount of the stored mail (must all be equal). Two mail
 *    rules of the account read (subject with "3)") and trash (with "7)") a tenth of the mail each,
 *    so the rules step's unread corrections are under the crash too.
 *
 * Environment: CRASH_ROUNDS (2), CRASH_AFTER_MS (3000), CRASH_CONNECTIONS (50), BENCH_LOG_DIR.
 */
import { availableParallelism, cpus } from "node:os"
import { zstdDecompressSync } from "node:zlib"
import { freePort } from "@burnbox/store"
import { Burnbox, type PgClient, serviceSource, Session } from "./lib/burnbox.ts"
import { envInt, epochMs, fmt, loadAverage, sleep, table } from "./lib/common.ts"
import { codeOf, countsText, messageFactory, runSmtpLoad } from "./lib/smtp.ts"

const rounds = envInt("CRASH_ROUNDS", 2, 1)
const crashAfterMs = envInt("CRASH_AFTER_MS", 3_000, 100)
const connections = envInt("CRASH_CONNECTIONS", 50, 1)
const drainTimeoutMs = 180_000
const overallTimeoutMs = rounds * 5 * 60_000 + 3 * 60_000
const cores = availableParallelism()

const session = new Session("crash:smtp")
const log = session.log

interface Round {
  readonly round: number
  readonly acknowledged: number
  readonly stored: number
  readonly ackedNotStored: number
  readonly idMismatch: number
  readonly storedNotAcked: number
  readonly inFlight: number
  readonly storedTwice: number
  readonly processed: number
  readonly failed: number
  readonly unprocessed: number
  readonly eventsNotOnce: number
  readonly apiOk: number
  readonly apiChecked: number
  readonly atCrash: string
  readonly killed: number
  readonly restartSeconds: number
  readonly drainSeconds: number
  readonly loadErrors: string
  readonly sentPerSecond: number
  /** Accounts and aliases whose storage or received counters differ from a recount of their mail (must be 0). */
  readonly countersOff: number
}

/**
 * Accounts and aliases whose counters differ from their stored mail counted (storage bytes;
 * received messages and the mailbox count, as nothing is deleted here; the owner's unread mail
 * outside the trash): each counter is its row plus its deltas not folded yet (migration 0029,
 * the unread count's with 0034), where the tree has them.
 */
const countersOff = async (db: PgClient): Promise<number> => {
  const [has] = (await db.query<{ deltas: boolean; unread: boolean }>(
    `SELECT to_regclass('mail_count_deltas') IS NOT NULL AS deltas,
            EXISTS (SELECT 1 FROM information_schema.columns WHERE table_name = 'mail_count_deltas' AND column_name = 'unread') AS unread`
  )).rows
  const deltas = has!.deltas
  const plus = (column: string, key: string, id: string) => deltas ? `+ coalesce((SELECT sum(${column}) FROM mail_count_deltas d WHERE d.${key} = ${id}), 0)` : ""
  const unreadOff = has!.unread
    ? `OR al.unread_count ${plus("d.unread", "alias_id", "al.id")} <> (SELECT count(*) FROM messages m WHERE m.alias_id = al.id AND m.trashed_at IS NULL
         AND NOT EXISTS (SELECT 1 FROM message_states s WHERE s.message_id = m.id AND s.account_id = m.account_id AND s.is_read))`
    : ""
  const [row] = (await db.query<{ n: string }>(`
    SELECT (SELECT count(*) FROM accounts a
            WHERE a.storage_used_bytes ${plus("d.bytes", "account_id", "a.id")} <> (SELECT coalesce(sum(size_bytes), 0) FROM messages m WHERE m.account_id = a.id)
               OR coalesce((SELECT c.in_mailbox FROM mailbox_counts c WHERE c.account_id = a.id), 0) ${plus("d.in_mailbox", "account_id", "a.id")}
                  <> (SELECT count(*) FROM messages m WHERE m.account_id = a.id AND m.trashed_at IS NULL))
         + (SELECT count(*) FROM aliases al
            WHERE al.storage_used_bytes ${plus("d.bytes", "alias_id", "al.id")} <> (SELECT coalesce(sum(size_bytes), 0) FROM messages m WHERE m.alias_id = al.id)
               OR al.received_count ${plus("d.in_mailbox + d.trashed", "alias_id", "al.id")} <> (SELECT count(*) FROM messages m WHERE m.alias_id = al.id)
               ${unreadOff}) AS n`)).rows
  return Number(row!.n)
}

const main = async (): Promise<number> => {
  const burnbox = await Burnbox.create(session, { logName: "crash-smtp", extraEnv: { BURNBOX_WEBHOOK_ALLOW_PRIVATE: "true" } })
  session.afterCleanup(() => burnbox.summarizeLog())
  await burnbox.start("start")
  const token = await burnbox.setupAccount("crash-smtp@example.com", "read,manage-aliases,test,webhooks")
  const alias = await burnbox.claimAlias(token)
  for (const [name, subject, type] of [["read", "3)", "mark_read"], ["trash", "7)", "trash"]] as const) {
    const rule = await burnbox.api("POST", "/api/v1/rules", token, { name, match: { subject }, actions: [{ type }] })
    if (rule.status !== 201) throw new Error(`creating the ${name} rule answered ${rule.status}: ${rule.text}`)
  }
  log(`claimed alias ${alias.address} (id ${alias.id})`)
  const endpoint = await burnbox.api("POST", "/api/v1/webhooks", token, {
    name: "crash-smtp",
    // a port nothing listens on (taken from the OS, then let go)
    url: `https://127.0.0.1:${await freePort()}/events`,
    subscription: { mode: "all" }
  })
  if (endpoint.status !== 201 && endpoint.status !== 200) throw new Error(`POST /api/v1/webhooks answered ${endpoint.status}: ${endpoint.text}`)
  let db: PgClient = await burnbox.db()
  const durability = (await db.query<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'wal_sync_method', 'full_page_writes') ORDER BY name`
  )).rows.map((r) => `${r.name}=${r.setting}`).join(" ")
  const loadBefore = loadAverage()
  const results: Array<Round> = []

  for (let round = 1; round <= rounds; round++) {
    session.checkInterrupted()
    const tag = `crash-r${round}`
    const factory = messageFactory({ from: "sender@bench.localhost", to: alias.address, size: 5_150, tag })
    /** seq -> ids from the 250 */
    const acked = new Map<number, Array<number>>()
    let crashed = false
    const delay = crashAfterMs + Math.floor(Math.random() * 1_000)
    log(`round ${round}: load on ${connections} connections; SIGKILL in ${delay} ms`)
    const started = epochMs()
    const load = runSmtpLoad({
      port: burnbox.smtpPort,
      connections,
      sourceAddresses: connections,
      make: factory.make,
      messages: Number.MAX_SAFE_INTEGER,
      reconnect: false,
      stop: () => crashed,
      timeoutMs: delay + 60_000,
      onDelivery: (d) => {
        if (d.reply.code !== 250) return
        const match = /stored as ([\d,]+)/.exec(d.reply.text)
        acked.set(d.index, match === null ? [] : match[1]!.split(",").map(Number))
      }
    })
    await sleep(delay)
    burnbox.checkAlive()
    const atCrash = (await db.query<{ processing_status: string; n: string }>(
      `SELECT processing_status, count(*) AS n FROM messages GROUP BY 1 ORDER BY 1`
    )).rows.map((r) => `${r.processing_status} ${fmt(Number(r.n))}`).join(", ")
    const killed = await burnbox.crash()
    crashed = true
    const crashAt = epochMs()
    log(`round ${round}: SIGKILLed ${killed.length} processes (node, postmaster, backends) ${((crashAt - started) / 1000).toFixed(1)} s into the load; pipeline before: ${atCrash}`)
    const result = await load
    log(`round ${round}: ${acked.size} acknowledged; ${result.inFlight.length} bodies without a reply; errors: ${countsText(result.errors)}`)

    const restartAt = epochMs()
    await burnbox.start("start")
    const restartSeconds = (epochMs() - restartAt) / 1000
    db = await burnbox.db()
    const drainAt = Date.now()
    let left = Number.POSITIVE_INFINITY
    while (Date.now() - drainAt < drainTimeoutMs) {
      burnbox.checkAlive()
      left = Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM messages WHERE processing_status IN ('stub', 'processing')`)).rows[0]!.n)
      if (left === 0) break
      await sleep(500)
    }
    const drainSeconds = (Date.now() - drainAt) / 1000
    const off = await countersOff(db)
    log(`round ${round}: restarted in ${restartSeconds.toFixed(1)} s; pipeline ${left === 0 ? "drained" : `still has ${left}`} after ${drainSeconds.toFixed(1)} s`)

    // What is stored, by the Message-ID in the raw bytes.
    // Raw bytes are stored zstd-compressed (migration 0028): those are read whole and decompressed.
    const rows = (await db.query<{ id: number; processing_status: string; zstd: boolean; head: Buffer }>(`
      SELECT m.id, m.processing_status, r.zstd, CASE WHEN r.zstd THEN r.raw ELSE substring(r.raw FROM 1 FOR 800) END AS head
      FROM messages m JOIN message_raw r ON r.message_id = m.id`)).rows
    const stored = new Map<number, Array<{ id: number; status: string }>>()
    const pattern = new RegExp(`Message-ID: <${tag}-(\\d+)@`)
    for (const row of rows) {
      const head = row.zstd ? zstdDecompressSync(row.head).subarray(0, 800) : Buffer.from(row.head)
      const match = pattern.exec(head.toString("latin1"))
      if (match === null) continue
      const seq = Number(match[1])
      const list = stored.get(seq) ?? []
      list.push({ id: Number(row.id), status: row.processing_status })
      stored.set(seq, list)
    }
    let ackedNotStored = 0
    let idMismatch = 0
    for (const [seq, ids] of acked) {
      const found = stored.get(seq)
      if (found === undefined) ackedNotStored++
      else if (ids.length !== found.length || !ids.every((id) => found.some((f) => f.id === id))) idMismatch++
    }
    const storedNotAcked = [...stored.keys()].filter((seq) => !acked.has(seq)).length
    const storedTwice = [...stored.values()].filter((list) => list.length > 1).length
    const all = [...stored.values()].flat()
    const storedIds = all.map((s) => s.id)
    const events = new Map((await db.query<{ id: number; n: string }>(
      `SELECT (data->>'message_id')::int AS id, count(*) AS n FROM events WHERE type = 'message.received' AND (data->>'message_id')::int = ANY($1::int[]) GROUP BY 1`,
      [storedIds]
    )).rows.map((r) => [Number(r.id), Number(r.n)]))
    const eventsNotOnce = all.filter((s) => s.status === "processed" && events.get(s.id) !== 1).length

    // Every acknowledged message over the API: processed, with its own code.
    let apiOk = 0
    const queue = [...acked].flatMap(([seq, ids]) => ids.map((id) => ({ seq, id })))
    await Promise.all(Array.from({ length: 16 }, async () => {
      for (let item = queue.pop(); item !== undefined; item = queue.pop()) {
        const response = await burnbox.api("GET", `/api/v1/messages/${item.id}`, token)
        const body = response.body as { processingStatus?: string; otpCodes?: Array<string> } | undefined
        if (response.status === 200 && body?.processingStatus === "processed" && body.otpCodes?.includes(codeOf(item.seq)) === true) apiOk++
      }
    }))

    results.push({
      round,
      acknowledged: acked.size,
      stored: stored.size,
      ackedNotStored,
      idMismatch,
      storedNotAcked,
      inFlight: result.inFlight.length,
      storedTwice,
      processed: all.filter((s) => s.status === "processed").length,
      failed: all.filter((s) => s.status === "failed").length,
      unprocessed: all.filter((s) => s.status === "stub" || s.status === "processing").length,
      eventsNotOnce,
      apiOk,
      apiChecked: [...acked.values()].reduce((n, ids) => n + ids.length, 0),
      atCrash,
      killed: killed.length,
      restartSeconds,
      drainSeconds,
      loadErrors: countsText(result.errors),
      sentPerSecond: acked.size / ((crashAt - started) / 1000),
      countersOff: off
    })
  }
  await burnbox.closeDb(db)

  // ---- report
  const out: Array<string> = []
  out.push("")
  out.push(`kill -9 under SMTP load (${connections} connections, 5 KB messages, one alias), restart on the same data dir, count`)
  out.push(`machine: ${cores} cores (${cpus()[0]?.model ?? "unknown CPU"}), Node ${process.version}; load average before ${loadBefore}, after ${loadAverage()}`)
  out.push(`service code: ${serviceSource()}`)
  out.push(`embedded PostgreSQL: ${durability}`)
  out.push("")
  const col = (f: (r: Round) => string) => results.map(f)
  const rowsOut: Array<Array<string>> = [
    ["acknowledged (250 received)", ...col((r) => fmt(r.acknowledged))],
    ["stored (distinct Message-IDs found)", ...col((r) => fmt(r.stored))],
    ["acknowledged but not stored (must be 0)", ...col((r) => fmt(r.ackedNotStored))],
    ["counters differing from a recount (must be 0)", ...col((r) => fmt(r.countersOff))],
    ["acknowledged, stored under other ids than the 250 said", ...col((r) => fmt(r.idMismatch))],
    ["stored but not acknowledged (250 lost in flight)", ...col((r) => fmt(r.storedNotAcked))],
    ["  bodies written without a reply (upper bound of the above)", ...col((r) => fmt(r.inFlight))],
    ["stored more than once", ...col((r) => fmt(r.storedTwice))],
    ["processed after the restart", ...col((r) => fmt(r.processed))],
    ["failed", ...col((r) => fmt(r.failed))],
    ["still stub/processing", ...col((r) => fmt(r.unprocessed))],
    ["processed without exactly one message.received event", ...col((r) => fmt(r.eventsNotOnce))],
    ["acknowledged readable over the API, processed, own code", ...col((r) => `${fmt(r.apiOk)} / ${fmt(r.apiChecked)}`)],
    ["acknowledged per second before the kill", ...col((r) => fmt(r.sentPerSecond))],
    ["processes SIGKILLed", ...col((r) => String(r.killed))],
    ["restart until SMTP and API answer, s", ...col((r) => r.restartSeconds.toFixed(1))],
    ["restart until the pipeline drained, s", ...col((r) => r.drainSeconds.toFixed(1))]
  ]
  out.push(table(["", ...results.map((r) => `round ${r.round}`)], rowsOut))
  for (const r of results) out.push(`round ${r.round}: pipeline state just before the kill (all rounds so far): ${r.atCrash}; generator errors: ${r.loadErrors}`)
  const lost = results.reduce((n, r) => n + r.ackedNotStored + r.idMismatch, 0)
  const inFlightOk = results.every((r) => r.storedNotAcked <= r.inFlight)
  const allProcessed = results.every((r) => r.unprocessed === 0 && r.failed === 0)
  const onceEach = results.every((r) => r.eventsNotOnce === 0 && r.storedTwice === 0)
  const apiAll = results.every((r) => r.apiOk === r.apiChecked)
  out.push("")
  out.push(`nothing acknowledged was lost:                 ${lost === 0 ? "yes" : `NO (${lost})`}`)
  out.push(`stored-not-acknowledged within the in-flight: ${inFlightOk ? "yes" : "NO"}`)
  out.push(`every stored message processed after restart: ${allProcessed ? "yes" : "NO"}`)
  out.push(`nothing stored or announced twice:             ${onceEach ? "yes" : "NO"}`)
  out.push(`every acknowledged message readable (API):     ${apiAll ? "yes" : "NO"}`)
  const countersExact = results.every((r) => r.countersOff === 0)
  out.push(`counters equal a recount after the crash:      ${countersExact ? "yes" : "NO"}`)
  process.stdout.write(out.join("\n") + "\n")
  return lost === 0 && countersExact ? 0 : 1
}

await session.run(overallTimeoutMs, main)
