/**
 * Hostile mail cannot stall the service (issue #15; architecture.md pipeline step 2): mail built
 * to make parsing, sanitizing or extraction cost far more than its size is worked on in the
 * pipeline's mail worker threads, each message within an allowance of time and memory, and HTML
 * past the limits (domain mail/limits.ts) is never walked by the sanitizer's parser. Sent over
 * SMTP to the real ingest and pipeline, each hostile message ends processed or failed within its
 * allowance, its raw bytes kept, readable and counted toward storage; meanwhile GET /me and the
 * SMTP greeting keep answering and ordinary mail overtakes the slowest hostile message. HTML past
 * the limits is processed and rendered as text; only unparsable MIME fails. A message past its
 * allowance fails with a readable reason; one that exhausts its thread's heap fails and the
 * service goes on; a claim retried after crashes gives up after MaxAttempts.
 *
 * No stopwatch bound here but the generous one (10 s, far past any answer of a correct service
 * on a busy machine, far short of the event loop held for a hostile message: 56 s in issue #15).
 * The figures (each message's time, GET /me's and the greeting's p99, ordinary mail's latency)
 * are printed; `bench:hostile` measures them against their goals.
 */
import { cpus, loadavg } from "node:os"
import {
  claimAlias,
  dotStuff,
  type Harness,
  type HostileMail,
  hostileMails,
  manyLinks,
  type Session,
  SmtpClient,
  startHarness
} from "@burnbox/testkit"
import { defaultMailWorkLimits, MaxAttempts } from "@burnbox/worker"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
}

/**
 * Longest any answer may take: what a hostile message holding the event loop costs (seconds),
 * never what a busy machine costs a correct service. The goal (50 ms, issue #15) is
 * `bench:hostile`'s to measure.
 */
const GenerousMs = 10_000

/**
 * Sends over SMTP; answers the id of the stored message and when its 250 came. `stuffed`: the
 * bytes are dot-stuffed already, so this process (the service's too) spends nothing on them.
 */
const send = async (h: Harness, to: string, raw: Uint8Array, stuffed = false) => {
  const reply = await SmtpClient.sendOne(h.smtpPort, to, raw, "mallory@attacker.example", { stuffed })
  expect(reply.code, reply.text).toBe(250)
  const id = Number(/stored as (\d+)/.exec(reply.text)?.[1])
  expect(Number.isInteger(id), reply.text).toBe(true)
  return { id, acceptedAt: performance.now() }
}

interface Row {
  readonly id: number
  readonly processing_status: string
  readonly failure_reason: string | null
}

/** Polls the rows of `ids` until each is processed or failed; answers when each was first seen so, and the rows. */
const settle = async (h: Harness, ids: ReadonlyArray<number>, timeoutMs: number) => {
  const settledAt = new Map<number, number>()
  const deadline = performance.now() + timeoutMs
  let rows: Array<Row> = []
  while (settledAt.size < ids.length && performance.now() < deadline) {
    rows = await h.query<Row>("SELECT id, processing_status, failure_reason FROM messages WHERE id = ANY($1::int[])", [ids])
    for (const row of rows) {
      if ((row.processing_status === "processed" || row.processing_status === "failed") && !settledAt.has(row.id)) settledAt.set(row.id, performance.now())
    }
    await sleep(20)
  }
  rows = await h.query<Row>("SELECT id, processing_status, failure_reason FROM messages WHERE id = ANY($1::int[])", [ids])
  return { settledAt, rows: new Map(rows.map((row) => [row.id, row])) }
}

const ordinary = (to: string, n: number) =>
  Buffer.from(
    `From: Shop <news@shop.example>\r\nTo: ${to}\r\nSubject: Your code ${n}\r\nDate: Sat, 21 Nov 2026 11:59:00 +0000\r\n` +
      `Message-ID: <ordinary-${n}-${Date.now()}@shop.example>\r\n\r\nHello, your code is ${100000 + n}.\r\n`,
    "latin1"
  )

/** An account whose token may ask as often as the GET /me loop asks (600 a minute otherwise). */
const signupUnlimited = async (h: Harness) => {
  const owner = await h.signup({ plan: "pro" })
  await h.query(`UPDATE accounts SET overrides = '{"requestsPerMinute": 1000000, "requestsPerDay": 100000000}' WHERE id = $1`, [owner.accountId])
  return { owner, token: await h.createToken(owner, ["read"]) }
}

/** GET /me in a loop, one request at a time, until stopped: every answer's time. */
const meLoop = (h: Harness, token: string) => {
  const times: Array<number> = []
  const state = { running: true }
  const done = (async () => {
    while (state.running) {
      const started = performance.now()
      const answer = await h.request("/me", { token })
      times.push(performance.now() - started)
      expect(answer.status).toBe(200)
      // Paced: the loop must not be what keeps the event loop busy.
      await sleep(5)
    }
  })()
  return { times, stop: async () => {
    state.running = false
    await done
  } }
}

/** A new SMTP connection every 100 ms until stopped: the time to its 220 greeting. */
const greetingLoop = (h: Harness) => {
  const times: Array<number> = []
  const state = { running: true }
  const done = (async () => {
    while (state.running) {
      const started = performance.now()
      const client = await SmtpClient.open(h.smtpPort)
      const greeting = await client.read()
      times.push(performance.now() - started)
      expect(greeting.code).toBe(220)
      await client.quit()
      await sleep(100)
    }
  })()
  return { times, stop: async () => {
    state.running = false
    await done
  } }
}

/** Ordinary mail every 100 ms until stopped: each one's time from its 250 to processed, and when both were. */
const ordinaryLoop = (h: Harness, to: string) => {
  const latencies: Array<number> = []
  const spans: Array<{ readonly acceptedAt: number; readonly settledAt: number }> = []
  const pending: Array<Promise<void>> = []
  const state = { running: true }
  let n = 0
  const done = (async () => {
    while (state.running) {
      const sent = send(h, to, ordinary(to, ++n))
      pending.push(sent.then(async ({ acceptedAt, id }) => {
        const { settledAt, rows } = await settle(h, [id], 20_000)
        expect(rows.get(id)?.processing_status).toBe("processed")
        latencies.push(settledAt.get(id)! - acceptedAt)
        spans.push({ acceptedAt, settledAt: settledAt.get(id)! })
      }))
      await sleep(100)
    }
  })()
  return { latencies, spans, stop: async () => {
    state.running = false
    await done
    await Promise.all(pending)
  } }
}

/** The process's resident memory, sampled every 100 ms until stopped: the largest seen. */
const rssPeak = () => {
  let peak = process.memoryUsage().rss
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss)
  }, 100)
  return { stop: () => {
    clearInterval(timer)
    return peak
  } }
}

const rawOf = async (h: Harness, session: Session, id: number) => {
  const response = await fetch(`${h.baseUrl}/messages/${id}/raw`, { headers: { cookie: `service_session=${session.cookie}` } })
  return { status: response.status, bytes: Buffer.from(await response.arrayBuffer()) }
}

const figure = (values: ReadonlyArray<number>) =>
  `n=${values.length} p50=${percentile(values, 50).toFixed(1)} p99=${percentile(values, 99).toFixed(1)} max=${percentile(values, 100).toFixed(1)} ms`

// ---------------------------------------------------------------------------------------------

/**
 * A generous allowance: at the default (5 s of a thread's CPU, at most 15 s of wall time) a machine
 * busy several times over its cores fails the largest of these messages by time (seen: 100,000
 * links, 17 s from its 250 at a load average of 10 on 2 cores), which says nothing of the code.
 * What a message costs is bench:hostile's and bench:html-limits' figure; a refusal by time is the
 * poison's below (and mail-workers.test.ts').
 */
const GenerousAllowanceMs = 20_000

describe("hostile mail one at a time, at a generous allowance", () => {
  let h: Harness
  let owner: Session
  let token: string
  const results: Array<{ mail: HostileMail; id: number; acceptedAt: number; settledAt: number | undefined; tookMs: number; row: Row | undefined }> = []
  let me: Array<number> = []
  let greetings: Array<number> = []
  let ordinaryLatencies: Array<number> = []
  let ordinarySpans: Array<{ readonly acceptedAt: number; readonly settledAt: number }> = []
  let rssBefore = 0
  let rssMax = 0

  beforeAll(async () => {
    h = await startHarness({}, undefined, { seed: 1515, mailWork: { timeoutMs: GenerousAllowanceMs } })
    ;({ owner, token } = await signupUnlimited(h))
    const alias = await claimAlias(h, { session: owner })
    // Built before the clock starts: the client shares the service's event loop.
    const mails = hostileMails(alias.address).map((mail) => ({ mail, stuffed: dotStuff(mail.raw) }))
    const meRun = meLoop(h, token)
    const greetingRun = greetingLoop(h)
    const ordinaryRun = ordinaryLoop(h, alias.address)
    rssBefore = process.memoryUsage().rss
    const rss = rssPeak()
    // One at a time, so each one's time from its 250 is its own work, not a wait for a thread.
    for (const { mail, stuffed } of mails) {
      const { acceptedAt, id } = await send(h, alias.address, stuffed, true)
      const { settledAt, rows } = await settle(h, [id], 3 * GenerousAllowanceMs + 30_000)
      results.push({ mail, id, acceptedAt, settledAt: settledAt.get(id), tookMs: (settledAt.get(id) ?? Number.POSITIVE_INFINITY) - acceptedAt, row: rows.get(id) })
    }
    await Promise.all([meRun.stop(), greetingRun.stop(), ordinaryRun.stop()])
    rssMax = rss.stop()
    me = meRun.times
    greetings = greetingRun.times
    ordinaryLatencies = ordinaryRun.latencies
    ordinarySpans = ordinaryRun.spans
    console.log(
      [
        `hostile mail (load average ${loadavg().map((n) => n.toFixed(2)).join(" ")} on ${cpus().length} cores):`,
        ...results.map(({ mail, row, tookMs }) => `  ${mail.name} (${(mail.raw.byteLength / 1e6).toFixed(2)} MB): ${row?.processing_status} ${row?.failure_reason ?? ""} in ${tookMs.toFixed(0)} ms from its 250`),
        `  GET /me meanwhile: ${figure(me)}`,
        `  SMTP greeting meanwhile: ${figure(greetings)}`,
        `  ordinary mail meanwhile, 250 -> processed: ${figure(ordinaryLatencies)}`,
        `  resident memory of this process (test, service, its threads): ${(rssBefore / 2 ** 20).toFixed(0)} MiB before, at most ${(rssMax / 2 ** 20).toFixed(0)} MiB meanwhile`
      ].join("\n")
    )
  }, 600_000)
  afterAll(() => h.close())

  it("each message ends processed or failed within its allowance: never stuck", () => {
    expect(results.length).toBe(12)
    for (const { mail, row, settledAt } of results) {
      expect(["processed", "failed"], mail.name).toContain(row?.processing_status)
      // Settled before settle's deadline, past its allowance's longest wall time.
      expect(settledAt, mail.name).toBeDefined()
    }
  })

  it("HTML past the limits is processed and rendered as text, the 300,000 nested <b> of the issue among them; only unparsable MIME fails", async () => {
    // Nesting, attributes, elements (the HTML line, the anchors beside a text part) and the
    // quoted-printable one, which decodes to nested tags.
    const pastLimits = ["nested <b>", "nested elements", "unclosed <i>", "attributes", "an HTML line", "quoted-printable", "links and digit runs"]
    for (const { id, mail, row } of results) {
      if (pastLimits.some((name) => mail.name.includes(name))) {
        expect(row, mail.name).toMatchObject({ processing_status: "processed", failure_reason: null })
        const [stored] = await h.query<{ html_sanitized: string }>("SELECT html_sanitized FROM messages WHERE id = $1", [id])
        expect(stored!.html_sanitized, mail.name).toMatch(/^<pre style="white-space: pre-wrap; overflow-wrap: anywhere; font-family: inherit">/)
      }
      if (row?.processing_status === "failed") expect(row.failure_reason, mail.name).toMatch(/^unparsable: \w+$/)
    }
    const nested = results.find(({ mail }) => mail.name.includes("nested <b>"))!
    const detail = await h.request(`/messages/${nested.id}`, { token })
    expect(detail.body).toMatchObject({ snippet: "deep 123456", otpCodes: ["123456"] })
  })

  it("keeps every message's raw bytes, readable byte for byte, and counted toward storage", async () => {
    for (const { id, mail } of results) {
      const raw = await rawOf(h, owner, id)
      expect(raw.status, mail.name).toBe(200)
      expect(raw.bytes.equals(mail.raw), mail.name).toBe(true)
      const detail = await h.request(`/messages/${id}`, { token })
      expect(detail.body.sizeBytes, mail.name).toBe(mail.raw.byteLength)
    }
    const [sum] = await h.query<{ bytes: string }>("SELECT sum(size_bytes) AS bytes FROM messages WHERE account_id = $1", [owner.accountId])
    const account = await h.request<{ storageUsedBytes: number }>("/me", { token })
    expect(account.body.storageUsedBytes).toBe(Number(sum!.bytes))
  })

  it("GET /me and the SMTP greeting keep answering meanwhile: never held for seconds", () => {
    expect(me.length).toBeGreaterThan(100)
    expect(percentile(me, 100)).toBeLessThan(GenerousMs)
    expect(greetings.length).toBeGreaterThan(10)
    expect(percentile(greetings, 100)).toBeLessThan(GenerousMs)
  })

  it("keeps the process's memory bounded: its growth stays under the mail threads' heap caps, and 256 MiB for the main thread", () => {
    const limits = defaultMailWorkLimits()
    expect(rssMax - rssBefore).toBeLessThan(((limits.threads + limits.spareThreads) * limits.heapMb + 256) * 2 ** 20)
  })

  it("ordinary mail sent alongside is processed, and not starved: some sent after the slowest hostile message's 250 is processed before it", () => {
    expect(ordinaryLatencies.length).toBeGreaterThan(20)
    expect(percentile(ordinaryLatencies, 100)).toBeLessThan(GenerousMs)
    const slowest = results.toSorted((a, b) => b.tookMs - a.tookMs)[0]!
    const overtaking = ordinarySpans.filter((o) => o.acceptedAt > slowest.acceptedAt && o.settledAt < slowest.settledAt!)
    expect(overtaking.length, `ordinary mail processed while "${slowest.mail.name}" was worked on`).toBeGreaterThan(0)
  })
})

describe("hostile mail in a burst", () => {
  let h: Harness
  let owner: Session
  let token: string
  beforeAll(async () => {
    h = await startHarness({}, undefined, { seed: 1516, mailWork: { timeoutMs: 2_000 } })
    ;({ owner, token } = await signupUnlimited(h))
  })
  afterAll(() => h.close())

  it("all sent at once, each ends processed or failed; GET /me keeps answering meanwhile", async () => {
    const alias = await claimAlias(h, { session: owner })
    const mails = hostileMails(alias.address)
    const stuffed = mails.map((mail) => dotStuff(mail.raw))
    const meRun = meLoop(h, token)
    const started = performance.now()
    const sent = await Promise.all(stuffed.map((raw) => send(h, alias.address, raw, true)))
    const { rows, settledAt } = await settle(h, sent.map((s) => s.id), 120_000)
    await meRun.stop()
    const tookMs = Math.max(...settledAt.values()) - started
    console.log(`hostile burst of ${mails.length} (2 s allowance): all settled ${tookMs.toFixed(0)} ms after the first send; GET /me meanwhile: ${figure(meRun.times)}`)
    for (const [i, { id }] of sent.entries()) expect(["processed", "failed"], mails[i]!.name).toContain(rows.get(id)?.processing_status)
    // 59 MB arrive at once, and several threads work at once: the figure is printed; what must
    // hold on any machine is that GET /me answered throughout, never held for seconds.
    expect(meRun.times.length).toBeGreaterThan(0)
    expect(percentile(meRun.times, 100)).toBeLessThan(GenerousMs)
  }, 300_000)
})

describe("a message that exhausts its thread's heap", () => {
  let h: Harness
  let owner: Session
  beforeAll(async () => {
    // A small heap, and time enough that memory, not time, is what stops the message.
    h = await startHarness({}, undefined, { seed: 1517, mailWork: { heapMb: 64, timeoutMs: 60_000 } })
    owner = await h.signup({ plan: "pro" })
  })
  afterAll(() => h.close())

  it("fails with too_complex: out of memory, raw kept, and the service goes on with the next message", async () => {
    const alias = await claimAlias(h, { session: owner })
    const mail = manyLinks(alias.address)
    const { id } = await send(h, alias.address, mail.raw)
    const { rows } = await settle(h, [id], 60_000)
    expect(rows.get(id)).toMatchObject({ processing_status: "failed", failure_reason: "too_complex: out of memory" })
    expect((await rawOf(h, owner, id)).bytes.equals(mail.raw)).toBe(true)
    const next = await send(h, alias.address, ordinary(alias.address, 1))
    const after = await settle(h, [next.id], 10_000)
    expect(after.rows.get(next.id)?.processing_status).toBe("processed")
  }, 120_000)
})

describe("a poison message claimed again after crashes", () => {
  let h: Harness
  let owner: Session
  beforeAll(async () => {
    // A short allowance: the poison is cut off sooner.
    h = await startHarness({}, undefined, { seed: 1518, mailWork: { timeoutMs: 1_000 } })
    owner = await h.signup({ plan: "pro" })
  })
  afterAll(() => h.close())

  /** The message put back as if a process that is gone had claimed it `attempts` times. */
  const crashedWith = async (id: number, attempts: number) => {
    await h.query(
      "UPDATE messages SET processing_status = 'processing', processing_attempts = $2, processing_worker = 'burnbox/999999/gone', failure_reason = NULL, processed_at = NULL WHERE id = $1",
      [id, attempts]
    )
  }

  it("is failed on its next claim by the allowance, and after MaxAttempts claims is given up without being worked on", async () => {
    const alias = await claimAlias(h, { session: owner })
    const mail = manyLinks(alias.address)
    const { id } = await send(h, alias.address, mail.raw)
    expect((await settle(h, [id], 20_000)).rows.get(id)).toMatchObject({ processing_status: "failed", failure_reason: "too_complex: took longer than 1 s" })
    // A crash mid-way (the takeover gives the claim back): the next claim fails it again, once.
    await crashedWith(id, 1)
    expect((await settle(h, [id], 20_000)).rows.get(id)).toMatchObject({ processing_status: "failed", failure_reason: "too_complex: took longer than 1 s" })
    const [retried] = await h.query<{ processing_attempts: number }>("SELECT processing_attempts FROM messages WHERE id = $1", [id])
    expect(retried!.processing_attempts).toBe(2)
    // It kept killing its process: the claim past MaxAttempts gives up at once.
    await crashedWith(id, MaxAttempts)
    // Not worked on: worked on, it would fail again by its allowance, saying so.
    expect((await settle(h, [id], 20_000)).rows.get(id)).toMatchObject({ processing_status: "failed", failure_reason: "gave_up_after_repeated_worker_failures" })
    expect((await rawOf(h, owner, id)).bytes.equals(mail.raw)).toBe(true)
  }, 120_000)
})
