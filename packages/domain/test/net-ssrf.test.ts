import { describe, expect, it } from "@effect/vitest"
import type { AddressCategory, WebhookUrlRefusal } from "../src/net/index.ts"
import { checkResolvedAddresses, checkWebhookUrl, classifyIp, isPublicIp } from "../src/net/index.ts"

const production = { allowPrivate: false }
const development = { allowPrivate: true }

// Every target here must be refused in production, with this reason code.
const refusedTargets: ReadonlyArray<readonly [string, WebhookUrlRefusal]> = [
  // private, loopback and unspecified IPv4
  ["https://10.0.0.1/", "private_address"],
  ["https://10.255.255.255/hook", "private_address"],
  ["https://172.16.0.1/", "private_address"],
  ["https://172.31.255.254/", "private_address"],
  ["https://192.168.1.1/", "private_address"],
  ["https://127.0.0.1/", "private_address"],
  ["https://127.255.255.254/", "private_address"],
  ["https://0.0.0.0/", "private_address"],
  ["https://0.1.2.3/", "private_address"],
  // IPv4 in the notations WHATWG URL normalizes to a dotted quad
  ["https://0/", "private_address"],
  ["https://2130706433/", "private_address"],
  ["https://0177.0.0.1/", "private_address"],
  ["https://0x7f.1/", "private_address"],
  ["https://0x7f000001/", "private_address"],
  ["https://017700000001/", "private_address"],
  ["https://127.1/", "private_address"],
  ["https://127.0.1/", "private_address"],
  ["https://%31%32%37.0.0.1/", "private_address"],
  ["https://127.0.0.1./", "private_address"],
  ["https://3232235777/", "private_address"], // 192.168.1.1
  ["https://167772161/", "private_address"], // 10.0.0.1
  ["https://0xa9.0xfe.0xa9.0xfe/", "private_address"], // 169.254.169.254
  // link-local (cloud metadata), CGNAT, multicast, broadcast, reserved and documentation IPv4
  ["https://169.254.169.254/latest/meta-data/", "private_address"],
  ["https://169.254.0.1/", "private_address"],
  ["https://100.64.0.1/", "private_address"],
  ["https://100.127.255.254/", "private_address"],
  ["https://224.0.0.1/", "private_address"],
  ["https://239.255.255.250/", "private_address"],
  ["https://255.255.255.255/", "private_address"],
  ["https://240.0.0.1/", "private_address"],
  ["https://192.0.0.8/", "private_address"],
  ["https://192.0.2.10/", "private_address"],
  ["https://198.51.100.7/", "private_address"],
  ["https://203.0.113.99/", "private_address"],
  ["https://198.18.0.1/", "private_address"],
  ["https://198.19.255.255/", "private_address"],
  // IPv6 loopback, unspecified, mapped and special ranges
  ["https://[::1]/", "private_address"],
  ["https://[0:0:0:0:0:0:0:1]/", "private_address"],
  ["https://[::]/", "private_address"],
  ["https://[::ffff:127.0.0.1]/", "private_address"],
  ["https://[::ffff:7f00:1]/", "private_address"],
  ["https://[::ffff:10.0.0.1]/", "private_address"],
  ["https://[::ffff:8.8.8.8]/", "private_address"], // mapped forms are refused outright
  ["https://[::127.0.0.1]/", "private_address"], // deprecated IPv4-compatible
  ["https://[fe80::1]/", "private_address"],
  ["https://[febf:ffff::1]/", "private_address"],
  ["https://[fc00::1]/", "private_address"],
  ["https://[fd12:3456:789a::1]/", "private_address"],
  ["https://[ff02::1]/", "private_address"],
  ["https://[64:ff9b::7f00:1]/", "private_address"], // NAT64 of 127.0.0.1
  ["https://[2001:db8::1]/", "private_address"],
  ["https://[2001::1]/", "private_address"], // Teredo
  ["https://[2002:7f00:1::]/", "private_address"], // 6to4 of 127.0.0.1
  ["https://[100::1]/", "private_address"], // discard-only
  ["https://[3fff::1]/", "private_address"], // documentation
  // ports other than 443
  ["https://example.com:8443/", "port_not_allowed"],
  ["https://example.com:80/", "port_not_allowed"],
  ["https://example.com:444/hook", "port_not_allowed"],
  ["https://93.184.215.14:8080/", "port_not_allowed"],
  // schemes other than https
  ["http://example.com/", "https_required"],
  ["HTTP://example.com/", "https_required"],
  ["http://2130706433/", "https_required"],
  ["ftp://example.com/", "https_required"],
  ["wss://example.com/", "https_required"],
  ["javascript:alert(1)", "https_required"],
  ["file:///etc/passwd", "https_required"],
  // credentials and fragments
  ["https://user:pass@example.com/", "credentials_not_allowed"],
  ["https://user@example.com/", "credentials_not_allowed"],
  ["https://:secret@example.com/", "credentials_not_allowed"],
  ["https://example.com/hook#frag", "fragment_not_allowed"],
  ["https://example.com/#", "fragment_not_allowed"],
  // names that only mean something on the local network
  ["https://localhost/", "localhost_not_allowed"],
  ["https://LOCALHOST/", "localhost_not_allowed"],
  ["https://localhost./", "localhost_not_allowed"],
  ["https://api.localhost/", "localhost_not_allowed"],
  ["https://printer.local/", "localhost_not_allowed"],
  ["https://metadata.google.internal/", "localhost_not_allowed"],
  ["https://router.home.arpa/", "localhost_not_allowed"],
  ["https://intranet/", "localhost_not_allowed"],
  // not a URL at all
  ["not a url", "invalid_url"],
  ["", "invalid_url"],
  ["https://", "invalid_url"],
  ["https://exa mple.com/", "invalid_url"],
  ["https://example.com/\n", "invalid_url"],
  ["https://1.2.3.256/", "invalid_url"],
  ["https://[fe80::1%25eth0]/", "invalid_url"],
  ["https://example.com:65536/", "invalid_url"]
]

const acceptedTargets: ReadonlyArray<readonly [string, { host: string; literalIp: string | null; href: string }]> = [
  ["https://example.com/hook", { host: "example.com", literalIp: null, href: "https://example.com/hook" }],
  [
    "https://hooks.example.org:443/in?source=burnbox",
    { host: "hooks.example.org", literalIp: null, href: "https://hooks.example.org/in?source=burnbox" }
  ],
  ["https://EXAMPLE.COM./x", { host: "example.com", literalIp: null, href: "https://example.com./x" }],
  ["https://bücher.example/", { host: "xn--bcher-kva.example", literalIp: null, href: "https://xn--bcher-kva.example/" }],
  ["https://8.8.8.8/", { host: "8.8.8.8", literalIp: "8.8.8.8", href: "https://8.8.8.8/" }],
  ["https://1.1.1.1/hook", { host: "1.1.1.1", literalIp: "1.1.1.1", href: "https://1.1.1.1/hook" }],
  ["https://172.32.0.1/", { host: "172.32.0.1", literalIp: "172.32.0.1", href: "https://172.32.0.1/" }],
  ["https://100.128.0.1/", { host: "100.128.0.1", literalIp: "100.128.0.1", href: "https://100.128.0.1/" }],
  ["https://134744072/", { host: "8.8.8.8", literalIp: "8.8.8.8", href: "https://8.8.8.8/" }],
  [
    "https://[2606:4700:4700::1111]/",
    { host: "2606:4700:4700::1111", literalIp: "2606:4700:4700::1111", href: "https://[2606:4700:4700::1111]/" }
  ],
  [
    "https://api.service.example.co.uk/webhooks/burnbox",
    { host: "api.service.example.co.uk", literalIp: null, href: "https://api.service.example.co.uk/webhooks/burnbox" }
  ]
]

describe("webhook target URLs", () => {
  it("the refusal table is large enough to mean something", () => {
    expect(refusedTargets.length).toBeGreaterThanOrEqual(60)
    expect(acceptedTargets.length).toBeGreaterThanOrEqual(8)
  })

  it.each(refusedTargets)("refuses %j with %s", (raw, reason) => {
    expect(checkWebhookUrl(raw, production)).toEqual({ ok: false, reason })
  })

  it.each(acceptedTargets)("accepts the public target %j", (raw, expected) => {
    const result = checkWebhookUrl(raw, production)
    expect(result.ok).toBe(true)
    if (!result.ok) return
    expect({ host: result.host, literalIp: result.literalIp, href: result.url.href }).toEqual(expected)
  })
})

describe("BURNBOX_WEBHOOK_ALLOW_PRIVATE (development and tests only)", () => {
  it("permits a loopback receiver on any port", () => {
    const result = checkWebhookUrl("https://127.0.0.1:8443/hook", development)
    expect(result).toMatchObject({ ok: true, host: "127.0.0.1", literalIp: "127.0.0.1" })
    expect(checkWebhookUrl("https://127.0.0.1:8443/hook", production)).toEqual({
      ok: false,
      reason: "private_address"
    })
  })

  it.each([
    "https://localhost:8443/hook",
    "https://[::1]:9000/",
    "https://192.168.0.10/",
    "https://10.1.2.3:3000/in",
    "https://receiver:8443/"
  ])("permits %j", (raw) => {
    expect(checkWebhookUrl(raw, development)).toMatchObject({ ok: true })
  })

  it.each([
    ["http://127.0.0.1:8443/hook", "https_required"],
    ["https://u:p@127.0.0.1:8443/", "credentials_not_allowed"],
    ["https://127.0.0.1:8443/#x", "fragment_not_allowed"],
    ["https://169.254.169.254/", "private_address"],
    ["https://0.0.0.0:8443/", "private_address"],
    ["https://[::ffff:127.0.0.1]:8443/", "private_address"],
    ["https://224.0.0.1/", "private_address"]
  ] as const)("still refuses %j with %s", (raw, reason) => {
    expect(checkWebhookUrl(raw, development)).toEqual({ ok: false, reason })
  })
})

describe("resolved addresses", () => {
  it.each([
    ["a name resolving to a private address", ["10.0.0.5"]],
    ["a public-looking name resolving to loopback (127.0.0.1.nip.io)", ["127.0.0.1"]],
    ["a name resolving to the metadata address", ["169.254.169.254"]],
    ["a mix of public and private IPv4", ["93.184.215.14", "10.0.0.1"]],
    ["a mix of public IPv6 and loopback", ["2606:4700::6810:85e5", "::1"]],
    ["an IPv4-mapped answer", ["::ffff:127.0.0.1"]],
    ["a unique-local IPv6 answer", ["fd00::1"]]
  ])("refuses %s", (_, addresses) => {
    expect(checkResolvedAddresses(addresses, production)).toEqual({ ok: false, reason: "private_address" })
  })

  it("calls an empty or unreadable answer unresolvable", () => {
    expect(checkResolvedAddresses([], production)).toEqual({ ok: false, reason: "unresolvable" })
    expect(checkResolvedAddresses([], development)).toEqual({ ok: false, reason: "unresolvable" })
    expect(checkResolvedAddresses(["not-an-ip"], production)).toEqual({ ok: false, reason: "unresolvable" })
  })

  it("accepts answers that are all public", () => {
    expect(checkResolvedAddresses(["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"], production))
      .toEqual({ ok: true })
  })

  it("permits loopback and private answers only with allowPrivate, never link-local", () => {
    expect(checkResolvedAddresses(["127.0.0.1", "::1"], development)).toEqual({ ok: true })
    expect(checkResolvedAddresses(["192.168.1.20"], development)).toEqual({ ok: true })
    expect(checkResolvedAddresses(["169.254.169.254"], development)).toEqual({
      ok: false,
      reason: "private_address"
    })
  })
})

describe("classifyIp", () => {
  const cases: ReadonlyArray<readonly [string, AddressCategory]> = [
    ["8.8.8.8", "public"],
    ["172.15.255.255", "public"],
    ["172.16.0.0", "private"],
    ["100.64.0.0", "private"],
    ["100.63.255.255", "public"],
    ["127.0.0.1", "loopback"],
    ["169.254.1.1", "link_local"],
    ["0.0.0.0", "unspecified"],
    ["0.255.255.255", "reserved"],
    ["224.0.0.251", "multicast"],
    ["255.255.255.255", "reserved"],
    ["192.88.99.1", "reserved"],
    ["2606:4700:4700::1111", "public"],
    ["::1", "loopback"],
    ["::", "unspecified"],
    ["::ffff:8.8.8.8", "ipv4_mapped"],
    ["::ffff:0:7f00:1", "reserved"], // IPv4-translated, outside global unicast
    ["fe80::1%eth0", "link_local"],
    ["fc00::", "private"],
    ["ff05::1:3", "multicast"],
    ["64:ff9b::808:808", "reserved"],
    ["64:ff9b:1::1", "reserved"],
    ["100::", "reserved"],
    ["100:0:0:1::", "reserved"],
    ["2001:db8:ffff::1", "reserved"],
    ["2001:0:4136:e378::1", "reserved"],
    ["2001:200::1", "public"], // just past the IETF protocol block 2001::/23
    ["2002:c000:0204::1", "reserved"],
    ["4000::1", "reserved"], // unassigned space is refused by default
    ["127.1", "invalid"],
    ["example.com", "invalid"],
    ["", "invalid"]
  ]

  it.each(cases)("classifies %s as %s", (ip, category) => {
    expect(classifyIp(ip)).toBe(category)
    expect(isPublicIp(ip)).toBe(category === "public")
  })
})
