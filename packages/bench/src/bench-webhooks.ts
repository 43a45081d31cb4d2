/**
 * Webhook delivery (issue: "Deliveries per second to a local HTTPS receiver (goal >= 1,000/s)
 * and time from an SMTP 250 to the webhook arriving at the receiver (goal p50 <= 50 ms).")
 *
 * What it does:
 * 1. runs the testkit's HTTPS receiver (node:https, in this process, with a test CA and a leaf
 *    certificate for 127.0.0.1 made with openssl, answering 200 at once) on 127.0.0.1;
 * 2. starts `burnbox start` (API, SMTP ingest and worker) on a fresh temporary data dir with
 *    BURNBOX_WEBHOOK_ALLOW_PRIVATE=true and BURNBOX_WEBHOOK_CA_FILE=<the CA> (the development
 *    and test mode that allows a loopback receiver on a port other than 443);
 * 3. creates a pro account with the CLI (limits raised), a token with read, manage-aliases,
 *    test and webhooks, claims an alias, and registers BENCH_ENDPOINTS (1) endpoints
 *    https://127.0.0.1:<port>/hook/<n> with subscription {"mode":"all"} over the API;
 * 4. latency, sequential: BENCH_LATENCY_MESSAGES (200) SMTP messages one at a time on one
 *    connection, each waiting for its webhooks before the next; for each, the time from the 250
 *    ("stored as <id>") to the arrival of the message.received webhook whose data.message_id is
 *    that id; split, from the database's timestamps, into pipeline, queueing and the HTTPS POST;
 * 5. latency, paced: BENCH_RATE (20) messages/s for BENCH_RATE_SECONDS (10) over 4 connections;
 * 6. throughput: BENCH_EVENTS (5,000) message.received events inserted into the `events` outbox
 *    in one transaction (valid evt_ ULID ids, the data of a real event), then NOTIFY; measures
 *    how fast the receiver gets them, for at most BENCH_THROUGHPUT_SECONDS (events x 40 ms, at
 *    least 120): steady deliveries/s between the 10th and 90th percentile of the arrivals, and
 *    overall; with the CPU shares and what PostgreSQL's backends waited for;
 * 7. verifies signatures of a few deliveries with the `standardwebhooks` package (the
 *    testkit's verifyWithStandardWebhooks);
 * 8. prints a table with the goals; stops everything it started by pid and removes its temp
 *    dirs, also on failure, timeout or Ctrl-C.
 *
 * BENCH_PROFILE=1 runs the service with --cpu-prof and prints where its CPU time went (the whole
 * service lifetime). BENCH_TRUST=node-extra-ca trusts the receiver's CA through
 * NODE_EXTRA_CA_CERTS instead of BURNBOX_WEBHOOK_CA_FILE (see `trust` below). Environment also:
 * BENCH_QUIET_WAIT_SECONDS (how long to wait for other benchmarks to end, 900),
 * BENCH_LOG_DIR.
 */
import { availableParallelism, cpus } from "node:os"
import { type ReceivedRequest, SmtpClient, startReceiver, verifyWithStandardWebhooks } from "@burnbox/testkit"
import { Burnbox, sampleWaits, Session, waitsByStatementText, waitsText } from "./lib/burnbox.ts"
import { cpuShare, cpuSnapshot, distribution, type Distribution, envInt, epochMs, fmt, loadAverage, median, serverCpuCell, sleep, table } from "./lib/common.ts"
import { interferenceNote, waitForQuietMachine } from "./lib/quiet.ts"
import { eventIds, summarizeProfile } from "./lib/profile.ts"
import { countsText, type Delivery, messageFactory, runSmtpLoad } from "./lib/smtp.ts"

const session = new Session("bench:webhooks")
const log = session.log
const out = (line = "") => process.stdout.write(line + "\n")

const endpoints = envInt("BENCH_ENDPOINTS", 1, 1)
const latencyMessages = envInt("BENCH_LATENCY_MESSAGES", 200, 1)
const rate = envInt("BENCH_RATE", 20, 0)
const rateSeconds = envInt("BENCH_RATE_SECONDS", 10, 1)
const events = envInt("BENCH_EVENTS", 5_000, 100)
const profile = process.env["BENCH_PROFILE"] === "1"
/**
 * How the service trusts the receiver's CA. `cafile` (default): BURNBOX_WEBHOOK_CA_FILE, the
 * development/test setting. `node-extra-ca`: NODE_EXTRA_CA_CERTS for the service's Node instead,
 * so delivery takes the production code path (no `ca` option: Node's default trust store).
 */
const trust = process.env["BENCH_TRUST"] ?? "cafile"
if (trust !== "cafile" && trust !== "node-extra-ca") throw new Error(`BENCH_TRUST must be cafile or node-extra-ca, got ${trust}`)
const goals = { perSecond: 1_000, p50: 50 }
const email = "bench-webhooks@example.com"
const throughputTimeoutMs = envInt("BENCH_THROUGHPUT_SECONDS", Math.max(120, Math.round(events * 0.04)), 10) * 1_000
const overallTimeoutMs = 5 * 60_000 + latencyMessages * 12_000 + rateSeconds * 1_000 + 120_000 + throughputTimeoutMs + 15 * 60_000

const ms = (n: number, digits = 1) => fmt(n, digits)
const dist = (d: Distribution) => `p50 ${ms(d.p50)}, p95 ${ms(d.p95)}, p99 ${ms(d.p99)}, max ${ms(d.max)} ms (n=${d.count})`

/** What the benchmark reads of a delivery: when it arrived, its webhook-id, its type and message. */
interface Arrival {
  readonly at: number
  readonly webhookId: string
  readonly type: string
  readonly messageId: number | undefined
}

const arrivalOf = (request: ReceivedRequest): Arrival => {
  let type = ""
  let messageId: number | undefined
  try {
    const body = JSON.parse(request.text) as { type?: string; data?: { message_id?: unknown } }
    type = String(body.type)
    messageId = typeof body.data?.message_id === "number" ? body.data.message_id : undefined
  } catch {
    // not the JSON envelope: counted as no type
  }
  return { at: request.receivedAt, webhookId: String(request.headers["webhook-id"]), type, messageId }
}

const main = async (): Promise<number> => {
  out(`# bench-webhooks: deliveries/s and SMTP 250 -> webhook latency`)
  out(`machine: ${availableParallelism()} cores (${cpus()[0]?.model ?? "?"}), Node ${process.version}, load average ${loadAverage()}`)

  const receiver = await startReceiver()
  const certificates = receiver.certificates
  session.onCleanup(() => receiver.close())
  const profileDir = profile ? session.tempDir("burnbox-bench-webhooks-prof-") : undefined
  if (profileDir !== undefined) process.env["BENCH_NODE_ARGS"] = `--cpu-prof --cpu-prof-dir=${profileDir}`
  const service = await Burnbox.create(session, {
    logName: "bench-webhooks",
    command: "start",
    extraEnv: trust === "cafile"
      ? { BURNBOX_WEBHOOK_ALLOW_PRIVATE: "true", BURNBOX_WEBHOOK_CA_FILE: certificates.caFile }
      : { BURNBOX_WEBHOOK_ALLOW_PRIVATE: "true", NODE_EXTRA_CA_CERTS: certificates.caFile }
  })
  out(`service trust of the receiver's CA: ${trust === "cafile" ? "BURNBOX_WEBHOOK_CA_FILE (development/test setting)" : "NODE_EXTRA_CA_CERTS (BURNBOX_WEBHOOK_CA_FILE unset: the production delivery path)"}; BURNBOX_WEBHOOK_ALLOW_PRIVATE=true`)
  session.afterCleanup(() => service.summarizeLog())
  const own = () => [service.pid, service.postmasterPid()].filter((p): p is number => p !== undefined)
  out(await waitForQuietMachine(log, "starting the service", { own }))
  await service.start()
  const token = await service.setupAccount(email, "read,manage-aliases,test,webhooks")
  const alias = await service.claimAlias(token)
  const secrets: Array<string> = []
  for (let n = 1; n <= endpoints; n++) {
    const created = await service.api("POST", "/api/v1/webhooks", token, { name: `bench ${n}`, url: `${receiver.url}/${n}`, subscription: { mode: "all" } })
    const secret = (created.body as { secret?: string } | undefined)?.secret
    if ((created.status !== 200 && created.status !== 201) || secret === undefined) throw new Error(`POST /api/v1/webhooks answered ${created.status}: ${created.text}`)
    secrets.push(secret)
  }
  log(`receiver https://127.0.0.1:${receiver.port}/hook/1..${endpoints}; alias ${alias.address}; ${endpoints} endpoint(s), subscription all`)
  const db = await service.db()

  // Arrivals by message id and type, to match 250s with their webhooks.
  const byMessage = new Map<number, Map<string, Arrival>>()
  const waiters = new Map<number, () => void>()
  receiver.onRequest = (request) => {
    const arrival = arrivalOf(request)
    if (arrival.messageId === undefined) return
    let types = byMessage.get(arrival.messageId)
    if (types === undefined) byMessage.set(arrival.messageId, types = new Map())
    if (!types.has(arrival.type)) types.set(arrival.type, arrival)
    waiters.get(arrival.messageId)?.()
  }
  /** Resolves when message `id` has its webhooks of `types` (one per endpoint is enough), or after `timeoutMs`. */
  const waitForWebhooks = (id: number, types: ReadonlyArray<string>, timeoutMs: number) =>
    new Promise<boolean>((ok) => {
      const done = () => types.every((t) => byMessage.get(id)?.has(t) === true)
      if (done()) return ok(true)
      const timer = setTimeout(() => {
        waiters.delete(id)
        ok(false)
      }, timeoutMs)
      waiters.set(id, () => {
        if (!done()) return
        clearTimeout(timer)
        waiters.delete(id)
        ok(true)
      })
    })

  const factory = messageFactory({ from: "sender@bench-sender.test", to: alias.address, size: 2_000, tag: "webhooks" })
  const storedId = (text: string) => {
    const match = /stored as (\d+)/.exec(text)
    return match === null ? undefined : Number(match[1])
  }

  // -- latency, one message at a time ---------------------------------------------------------
  out(await waitForQuietMachine(log, "the sequential latency run", { own }))
  const connection = await SmtpClient.connect(service.smtpPort, { ehlo: "bench.localhost" })
  const sendOne = async (index: number): Promise<{ id: number; at: number }> => {
    const message = factory.make(index)
    const { envelope, reply } = await connection.transaction(message.from, message.to, message.data, { stuffed: true })
    if (reply === undefined) throw new Error(`SMTP envelope refused: ${envelope.map((r) => `${r.code} ${r.text}`).join(" / ")}`)
    const at = epochMs()
    const id = storedId(reply.text)
    if (reply.code !== 250 || id === undefined) throw new Error(`SMTP DATA answered ${reply.code} ${reply.text}`)
    return { id, at }
  }
  // Warm-up (and the signature check): a few messages, not measured.
  for (let i = 0; i < 5; i++) {
    const { id } = await sendOne(1_000_000 + i)
    if (!(await waitForWebhooks(id, ["message.received", "message.otp_extracted"], 15_000))) throw new Error(`no webhooks for warm-up message ${id} within 15 s; see ${service.logPath}`)
  }
  const sequential: Array<{ id: number; at: number; received: number; otp: number | undefined }> = []
  let missing = 0
  for (let i = 0; i < latencyMessages; i++) {
    session.checkInterrupted()
    const { id, at } = await sendOne(i)
    const ok = await waitForWebhooks(id, ["message.received"], 10_000)
    if (!ok) {
      missing++
      continue
    }
    await waitForWebhooks(id, ["message.otp_extracted"], 2_000)
    const types = byMessage.get(id)!
    sequential.push({ id, at, received: types.get("message.received")!.at - at, otp: types.has("message.otp_extracted") ? types.get("message.otp_extracted")!.at - at : undefined })
    await sleep(10)
  }
  await connection.quit()
  const notes: Array<string> = []
  const note = (what: string) => {
    const n = interferenceNote(what, own())
    if (n !== undefined) notes.push(n)
  }
  note("the sequential latency run")
  const seqReceived = distribution(sequential.map((s) => s.received))
  const seqOtp = distribution(sequential.flatMap((s) => s.otp === undefined ? [] : [s.otp]))

  // Where the time goes, from the service's own timestamps (ms resolution, same machine clock).
  const ids = sequential.map((s) => s.id)
  const parts = (await db.query<{ message_id: number; received_at: Date; processing_started_at: Date | null; processed_at: Date; attempt_at: Date; latency_ms: number; event_time: Date }>(`
    SELECT (e.data->>'message_id')::int AS message_id, m.received_at, m.processing_started_at, m.processed_at,
           d.last_attempt_at AS attempt_at, d.latency_ms, e.time AS event_time
    FROM events e
    JOIN webhook_deliveries d ON d.event_id = e.id
    JOIN messages m ON m.id = (e.data->>'message_id')::int
    WHERE e.type = 'message.received' AND (e.data->>'message_id')::int = ANY($1::int[]) AND d.status = 'succeeded'`, [ids])).rows
  const at250 = new Map(sequential.map((s) => [s.id, s]))
  const split = {
    toClaim: [] as Array<number>,
    pipeline: [] as Array<number>,
    toAttempt: [] as Array<number>,
    post: [] as Array<number>,
    recorded: [] as Array<number>
  }
  const perMessage: Array<{ id: number; total: number; text: string }> = []
  for (const p of parts) {
    const s = at250.get(p.message_id)
    if (s === undefined) continue
    const arrival = s.at + s.received
    const attemptStart = p.attempt_at.getTime() - p.latency_ms
    const toClaim = p.processing_started_at === null ? Number.NaN : p.processing_started_at.getTime() - s.at
    const pipeline = p.event_time.getTime() - (p.processing_started_at?.getTime() ?? s.at)
    const toAttempt = attemptStart - p.event_time.getTime()
    if (p.processing_started_at !== null) split.toClaim.push(toClaim)
    split.pipeline.push(pipeline)
    split.toAttempt.push(toAttempt)
    split.post.push(p.latency_ms)
    split.recorded.push(p.attempt_at.getTime() - arrival)
    perMessage.push({
      id: p.message_id,
      total: s.received,
      text: `message ${p.message_id}: ${ms(s.received)} ms = to claim ${ms(toClaim)} + to store ${ms(pipeline)} + to POST ${ms(toAttempt)} + POST ${p.latency_ms} (+ ${ms(s.received - toClaim - pipeline - toAttempt - p.latency_ms)} unaccounted)`
    })
  }
  const slowest = perMessage.sort((a, b) => b.total - a.total).slice(0, 3)

  // -- latency, paced -------------------------------------------------------------------------
  let paced: { received: Distribution; otp: Distribution; accepted: number; missing: number; rejected: string } | undefined
  if (rate > 0) {
    out(await waitForQuietMachine(log, `the paced latency run (${rate}/s)`, { own }))
    const replies: Array<{ id: number; at: number }> = []
    const result = await runSmtpLoad({
      port: service.smtpPort,
      connections: 4,
      sourceAddresses: 0,
      make: (i, c) => factory.make(2_000_000 + i, c),
      rate,
      seconds: rateSeconds,
      timeoutMs: rateSeconds * 1_000 + 60_000,
      onDelivery: (d: Delivery) => {
        const id = d.reply.code === 250 ? storedId(d.reply.text) : undefined
        if (id !== undefined) replies.push({ id, at: d.repliedAt })
      }
    })
    note("the paced latency run")
    const settled = await Promise.all(replies.map((r) => waitForWebhooks(r.id, ["message.received", "message.otp_extracted"], 30_000)))
    paced = {
      received: distribution(replies.flatMap((r) => { const a = byMessage.get(r.id)?.get("message.received"); return a === undefined ? [] : [a.at - r.at] })),
      otp: distribution(replies.flatMap((r) => { const a = byMessage.get(r.id)?.get("message.otp_extracted"); return a === undefined ? [] : [a.at - r.at] })),
      accepted: result.accepted,
      missing: settled.filter((s) => !s).length,
      rejected: countsText(result.rejected)
    }
  }

  // -- throughput -----------------------------------------------------------------------------
  // The data of a real message.received event, with a message id no message has (the receiver
  // counts these deliveries by webhook-id).
  const [template] = (await db.query<{ data: Record<string, unknown> }>(
    "SELECT data FROM events WHERE type = 'message.received' ORDER BY time DESC LIMIT 1"
  )).rows
  if (template === undefined) throw new Error("no message.received event to copy")
  const [acct] = (await db.query<{ account_id: number; alias_id: number }>(
    "SELECT account_id, alias_id FROM events WHERE type = 'message.received' ORDER BY time DESC LIMIT 1"
  )).rows
  out(await waitForQuietMachine(log, `the throughput run (${fmt(events)} events)`, { own }))
  await sleep(1_000) // let the service settle after the paced run
  const idsOut = eventIds(events)
  const wanted = new Set(idsOut)
  const throughputArrivals: Array<number> = []
  const previous = receiver.onRequest
  receiver.onRequest = (request) => {
    if (wanted.has(String(request.headers["webhook-id"]))) throughputArrivals.push(request.receivedAt)
    previous?.(request)
  }
  const throughputFrom = receiver.requests.length
  const connectionsBefore = receiver.connections()
  const waits = sampleWaits(await service.db(), 50)
  const cpuBefore = cpuSnapshot(service.pid)
  const t0 = epochMs()
  await db.query("BEGIN")
  await db.query(
    `INSERT INTO events (id, account_id, alias_id, type, time, data)
     SELECT e.id, $2, $3, 'message.received', now(), $4::jsonb || jsonb_build_object('message_id', 2000000000 - e.n::int)
     FROM unnest($1::text[]) WITH ORDINALITY AS e(id, n)`,
    [idsOut, acct!.account_id, acct!.alias_id, JSON.stringify(template.data)]
  )
  await db.query("SELECT pg_notify('burnbox_events', '')")
  await db.query("COMMIT")
  const committed = epochMs()
  log(`${fmt(events)} events committed in ${ms(committed - t0)} ms; waiting for ${fmt(events * endpoints)} deliveries`)
  const expected = events * endpoints
  const deadline = Date.now() + throughputTimeoutMs
  let lastReport = Date.now()
  while (throughputArrivals.length < expected && Date.now() < deadline) {
    await sleep(100)
    if (Date.now() - lastReport >= 5_000) {
      lastReport = Date.now()
      log(`  ${fmt(throughputArrivals.length)} of ${fmt(expected)} delivered`)
    }
  }
  const cpu = cpuShare(cpuBefore, cpuSnapshot(service.pid))
  note("the throughput run")
  const waited = await waits.stop()
  receiver.onRequest = previous
  const arrivals = [...throughputArrivals].sort((a, b) => a - b)
  const q = (p: number) => arrivals[Math.min(arrivals.length - 1, Math.max(0, Math.floor(p * arrivals.length) - 1))]!
  const steady = arrivals.length >= 20 ? (0.8 * arrivals.length) / ((q(0.9) - q(0.1)) / 1000) : Number.NaN
  const overall = arrivals.length >= 2 ? arrivals.length / ((arrivals[arrivals.length - 1]! - arrivals[0]!) / 1000) : Number.NaN
  const statuses = (await db.query<{ status: string; n: number }>(
    "SELECT status, count(*)::int AS n FROM webhook_deliveries WHERE event_id = ANY($1::text[]) GROUP BY status ORDER BY status", [idsOut]
  )).rows
  const failures = (await db.query<{ error: string; n: number }>(
    `SELECT coalesce(a.error_code, 'http ' || a.http_status) AS error, count(*)::int AS n
     FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
     WHERE d.event_id = ANY($1::text[]) AND a.status = 'failed' GROUP BY 1 ORDER BY 2 DESC`, [idsOut]
  )).rows
  const postMs = (await db.query<{ p50: number; p99: number }>(
    `SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY latency_ms) AS p50, percentile_disc(0.99) WITHIN GROUP (ORDER BY latency_ms) AS p99
     FROM webhook_deliveries WHERE event_id = ANY($1::text[]) AND status = 'succeeded'`, [idsOut]
  )).rows[0]

  // -- signatures -----------------------------------------------------------------------------
  // The first deliveries and three of the throughput run, checked with the official package.
  const checked = [...receiver.requests.slice(0, 5), ...receiver.requests.slice(throughputFrom, throughputFrom + 3)]
  let ok = 0
  const problems: Array<string> = []
  for (const request of checked) {
    const endpoint = Number(/\/hook\/(\d+)/.exec(request.path)?.[1] ?? 1)
    try {
      const body = verifyWithStandardWebhooks(secrets[endpoint - 1] ?? secrets[0]!, request) as { id?: string }
      if (body.id !== request.headers["webhook-id"]) throw new Error(`body id ${body.id} is not webhook-id ${String(request.headers["webhook-id"])}`)
      ok++
    } catch (error) {
      problems.push(error instanceof Error ? error.message : String(error))
    }
  }
  const verification = `${ok} of ${checked.length} deliveries verified with standardwebhooks${problems.length > 0 ? `; failures: ${problems.join("; ")}` : ""}`

  // -- report ---------------------------------------------------------------------------------
  out()
  out("## Latency: SMTP 250 -> webhook arrival at the receiver (ms, this machine's clock)")
  out(`sequential, one message at a time, ${sequential.length} messages (${missing} without a webhook within 10 s):`)
  out(`  message.received:      ${dist(seqReceived)}`)
  out(`  message.otp_extracted: ${dist(seqOtp)}`)
  out(`  split of message.received (medians, from messages/events/webhook_deliveries timestamps): 250 -> pipeline claim ${ms(median(split.toClaim))}, ` +
    `claim -> event committed ${ms(median(split.pipeline))}, event -> POST starts ${ms(median(split.toAttempt))}, POST (TLS connect + request + response) ${ms(median(split.post))}, ` +
    `receiver arrival -> attempt recorded ${ms(median(split.recorded))}`)
  out(`  the 3 slowest: ${slowest.map((m) => m.text).join("; ")}`)
  if (paced !== undefined) {
    out(`paced, ${rate}/s for ${rateSeconds} s over 4 connections: ${paced.accepted} accepted (rejected: ${paced.rejected}), ${paced.missing} without both webhooks within 30 s`)
    out(`  message.received:      ${dist(paced.received)}`)
    out(`  message.otp_extracted: ${dist(paced.otp)}`)
  }
  out()
  out(`## Throughput: ${fmt(events)} outbox events x ${endpoints} endpoint(s) = ${fmt(expected)} deliveries`)
  out(`delivered ${fmt(arrivals.length)} of ${fmt(expected)}; first arrival ${ms((arrivals[0] ?? Number.NaN) - committed)} ms after the commit, last ${fmt(((arrivals[arrivals.length - 1] ?? Number.NaN) - committed) / 1000, 1)} s after`)
  out(`deliveries/s: steady (10th..90th percentile of arrivals) ${fmt(steady)}, overall (first..last arrival) ${fmt(overall)}`)
  out(`delivery rows: ${statuses.map((s) => `${s.status} ${fmt(s.n)}`).join(", ")}; failed attempts: ${failures.length === 0 ? "none" : failures.map((f) => `${f.error} ${f.n}`).join(", ")}`)
  out(`POST latency recorded by the service (latency_ms): p50 ${postMs?.p50} ms, p99 ${postMs?.p99} ms; new TLS connections at the receiver: ${fmt(receiver.connections() - connectionsBefore)}`)
  out(`CPU (% of one core): service+PostgreSQL ${serverCpuCell(cpu)} (node+pg), this process (receiver) ${fmt(cpu.generator)}, other ${fmt(cpu.other)}`)
  out(`PostgreSQL backends: ${waitsText(waited)}`)
  out(`  by statement: ${waitsByStatementText(waited, 6)}`)
  out()
  out(`signatures: ${verification}`)
  for (const n of notes) out(n)
  out()
  const p50 = seqReceived.p50
  out(`## Results (${availableParallelism()} cores, load average now ${loadAverage()})`)
  out(table(["measure", "value", "goal", "met"], [
    ["deliveries/s, steady", fmt(steady), `>= ${fmt(goals.perSecond)}`, steady >= goals.perSecond ? "yes" : "NO"],
    ["deliveries/s, overall", fmt(overall), "", ""],
    ["250 -> message.received webhook, sequential p50 (ms)", ms(p50), `<= ${goals.p50}`, p50 <= goals.p50 ? "yes" : "NO"],
    ["250 -> message.received webhook, sequential p95 / p99 (ms)", `${ms(seqReceived.p95)} / ${ms(seqReceived.p99)}`, "", ""],
    ...(paced === undefined ? [] : [[`250 -> message.received webhook at ${rate}/s, p50 / p99 (ms)`, `${ms(paced.received.p50)} / ${ms(paced.received.p99)}`, `p50 <= ${goals.p50}`, paced.received.p50 <= goals.p50 ? "yes" : "NO"]])
  ]))
  if (profileDir !== undefined) {
    await service.stop()
    for (const line of summarizeProfile(profileDir)) out(line)
  }
  return 0
}

await session.run(overallTimeoutMs, main)
