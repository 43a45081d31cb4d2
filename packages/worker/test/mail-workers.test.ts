/**
 * MailWorkers (issue #15): a message's parsing, analysis and DKIM reading run in a worker
 * thread, with the same results as in-process; the raw bytes cross by transfer; a task past its
 * time or heap allowance fails with MailTooComplex, its thread is replaced and the next task runs
 * at once; a task that runs long steps aside so the next ones run beside it. Scheduling is
 * judged by order (which task settled first) and by the places the pool says are taken, never by
 * a stopwatch: the figures are bench:hostile's and bench:hop's.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { zstdCompressSync } from "node:zlib"
import { analyzeMessage, parseMessage, type StoredColumns, storedColumns, workedMail } from "@burnbox/domain/mail/index"
import { hostileMails, inlineWorstCases, manyLinks } from "@burnbox/testkit"
import { authenticateBeside, authenticateMail, DnsResolver, MailTooComplex, type MailWorkBusy, MailWorkers, type MailWorkLimits } from "@burnbox/worker"
import { freeBytes, inflateExact, InlineLimits, workableInline } from "@burnbox/worker/pipeline/MailWork"
import { Effect, Fiber, Layer } from "effect"
import { dkimSign } from "mailauth"
import { describe, expect, it } from "vitest"

const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
const records = {
  "TXT signer.test": [["v=spf1 ip4:192.0.2.10 -all"]],
  "TXT _dmarc.signer.test": [["v=DMARC1; p=reject"]],
  "TXT mail._domainkey.signer.test": [[`v=DKIM1; k=rsa; p=${publicKey.export({ type: "spki", format: "der" }).toString("base64")}`]]
}
const envelope = { ip: "192.0.2.10", helo: "mx.signer.test", sender: "news@signer.test" }

const answer = Effect.runSync(Effect.gen(function*() {
  return yield* DnsResolver
}).pipe(Effect.provide(DnsResolver.fixed(records))))
/** The key of selector `hang` is looked up for ever: a message signed with it runs until its time is up. */
const HangingKey = "hang._domainkey.signer.test"
const dns = Layer.succeed(DnsResolver, (name: string, rrtype: string) => (name === HangingKey ? new Promise<never>(() => {}) : answer(name, rrtype)))

/**
 * Runs `effect` with a pool of these limits (and DNS answering from `records`), ended afterwards.
 * Every message goes to a thread unless `inline` is set: these tests are about the threads.
 */
const withWorkers = <A, E>(effect: Effect.Effect<A, E, MailWorkers | DnsResolver>, limits: Partial<MailWorkLimits> = {}) =>
  Effect.runPromise(
    effect.pipe(
      Effect.provide(MailWorkers.layerWith({ threads: 1, spareThreads: 1, inline: false, ...limits }).pipe(Layer.provideMerge(dns))),
      Effect.scoped
    )
  )

/** Waits until the pool's places in use are as `wanted` says (polled; at most 10 s). */
const placesUntil = (wanted: (busy: MailWorkBusy) => boolean) =>
  Effect.gen(function*() {
    const workers = yield* MailWorkers
    for (let polls = 0; !wanted(yield* workers.busy); polls++) {
      if (polls > 500) return yield* Effect.die(new Error(`the pool's places never became as wanted: ${JSON.stringify(yield* workers.busy)}`))
      yield* Effect.sleep("20 millis")
    }
  })

const work = (raw: Uint8Array, dkim: { sender: string | null } | null = null) =>
  Effect.gen(function*() {
    const workers = yield* MailWorkers
    return yield* workers.process({ raw, dkim })
  })

/** The threads started before a message (signed with the key never answered) runs long, and once it works on a spare place. */
const threadsWithOnSpare = (raw: Uint8Array) =>
  withWorkers(Effect.gen(function*() {
    const workers = yield* MailWorkers
    const before = (yield* workers.busy).threads
    const slow = yield* Effect.forkChild(Effect.flip(work(raw, { sender: envelope.sender })))
    yield* placesUntil((busy) => busy.spares === 1)
    const after = (yield* workers.busy).threads
    yield* Fiber.interrupt(slow)
    return { before, after }
  }), { threads: 1, spareThreads: 2, longAfterMs: 20, timeoutMs: 60_000 })

const crlf = (text: string) => Buffer.from(text.replace(/\r?\n/g, "\r\n"), "utf8")
const png = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "base64")

const rich = crlf(`From: "Acme" <support@acme.example>
To: someone@burnbox.test
Subject: =?utf-8?q?Verify_your_account_=E2=9C=93?=
Date: Sat, 21 Nov 2026 11:59:00 +0000
X-Campaign: one
X-Campaign: two
__proto__: not a prototype
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="b"

--b
Content-Type: text/html; charset=utf-8

<p>Your code is <b>482913</b>. <a href="https://acme.example/verify?t=1">Verify</a></p><img src="https://t.example/p.png"><script>x()</script>
--b
Content-Type: image/png; name="logo.png"
Content-Disposition: attachment; filename="logo.png"
Content-Transfer-Encoding: base64

${png.toString("base64")}
--b--
`)

const ordinary = crlf("From: a@shop.example\nTo: b@burnbox.test\nSubject: hi\n\nYour code is 123456.\n")

const signed = async (selector = "mail") => {
  const message = "From: News <news@signer.test>\r\nTo: <someone@burnbox.test>\r\nSubject: Your code is 482913\r\nMessage-ID: <m1@signer.test>\r\n\r\nYour code is 482913.\r\n"
  const key = { signingDomain: "signer.test", selector, privateKey: privateKey.export({ type: "pkcs8", format: "pem" }).toString() }
  // mailauth signs with the keys of signatureData (its typings name only the top-level fields).
  return Buffer.from((await dkimSign(message, { ...key, signatureData: [key] })).signatures + message)
}

/** The nice values of this process's mail worker threads (Linux; empty elsewhere). */
const mailThreadNices = () =>
  existsSync("/proc/self/task")
    ? readdirSync("/proc/self/task").flatMap((tid) => {
      try {
        if (readFileSync(`/proc/self/task/${tid}/comm`, "utf8").trim() !== "burnbox-mail") return []
        // Field 19 of stat; the fields after the name (field 2, in parentheses) start at 3.
        return [Number(readFileSync(`/proc/self/task/${tid}/stat`, "utf8").split(") ")[1]!.split(" ")[16])]
      } catch {
        return []
      }
    })
    : []

describe("MailWorkers", () => {
  it("parses and analyzes in a thread exactly as in-process: digest, attachment bytes, and the columns as UTF-8 JSON", async () => {
    const inProcess = await parseMessage(rich)
    if (!inProcess.ok) throw new Error(inProcess.detail)
    const result = await withWorkers(work(Buffer.from(rich)))
    if (!result.ok) throw new Error(result.detail)
    const expected = workedMail(inProcess.message, analyzeMessage(inProcess.message))
    expect(result.mail.digest).toEqual(expected.digest)
    expect(result.mail.digest.otpCodes).toEqual(["482913"])
    expect(Buffer.from(result.mail.attachments[0]!.content).equals(png)).toBe(true)
    expect(Buffer.from(result.mail.columns).equals(Buffer.from(expected.columns))).toBe(true)
    const columns = JSON.parse(Buffer.from(result.mail.columns).toString("utf8")) as StoredColumns
    expect(columns).toEqual(storedColumns(inProcess.message, analyzeMessage(inProcess.message)))
    // A header named __proto__ is an own key of the stored headers, not a prototype.
    expect(Object.getPrototypeOf(columns.headers)).toBe(Object.prototype)
    expect(columns.headers["__proto__"]).toBe("not a prototype")
    expect(result.dkim).toBeNull()
  })

  it("works a big message given as stored (zstd, inflated in the thread) exactly as its bytes in-process, and signed mail's DKIM reads it whole", async () => {
    // A 3 MB attachment (over the size from which bytes are freed at once) and a signed body.
    const bytes = randomBytes(3 * 1024 * 1024)
    const message = crlf([
      "From: News <news@signer.test>", "To: <someone@burnbox.test>", "Subject: Your code is 482913", "MIME-Version: 1.0",
      `Content-Type: multipart/mixed; boundary="b"`, "", "--b", "Content-Type: text/plain; charset=utf-8", "", "Your code is 482913.",
      "--b", "Content-Type: application/octet-stream", `Content-Disposition: attachment; filename="big.bin"`,
      "Content-Transfer-Encoding: base64", "", bytes.toString("base64").replace(/.{76}/g, "$&\n"), "--b--", ""
    ].join("\n"))
    const key = { signingDomain: "signer.test", selector: "mail", privateKey: privateKey.export({ type: "pkcs8", format: "pem" }).toString() }
    const raw = Buffer.concat([Buffer.from((await dkimSign(message, { ...key, signatureData: [key] })).signatures), message])
    const inProcess = await parseMessage(raw)
    if (!inProcess.ok) throw new Error(inProcess.detail)
    const expected = workedMail(inProcess.message, analyzeMessage(inProcess.message))
    const result = await withWorkers(Effect.gen(function*() {
      const workers = yield* MailWorkers
      return yield* workers.process({ raw: zstdCompressSync(raw), inflateTo: raw.byteLength, dkim: { sender: envelope.sender } })
    }))
    if (!result.ok) throw new Error(result.detail)
    expect(Buffer.from(result.mail.attachments[0]!.content).equals(bytes)).toBe(true)
    expect(Buffer.from(result.mail.columns).equals(Buffer.from(expected.columns))).toBe(true)
    expect(result.dkim).toMatchObject({ ok: true, signatures: [{ signingDomain: "signer.test", result: "pass" }] })
    // The parser's input was not changed by the work.
    expect((await parseMessage(raw)).ok).toBe(true)
  })

  it("inflates to exactly the size asked, as an array that is the whole of its buffer; another size still comes out right", () => {
    const raw = Buffer.from("a line of mail text\r\n".repeat(100_000))
    const exact = inflateExact(zstdCompressSync(raw), raw.byteLength)
    expect(Buffer.from(exact).equals(raw)).toBe(true)
    expect(exact.byteOffset === 0 && exact.buffer.byteLength === raw.byteLength).toBe(true)
    expect(Buffer.from(inflateExact(zstdCompressSync(raw), 1000)).equals(raw)).toBe(true)
    expect(Buffer.from(inflateExact(zstdCompressSync(raw), raw.byteLength * 2)).equals(raw)).toBe(true)
  })

  it("frees a big array that is the whole of its buffer at once, and leaves small ones and views of a larger buffer alone", () => {
    const big = new Uint8Array(2 * 1024 * 1024)
    freeBytes(big)
    expect(big.buffer.detached).toBe(true)
    const small = new Uint8Array(1024)
    freeBytes(small)
    expect(small.buffer.detached).toBe(false)
    const view = new Uint8Array(new ArrayBuffer(4 * 1024 * 1024), 0, 2 * 1024 * 1024)
    freeBytes(view)
    expect(view.buffer.detached).toBe(false)
    freeBytes(big)
  })

  it("answers a parse failure as the parser words it", async () => {
    const result = await withWorkers(work(new Uint8Array(0)))
    expect(result).toMatchObject({ ok: false, reason: "empty" })
  })

  it("verifies DKIM in the thread, its key looked up through the main thread's resolver: the results of authenticating in-process", async () => {
    const raw = await signed()
    const [result, auth] = await withWorkers(
      authenticateBeside(work(raw, { sender: envelope.sender }), (done) => (done.ok && done.dkim !== null ? done.dkim : { ok: false, failed: "unread" }), envelope)
    )
    expect(result.ok && result.dkim).toMatchObject({ ok: true, headerFrom: ["news@signer.test"], signatures: [{ signingDomain: "signer.test", result: "pass" }] })
    expect(auth).toEqual({ spf: "pass", dkim: "pass", dmarc: "pass" })
    const inProcess = await Effect.runPromise(authenticateMail(raw, envelope).pipe(Effect.provide(DnsResolver.fixed(records))))
    expect(auth).toEqual(inProcess)
  })

  it("hands over a large message's bytes when they have a buffer of their own; copies a small one's, and bytes that share a buffer", async () => {
    const large = crlf(`From: a@shop.example\nTo: b@burnbox.test\nSubject: big\n\n${"a line of an ordinary large message\n".repeat(10_000)}`)
    const own = new Uint8Array(large)
    const shared = Buffer.concat([Buffer.from("leading bytes of another message"), large]).subarray(32)
    const small = new Uint8Array(ordinary)
    // Small Buffers share Node's pool, which cannot be transferred at all.
    const pooled = Buffer.from(ordinary)
    const results = await withWorkers(Effect.all([work(own), work(shared), work(small), work(pooled)]))
    expect(results.map((result) => result.ok)).toEqual([true, true, true, true])
    expect(own.byteLength).toBe(0)
    expect(shared.equals(large)).toBe(true)
    expect(Buffer.from(small).equals(ordinary)).toBe(true)
    expect(pooled.equals(ordinary)).toBe(true)
  })

  it("hands small messages over several at once, and gives those queued behind a slow one to another thread", async () => {
    const hanging = await signed("hang")
    let settled = 0
    const { slow, quick } = await withWorkers(
      Effect.gen(function*() {
        // Two threads; the slow message (small, waiting for its DKIM key) is handed over with ordinary ones queued behind it.
        const all = yield* Effect.forEach(
          [hanging, ...Array.from({ length: 15 }, () => ordinary)],
          (raw) => Effect.result(work(raw, raw === hanging ? { sender: envelope.sender } : null)).pipe(Effect.map((result) => ({ result, order: ++settled }))),
          { concurrency: "unbounded" }
        )
        return { slow: all[0]!, quick: all.slice(1) }
      }),
      // The slow one spends no CPU: it fails at the allowance's wall-time cap (3 x 4 s), a generous
      // window for the ordinary ones to end first on a busy machine.
      { threads: 2, spareThreads: 0, longAfterMs: 100, timeoutMs: 4_000 }
    )
    expect(slow.result._tag).toBe("Failure")
    // None waited for the slow one to end: it ends last.
    expect(slow.order).toBe(16)
    for (const { result } of quick) expect(result._tag).toBe("Success")
  })

  it("fails a task past its time with MailTooComplex, and the next task runs at once on the replacement", async () => {
    const [failure, next] = await withWorkers(
      Effect.gen(function*() {
        const tooLong = yield* Effect.flip(work(manyLinks("a@burnbox.test").raw))
        const started = Date.now()
        const result = yield* work(ordinary)
        return [tooLong, { result, ms: Date.now() - started }] as const
      }),
      { timeoutMs: 500, longAfterMs: 100, spareThreads: 0 }
    )
    expect(failure).toEqual(new MailTooComplex({ reason: "took longer than 500 ms" }))
    expect(next.result.ok).toBe(true)
    // Not stuck behind anything (a generous bound: a thread starts in well under a second).
    expect(next.ms).toBeLessThan(10_000)
  })

  it("fails a task that exhausts its thread's heap with MailTooComplex, out of memory, and goes on", async () => {
    const [failure, next] = await withWorkers(
      Effect.gen(function*() {
        const outOfMemory = yield* Effect.flip(work(manyLinks("a@burnbox.test").raw))
        return [outOfMemory, yield* work(ordinary)] as const
      }),
      { heapMb: 64, timeoutMs: 60_000 }
    )
    expect(failure).toEqual(new MailTooComplex({ reason: "out of memory" }))
    expect(next.ok).toBe(true)
  })

  it("starts a thread ahead when a slow message steps aside to a spare place, but not for a big one (its memory is several times its size already)", async () => {
    // Signed with the key whose lookup never answers: each works until it is interrupted.
    const key = { signingDomain: "signer.test", selector: "hang", privateKey: privateKey.export({ type: "pkcs8", format: "pem" }).toString() }
    const big = crlf(`From: News <news@signer.test>\nTo: <someone@burnbox.test>\nSubject: big\n\n${"a line of a big message\n".repeat(20_000)}`)
    const bigSigned = Buffer.concat([Buffer.from((await dkimSign(big, { ...key, signatureData: [key] })).signatures), big])
    expect(bigSigned.byteLength).toBeGreaterThan(256 * 1024)
    // A lane's thread and one more are kept started; a small slow message on the spare place starts one ahead.
    expect(await threadsWithOnSpare(await signed("hang"))).toEqual({ before: 2, after: 3 })
    expect(await threadsWithOnSpare(bigSigned)).toEqual({ before: 2, after: 2 })
  })

  it("lets the next tasks run beside one that has run long, on a spare thread and at a lower priority (Linux)", async () => {
    const { slowDoneFirst, placesMeanwhile, during, after } = await withWorkers(
      Effect.gen(function*() {
        // One lane: the slow one takes it, then steps aside onto the spare after 100 ms.
        const slow = yield* Effect.forkChild(Effect.flip(work(manyLinks("a@burnbox.test").raw)))
        yield* placesUntil((busy) => busy.lanes + busy.spares === 1)
        yield* work(ordinary)
        // The ordinary one ran beside the slow one, which holds the spare place meanwhile.
        const doneFirst = slow.pollUnsafe() !== undefined
        const places = yield* (yield* MailWorkers).busy
        const nicesMeanwhile = mailThreadNices()
        expect(yield* Fiber.join(slow)).toBeInstanceOf(MailTooComplex)
        // Its replacement starts at the process's priority.
        if (existsSync("/proc/thread-self")) {
          for (let polls = 0; polls < 500 && mailThreadNices().join() !== "0,0"; polls++) yield* Effect.sleep("20 millis")
        }
        return { slowDoneFirst: doneFirst, placesMeanwhile: places, during: nicesMeanwhile, after: mailThreadNices() }
      }),
      // Well under what the slow message takes (manyLinks: some 4 s on 2 busy cores).
      { threads: 1, spareThreads: 1, longAfterMs: 100, timeoutMs: 1_000, nice: 10 }
    )
    expect(slowDoneFirst).toBe(false)
    // The slow one left the lane for the spare place (the lane's own answer may not be counted back yet).
    expect(placesMeanwhile).toMatchObject({ spares: 1, waiting: 0 })
    if (existsSync("/proc/thread-self")) {
      expect(during.toSorted()).toEqual([0, 10])
      expect(after).toEqual([0, 0])
    }
  })
})

describe("small plain mail, worked in place", () => {
  it("takes plain text within InlineLimits, and nothing with HTML, more markup, lines, parts or bytes", () => {
    expect(workableInline(ordinary)).toBe(true)
    for (const mail of inlineWorstCases("a@burnbox.test")) expect(workableInline(mail.raw), mail.name).toBe(true)
    for (const mail of hostileMails("a@burnbox.test")) expect(workableInline(mail.raw), mail.name).toBe(false)
    const plain = (body: string, type = "text/plain") => Buffer.from(`From: a@b.test\r\nSubject: x\r\nContent-Type: ${type}\r\n\r\n${body}\r\n`)
    expect(workableInline(plain("hello", "text/HTML"))).toBe(false)
    expect(workableInline(plain("see <hTmL> here"))).toBe(false)
    expect(workableInline(plain("x".repeat(InlineLimits.bytes)))).toBe(false)
    expect(workableInline(plain("x".repeat(InlineLimits.lineBytes + 1)))).toBe(false)
    expect(workableInline(plain("x".repeat(InlineLimits.lineBytes - 1)))).toBe(true)
    expect(workableInline(plain("<".repeat(InlineLimits.angleBrackets + 1)))).toBe(false)
    expect(workableInline(plain("x\r\n".repeat(InlineLimits.lines + 1)))).toBe(false)
    expect(workableInline(plain("--b\r\n".repeat(InlineLimits.boundaryLines + 1)))).toBe(false)
    expect(workableInline(plain("--b\r\n".repeat(InlineLimits.boundaryLines - 1)))).toBe(true)
  })

  it("answers small plain mail in place, as a thread would, while the only lane is busy with a slow message", async () => {
    const { inPlace, inThread, slowDoneFirst } = await withWorkers(
      Effect.gen(function*() {
        const slow = yield* Effect.forkChild(Effect.flip(work(manyLinks("a@burnbox.test").raw)))
        yield* placesUntil((busy) => busy.lanes + busy.spares === 1)
        const inPlace = yield* work(ordinary)
        const doneFirst = slow.pollUnsafe() !== undefined
        yield* Fiber.interrupt(slow)
        return { inPlace, slowDoneFirst: doneFirst, inThread: yield* Effect.provide(work(ordinary), MailWorkers.layerWith({ inline: false }).pipe(Layer.provide(DnsResolver.fixed(records)))) }
      }),
      { inline: true, spareThreads: 0, longAfterMs: 10_000, timeoutMs: 10_000 }
    )
    // With no lane free, only working in place answers before the slow message is done (~4 s).
    expect(slowDoneFirst).toBe(false)
    expect(inPlace).toEqual(inThread)
  })

  it("works small plain mail in place one message at a time, in order, in slices of the event loop's turns", async () => {
    // A counter of the event loop's turns (its check phase): work done in one turn shares a count.
    let loopTurns = 0
    let ticking = true
    const tick = () => {
      loopTurns++
      if (ticking) setImmediate(tick)
    }
    setImmediate(tick)
    const settled = await withWorkers(
      Effect.gen(function*() {
        const order: Array<{ readonly index: number; readonly turn: number }> = []
        yield* Effect.forEach(
          Array.from({ length: 300 }, (_, index) => index),
          (index) => work(ordinary).pipe(Effect.tap(() => Effect.sync(() => order.push({ index, turn: loopTurns })))),
          { concurrency: "unbounded", discard: true }
        )
        return order
      }),
      { inline: true }
    ).finally(() => {
      ticking = false
    })
    expect(settled.map((s) => s.index)).toEqual(Array.from({ length: 300 }, (_, index) => index))
    // Interleaved, all would end in the same turn of the loop, at the end of the batch; in slices
    // of a few milliseconds, the first ends turns before the last (300 messages take far longer).
    expect(settled.at(-1)!.turn).toBeGreaterThan(settled[0]!.turn)
  })

  it("holds mail worked in place to the same allowance: a DKIM key lookup that never answers fails it as too complex", async () => {
    const hanging = await signed("hang")
    expect(workableInline(hanging)).toBe(true)
    const error = await withWorkers(Effect.flip(work(hanging, { sender: envelope.sender })), { inline: true, timeoutMs: 300 })
    expect(error).toEqual(new MailTooComplex({ reason: "took longer than 300 ms" }))
  })
})
