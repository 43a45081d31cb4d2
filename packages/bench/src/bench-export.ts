/**
 * Mailbox exports (issue #33): "Export of 10,000 messages of 5 KB and of one mailbox of ~1 GiB:
 * seconds and peak RSS of the worker. Goal: >= 5,000 messages/s and peak RSS growth under
 * 100 MiB for the 1 GiB mailbox."
 *
 * Usage: pnpm bench:export
 *
 * What it does:
 * 1. starts `burnbox start` (API, SMTP ingest and worker in one node process: the worker whose
 *    memory is measured) on a fresh temporary data dir, on free ports, bound to 127.0.0.1;
 *    creates a pro account (quota raised), a token and two aliases;
 * 2. injects one real message into each alias (POST /test/messages, through the pipeline), then
 *    copies it in SQL into EXPORT_MESSAGES (10,000) messages of EXPORT_SIZE (5,120) bytes in the
 *    first alias, and EXPORT_BIG_BYTES (1 GiB) in messages of EXPORT_BIG_SIZE (256 KiB) in the
 *    second; each message's raw bytes differ (its id hashed into the body), so no two are alike;
 * 3. for each alias: samples the service's VmRSS for 1 s (baseline: the median), requests the
 *    export (POST /exports {aliasId}), samples VmRSS every 20 ms and GET /exports/{id} every
 *    50 ms until it is ready; the build time runs from the first answer that shows it processing
 *    to the first that shows it ready (pg-boss's polling before it starts is shown apart); then
 *    downloads the ZIP and checks its size;
 * 4. the reference, side by side (the machine is shared: compare the ratio): the same mail read
 *    from PostgreSQL by the benchmark alone, 500 messages a query in id order, no ZIP;
 * 5. prints messages/s, MB/s, the ratio to the reference, baseline, peak and growth of RSS, against the goals.
 *
 * Environment: EXPORT_MESSAGES, EXPORT_SIZE, EXPORT_BIG_BYTES, EXPORT_BIG_SIZE, BENCH_LOG_DIR.
 */
import { availableParallelism, cpus } from "node:os"
import { zstdDecompressSync } from "node:zlib"
import { Burnbox, type PgClient, Session } from "./lib/burnbox.ts"
import { envInt, fmt, loadAverage, median, memoryOf, mib, sleep, table, waitFor } from "./lib/common.ts"

const messages = envInt("EXPORT_MESSAGES", 10_000, 10)
const size = envInt("EXPORT_SIZE", 5_120, 512)
const bigBytes = envInt("EXPORT_BIG_BYTES", 1024 ** 3, 1024 * 1024)
const bigSize = envInt("EXPORT_BIG_SIZE", 256 * 1024, 4096)
const goals = { messagesPerSecond: 5_000, growthMiB: 100 }
const overallTimeoutMs = 60 * 60_000

const session = new Session("bench:export")
const log = session.log
const out = (line = "") => process.stdout.write(line + "\n")

/**
 * Copies message `template` (its row and raw bytes) into `count` more messages of `bytes` bytes
 * each: the template's headers, then a body of its id's hash repeated, so every .eml differs.
 */
const copyMessages = async (db: PgClient, template: number, count: number, bytes: number) => {
  const columns = (await db.query<{ name: string }>(`
    SELECT attname AS name FROM pg_attribute
    WHERE attrelid = 'messages'::regclass AND attnum > 0 AND NOT attisdropped AND attname <> 'id' AND attgenerated = '' AND attidentity = ''
    ORDER BY attnum`)).rows.map((r) => `"${r.name}"`)
  const list = columns.join(", ")
  // The template's header, from its raw bytes as received (stored zstd-compressed since migration 0028).
  const [stored] = (await db.query<{ raw: Buffer; zstd: boolean }>("SELECT raw, zstd FROM message_raw WHERE message_id = $1", [template])).rows
  const raw = stored!.zstd ? zstdDecompressSync(stored!.raw) : stored!.raw
  const head = raw.subarray(0, raw.indexOf("\r\n\r\n") + 4)
  for (let done = 0; done < count;) {
    const chunk = Math.min(count - done, Math.max(1, Math.floor(64 * 1024 * 1024 / bytes)))
    await db.query(`
      WITH copies AS (
        INSERT INTO messages (${list}) SELECT ${list.replace(/"size_bytes"/, String(bytes))} FROM messages, generate_series(1, $2) WHERE id = $1
        RETURNING id)
      INSERT INTO message_raw (message_id, raw)
      SELECT c.id, substring($4::bytea || convert_to(repeat(md5(c.id::text) || E'\\r\\n', $3 / 34 + 1), 'UTF8') FROM 1 FOR $3)
      FROM copies c`,
      [template, chunk, bytes, head])
    done += chunk
    session.checkInterrupted()
  }
}

interface Measured {
  readonly name: string
  readonly count: number
  readonly bytes: number
  readonly queuedSeconds: number
  readonly buildSeconds: number
  readonly zipBytes: number
  readonly downloadSeconds: number
  readonly referenceSeconds: number
  readonly baseline: number
  readonly peak: number
}

const measure = async (service: Burnbox, token: string, name: string, aliasId: number): Promise<Measured> => {
  const pid = service.pid
  const samples: Array<number> = []
  for (let i = 0; i < 50; i++) {
    samples.push(memoryOf(pid)?.rss ?? Number.NaN)
    await sleep(20)
  }
  const baseline = median(samples)
  let peak = baseline
  let sampling = true
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, memoryOf(pid)?.rss ?? 0)
      await sleep(20)
    }
  })()
  const requested = performance.now()
  const created = await service.api("POST", "/api/v1/exports", token, { aliasId })
  if (created.status !== 202) throw new Error(`POST /exports answered ${created.status}: ${created.text}`)
  const id = (created.body as { id: number }).id
  let started: number | undefined
  const ready = await waitFor(async () => {
    const answer = await service.api("GET", `/api/v1/exports/${id}`, token)
    const status = (answer.body as { status?: string } | undefined)?.status
    if (status === "processing") started ??= performance.now()
    if (status === "failed") throw new Error(`export ${id} failed: ${answer.text}`)
    return status === "ready" ? performance.now() : undefined
  }, 30 * 60_000, `export ${id} ready`, 50)
  sampling = false
  await sampler
  const downloadStarted = performance.now()
  const response = await fetch(`${service.baseUrl}/api/v1/exports/${id}/download`, { headers: { authorization: `Bearer ${token}` } })
  let zipBytes = 0
  for await (const chunk of response.body!) zipBytes += (chunk as Uint8Array).byteLength
  const downloadSeconds = (performance.now() - downloadStarted) / 1000
  if (zipBytes !== Number(response.headers.get("content-length"))) throw new Error(`the download of export ${id} was ${zipBytes} bytes, not its Content-Length`)
  const db = await service.db()
  // The reference, side by side: the same mail read from PostgreSQL alone (500 messages a query,
  // in id order, as the export reads it), with no ZIP, hashing or storing.
  const referenceStarted = performance.now()
  for (let after = 0; ;) {
    const { rows } = await db.query<{ id: number; raw: Buffer }>(
      "SELECT m.id, r.raw FROM messages m JOIN message_raw r ON r.message_id = m.id WHERE m.alias_id = $1 AND m.id > $2 ORDER BY m.id LIMIT 500",
      [aliasId, after]
    )
    if (rows.length === 0) break
    after = rows[rows.length - 1]!.id
  }
  const referenceSeconds = (performance.now() - referenceStarted) / 1000
  const [row] = (await db.query<{ n: number; bytes: string }>(
    "SELECT count(*)::int AS n, sum(octet_length(r.raw))::bigint AS bytes FROM messages m JOIN message_raw r ON r.message_id = m.id WHERE m.alias_id = $1",
    [aliasId]
  )).rows
  await service.closeDb(db)
  const begun = started ?? requested
  return {
    name,
    count: row!.n,
    bytes: Number(row!.bytes),
    queuedSeconds: (begun - requested) / 1000,
    buildSeconds: (ready - begun) / 1000,
    zipBytes,
    downloadSeconds,
    referenceSeconds,
    baseline,
    peak
  }
}

const main = async (): Promise<number> => {
  out(`# bench-export: ${fmt(messages)} messages of ${fmt(size)} bytes, and ~${mib(bigBytes, 0)} in messages of ${fmt(bigSize)} bytes`)
  out(`machine: ${availableParallelism()} cores (${cpus()[0]?.model ?? "?"}), Node ${process.version}, load average ${loadAverage()}`)
  out()
  const service = await Burnbox.create(session, { logName: "bench-export" })
  session.afterCleanup(() => service.summarizeLog())
  await service.start()
  const token = await service.setupAccount("bench-export@example.com", "read,manage-aliases,test")
  const small = await service.claimAlias(token)
  const big = await service.claimAlias(token)
  const db = await service.db()
  for (const [alias, count, bytes] of [[small, messages, size], [big, Math.max(1, Math.round(bigBytes / bigSize)), bigSize]] as const) {
    const injected = await service.api("POST", "/api/v1/test/messages", token, { aliasId: alias.id, from: "bench@example.com", subject: "export bench", text: "hello" })
    if (injected.status !== 202) throw new Error(`POST /test/messages answered ${injected.status}: ${injected.text}`)
    const template = (injected.body as { id: number }).id
    await waitFor(async () => (await db.query("SELECT 1 FROM messages WHERE id = $1 AND processing_status = 'processed'", [template])).rowCount === 1 || undefined, 30_000, "the template message processed")
    const t0 = performance.now()
    // The template itself goes: every message of the alias is a copy of the asked size.
    await copyMessages(db, template, count, bytes)
    await db.query("DELETE FROM messages WHERE id = $1", [template])
    log(`loaded ${fmt(count)} messages of ${fmt(bytes)} bytes into ${alias.address} in ${fmt((performance.now() - t0) / 1000, 1)} s`)
  }
  await db.query("VACUUM ANALYZE messages")
  await db.query("VACUUM ANALYZE message_raw")

  const results = [await measure(service, token, `${fmt(messages)} x ${fmt(size)} B`, small.id), await measure(service, token, `~${mib(bigBytes, 0)} (${fmt(bigSize)} B each)`, big.id)]
  out(table(
    ["export", "messages", "mail MiB", "ZIP MiB", "waited for a worker s", "build s", "messages/s", "MiB/s", "reference: read the mail s", "build / reference", "download s", "RSS before", "RSS peak", "growth"],
    results.map((r) => [
      r.name,
      fmt(r.count),
      fmt(r.bytes / 1_048_576, 1),
      fmt(r.zipBytes / 1_048_576, 1),
      fmt(r.queuedSeconds, 2),
      fmt(r.buildSeconds, 2),
      fmt(r.count / r.buildSeconds),
      fmt(r.bytes / 1_048_576 / r.buildSeconds, 1),
      fmt(r.referenceSeconds, 2),
      `${fmt(r.buildSeconds / r.referenceSeconds, 1)}x`,
      fmt(r.downloadSeconds, 2),
      mib(r.baseline),
      mib(r.peak),
      mib(r.peak - r.baseline)
    ])
  ))
  const [first, second] = results as [Measured, Measured]
  out()
  out(`goal >= ${fmt(goals.messagesPerSecond)} messages/s (${fmt(messages)} x ${fmt(size)} B): ${fmt(first.count / first.buildSeconds)} -> ${first.count / first.buildSeconds >= goals.messagesPerSecond ? "met" : "NOT met"}`)
  out(`goal RSS growth < ${goals.growthMiB} MiB (~${mib(bigBytes, 0)} mailbox): ${mib(second.peak - second.baseline)} -> ${second.peak - second.baseline < goals.growthMiB * 1_048_576 ? "met" : "NOT met"}`)
  out("(the service is `burnbox start`: the worker's build runs beside the API that answers the polls; the build time runs from the first poll that saw it processing)")
  return 0
}

await session.run(overallTimeoutMs, main)
