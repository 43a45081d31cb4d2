/**
 * A quick SMTP accept-rate run against burnbox alone, for iterating on the accept path (the
 * full side-by-side figure is bench-smtp.ts). Usage: QUICK_ROLE=start|ingest QUICK_SECONDS=6
 * [BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof"] node scripts/quick-smtp.ts
 */
import { Burnbox, Session } from "./lib/burnbox.ts"
import { cpuShare, cpuSnapshot, envInt, fmt, loadAverage, serverCpuCell } from "./lib/common.ts"
import { countsText, messageFactory, runSmtpLoad } from "./lib/smtp.ts"

const seconds = envInt("QUICK_SECONDS", 6, 1)
const connections = envInt("BENCH_CONNECTIONS", 50, 1)
const role = process.env["QUICK_ROLE"] ?? "start"
const session = new Session("quick-smtp")

const main = async (): Promise<number> => {
  const burnbox = await Burnbox.create(session, { logName: "quick-smtp" })
  await burnbox.start(role === "ingest" ? "start" : role)
  const token = await burnbox.setupAccount("quick@example.com")
  const alias = await burnbox.claimAlias(token)
  if (role === "ingest") {
    await burnbox.stop()
    await burnbox.start("ingest")
  }
  const [local, domain] = alias.address.split("@") as [string, string]
  const run = async (name: string, secs: number) => {
    const factory = messageFactory({ from: "s@bench.localhost", to: `${local}+${name}@${domain}`, size: 5_150, tag: name })
    const before = cpuSnapshot(burnbox.pid)
    const r = await runSmtpLoad({ port: burnbox.smtpPort, connections, sourceAddresses: connections, make: factory.make, messages: Number.MAX_SAFE_INTEGER, durationSeconds: secs, timeoutMs: (secs + 60) * 1000 })
    const cpu = cpuShare(before, cpuSnapshot(burnbox.pid))
    return `${name}: ${fmt(r.accepted)} in ${((r.endedAt - r.startedAt) / 1000).toFixed(2)} s = ${fmt(r.acceptedPerSecond)} msg/s, cpu ${serverCpuCell(cpu)}, ms/msg ${fmt((cpu.server / 100) * ((r.endedAt - r.startedAt) / 1000) * 1000 / Math.max(1, r.accepted), 2)}; rejected ${countsText(r.rejected)}; errors ${countsText(r.errors)}`
  }
  await run("warmup", 1)
  const line = await run("main", seconds)
  process.stdout.write(`${role}, ${connections} conns, load ${loadAverage()}\n${line}\n`)
  await burnbox.stop()
  return 0
}

await session.run(5 * 60_000, main)
