/**
 * The mail-authentication DNS cache: one lookup per name and type while it is fresh, failures
 * remembered too, so a DNS server that is down or absent costs one wait per name, not one per
 * message. Time is a variable the test moves, not a sleep.
 */
import { AnswerTtlMs, cachingResolver, FailureTtlMs, NegativeTtlMs } from "@burnbox/worker"
import { describe, expect, it } from "vitest"

const fixture = () => {
  let clock = 1_000_000
  const calls: Array<string> = []
  const pending: Array<{ resolve: (v: unknown) => void; reject: (e: unknown) => void }> = []
  const upstream = (name: string, rrtype: string) => {
    calls.push(`${rrtype} ${name}`)
    return new Promise<unknown>((resolve, reject) => pending.push({ resolve, reject }))
  }
  const resolve = cachingResolver(upstream, () => clock)
  return {
    resolve,
    calls,
    pending,
    advance: (ms: number) => {
      clock += ms
    }
  }
}

const settle = () => new Promise((r) => setImmediate(r))

describe("mail-authentication DNS cache", () => {
  it("concurrent lookups of one name share one query, and the answer is reused until its TTL", async () => {
    const f = fixture()
    const a = f.resolve("example.test", "TXT")
    const b = f.resolve("EXAMPLE.test", "txt")
    expect(f.calls).toEqual(["TXT example.test"])
    f.pending[0]!.resolve([["v=spf1 -all"]])
    expect(await a).toEqual([["v=spf1 -all"]])
    expect(await b).toEqual([["v=spf1 -all"]])
    await settle()
    f.advance(AnswerTtlMs - 1)
    expect(await f.resolve("example.test", "TXT")).toEqual([["v=spf1 -all"]])
    expect(f.calls).toHaveLength(1)
    f.advance(1)
    void f.resolve("example.test", "TXT")
    expect(f.calls).toHaveLength(2)
  })

  it("remembers that a name does not exist, and a failed lookup for a shorter time", async () => {
    const f = fixture()
    const missing = f.resolve("nothing.test", "TXT")
    const down = f.resolve("_dmarc.example.test", "TXT")
    f.pending[0]!.reject(Object.assign(new Error("queryTxt ENOTFOUND nothing.test"), { code: "ENOTFOUND" }))
    f.pending[1]!.reject(Object.assign(new Error("queryTxt ETIMEOUT _dmarc.example.test"), { code: "ETIMEOUT" }))
    await expect(missing).rejects.toMatchObject({ code: "ENOTFOUND" })
    await expect(down).rejects.toMatchObject({ code: "ETIMEOUT" })
    await settle()
    // Same errors again, without asking.
    await expect(f.resolve("nothing.test", "TXT")).rejects.toMatchObject({ code: "ENOTFOUND" })
    await expect(f.resolve("_dmarc.example.test", "TXT")).rejects.toMatchObject({ code: "ETIMEOUT" })
    expect(f.calls).toHaveLength(2)
    f.advance(FailureTtlMs)
    void f.resolve("_dmarc.example.test", "TXT").catch(() => undefined)
    void f.resolve("nothing.test", "TXT").catch(() => undefined)
    expect(f.calls).toEqual(["TXT nothing.test", "TXT _dmarc.example.test", "TXT _dmarc.example.test"])
    f.advance(NegativeTtlMs - FailureTtlMs)
    void f.resolve("nothing.test", "TXT").catch(() => undefined)
    expect(f.calls.filter((c) => c === "TXT nothing.test")).toHaveLength(2)
  })

  it("keeps record types apart", async () => {
    const f = fixture()
    void f.resolve("example.test", "TXT")
    void f.resolve("example.test", "MX")
    expect(f.calls).toEqual(["TXT example.test", "MX example.test"])
  })
})
