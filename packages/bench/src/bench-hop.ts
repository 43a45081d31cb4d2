/**
 * The cost of the thread hop (issue #15): one ordinary 5 KB message (bench:pipeline's) parsed,
 * analyzed and DKIM-read in this thread (`doMailWork`, as before #15) and through MailWorkers (a
 * worker thread), one message at a time and in bursts of 8 (one claim), in the same run.
 * Prints the latency per message (p50/p99) and the process's CPU per message (all threads).
 *
 * Then the worst of the messages built to cost the most while still within InlineLimits (testkit's
 * `inlineWorstCases`: nesting, quoted-printable, entities, digits and links, folded headers,
 * nested parts): the longest any of them holds the main thread.
 *
 * Usage: ./pnpmw bench:hop   (HOP_MESSAGES, default 3000)
 */
import { cpuUsage } from "node:process"
import { inlineWorstCases } from "@burnbox/testkit"
import { DnsResolver, doMailWork, MailWorkers, workableInline } from "@burnbox/worker"
import { Effect, Layer } from "effect"
import { distribution, envInt, fmt, table } from "./lib/common.ts"
import { messageFactory } from "./lib/smtp.ts"

const count = envInt("HOP_MESSAGES", 3_000, 10)
const factory = messageFactory({ from: "sender@bench.localhost", to: "someone@burnbox.test", size: 5_150, tag: "hop" })
const raws = Array.from({ length: 64 }, (_, i) => new Uint8Array(Buffer.from(factory.make(i).data)))
const noDns = () => Promise.reject(Object.assign(new Error("no DNS here"), { code: "ENOTFOUND" }))
const task = (i: number) => ({ raw: raws[i % raws.length]!, dkim: { sender: "sender@bench.localhost" } })

interface Row { readonly name: string; readonly latencies: Array<number>; readonly cpuMs: number }

const measure = async (name: string, burst: number, run: (i: number) => Promise<unknown>): Promise<Row> => {
  for (let i = 0; i < 200; i++) await run(i) // warm-up
  const latencies: Array<number> = []
  const cpu = cpuUsage()
  for (let i = 0; i < count; i += burst) {
    const started = performance.now()
    await Promise.all(Array.from({ length: burst }, (_, k) => run(i + k).then(() => latencies.push(performance.now() - started))))
  }
  const used = cpuUsage(cpu)
  return { name, latencies, cpuMs: (used.user + used.system) / 1000 / count }
}

const program = Effect.gen(function*() {
  const workers = yield* MailWorkers
  const inThread = (i: number) => Effect.runPromise(workers.process(task(i)))
  const inline = (i: number) => doMailWork(task(i), noDns)
  const rows: Array<Row> = []
  // Interleaved, so a slow phase of the machine hits both.
  for (const round of [1, 2]) {
    rows.push(yield* Effect.promise(() => measure(`in this thread (before #15), one at a time, round ${round}`, 1, inline)))
    rows.push(yield* Effect.promise(() => measure(`through MailWorkers, one at a time, round ${round}`, 1, inThread)))
    rows.push(yield* Effect.promise(() => measure(`in this thread, bursts of 8, round ${round}`, 8, inline)))
    rows.push(yield* Effect.promise(() => measure(`through MailWorkers, bursts of 8, round ${round}`, 8, inThread)))
  }
  return rows
})

const rows = await Effect.runPromise(program.pipe(
  // Every message through a thread here, small plain mail included: the hop is what is measured.
  Effect.provide(MailWorkers.layerWith({ inline: false }).pipe(Layer.provide(Layer.succeed(DnsResolver, noDns)))),
  Effect.scoped
))
const worst: Array<string> = []
for (const mail of inlineWorstCases("someone@burnbox.test")) worst.push(await (async () => {
  if (!workableInline(mail.raw)) return `${mail.name}: NOT within InlineLimits (goes to a thread)`
  const times: Array<number> = []
  for (let i = 0; i < 50; i++) {
    const started = performance.now()
    await doMailWork({ raw: mail.raw, dkim: { sender: "mallory@attacker.example" } }, noDns)
    times.push(performance.now() - started)
  }
  const d = distribution(times)
  return `${mail.name} (${fmt(mail.raw.byteLength)} bytes): p50 ${fmt(d.p50, 2)} ms, max ${fmt(d.max, 2)} ms`
})())
process.stdout.write(`Messages built to cost the most within InlineLimits, worked in this thread 50 times each:\n${worst.map((w) => `  ${w}`).join("\n")}\n\n`)
process.stdout.write(`${count} messages of 5 KB per row; latency from the call to its answer (a burst's from the burst's start)\n`)
process.stdout.write(table(["where the work runs", "p50 ms", "p99 ms", "CPU ms/msg (process, all threads)"], rows.map((r) => {
  const d = distribution(r.latencies)
  return [r.name, fmt(d.p50, 3), fmt(d.p99, 3), fmt(r.cpuMs, 3)]
})) + "\n")
