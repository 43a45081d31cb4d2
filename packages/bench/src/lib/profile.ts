/**
 * Helpers of bench-webhooks.ts: event ids as the outbox wants them (`evt_` + a 26-character
 * Crockford ULID), and a summary of a V8 CPU profile.
 */
import { randomBytes } from "node:crypto"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"

// ---------------------------------------------------------------------------------------------
// Event ids

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

/** `count` ids `evt_` + ULID (10 time characters, 16 random), strictly ascending. */
export const eventIds = (count: number, timeMs = Date.now()): Array<string> => {
  let time = ""
  for (let t = timeMs, i = 0; i < 10; i++, t = Math.floor(t / 32)) time = crockford[t % 32] + time
  // A random 80-bit start, incremented per id (monotonic ULIDs within one millisecond).
  let random = BigInt("0x" + randomBytes(10).toString("hex")) >> 2n
  const ids: Array<string> = []
  for (let i = 0; i < count; i++, random++) {
    let r = ""
    for (let v = random, k = 0; k < 16; k++, v >>= 5n) r = crockford[Number(v & 31n)] + r
    ids.push(`evt_${time}${r}`)
  }
  return ids
}

// ---------------------------------------------------------------------------------------------
// CPU profiles

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  hitCount?: number
}

/** Self time by function and by code origin in the newest .cpuprofile of `dir`, largest first. */
export const summarizeProfile = (dir: string, top = 15): Array<string> => {
  const files = readdirSync(dir).filter((f) => f.endsWith(".cpuprofile")).sort()
  if (files.length === 0) return [`(no .cpuprofile in ${dir})`]
  const profile = JSON.parse(readFileSync(join(dir, files[files.length - 1]!), "utf8")) as {
    nodes: Array<ProfileNode>
    startTime: number
    endTime: number
    samples: Array<number>
  }
  const hits = new Map<number, number>()
  for (const id of profile.samples) hits.set(id, (hits.get(id) ?? 0) + 1)
  const total = profile.samples.length
  const msPerSample = (profile.endTime - profile.startTime) / 1000 / Math.max(1, total)
  const byFunction = new Map<string, number>()
  const byOrigin = new Map<string, number>()
  const origin = (url: string, name: string) => {
    if (url === "") return name.startsWith("(") ? name : "(native/builtin)"
    const pkg = /node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)/.exec(url)
    if (pkg !== null) return pkg[1]!
    const own = /packages\/([^/]+)\//.exec(url)
    if (own !== null) return `@burnbox/${own[1]}`
    if (url.startsWith("node:")) return url.split("/")[0]!
    return url.replace(/^file:\/\//, "")
  }
  for (const node of profile.nodes) {
    const n = hits.get(node.id) ?? 0
    if (n === 0) continue
    const f = node.callFrame
    const file = f.url.split("/").pop() ?? ""
    const key = `${f.functionName || "(anonymous)"} ${file}${file === "" ? "" : `:${f.lineNumber + 1}`}`
    byFunction.set(key, (byFunction.get(key) ?? 0) + n)
    const o = origin(f.url, f.functionName)
    byOrigin.set(o, (byOrigin.get(o) ?? 0) + n)
  }
  const pct = (n: number) => `${((100 * n) / Math.max(1, total)).toFixed(1)} %`
  const lines = [`CPU profile ${files[files.length - 1]}: ${total} samples, ${(total * msPerSample / 1000).toFixed(1)} s sampled`]
  lines.push("self time by origin: " + [...byOrigin].sort((a, b) => b[1] - a[1]).slice(0, 10).map(([k, n]) => `${k} ${pct(n)}`).join(", "))
  lines.push("self time by function:")
  for (const [k, n] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`  ${pct(n).padStart(7)}  ${k}`)
  return lines
}
