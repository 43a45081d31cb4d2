import { isIP } from "node:net"

/**
 * Which kind of address an IP literal is, for deciding whether the service may connect to it
 * (webhook and push delivery). Only `public` is a legitimate outbound target in production.
 *
 * The policy is deny-by-default: IPv6 outside the global unicast block 2000::/3 is `reserved`
 * unless it has a more specific name, so a newly assigned special range is refused until
 * someone decides otherwise.
 */
export type AddressCategory =
  | "public"
  | "private"
  | "loopback"
  | "link_local"
  | "unspecified"
  | "multicast"
  | "reserved"
  | "ipv4_mapped"
  | "invalid"

/** A CIDR block over the address's bytes (4 for IPv4, 16 for IPv6). */
interface Range {
  readonly prefix: ReadonlyArray<number>
  readonly bits: number
  readonly category: AddressCategory
}

const range = (prefix: ReadonlyArray<number>, bits: number, category: AddressCategory): Range => ({
  prefix,
  bits,
  category
})

// IANA IPv4 special-purpose registry, plus the blocks that are never a real webhook receiver.
// The first matching range wins, so the narrow ones come first.
const ipv4Ranges: ReadonlyArray<Range> = [
  range([0, 0, 0, 0], 32, "unspecified"),
  range([0], 8, "reserved"), // "this network"; Linux connects 0.x to the local host
  range([10], 8, "private"),
  range([100, 64], 10, "private"), // CGNAT shared address space, never publicly routed
  range([127], 8, "loopback"),
  range([169, 254], 16, "link_local"), // includes the cloud metadata address 169.254.169.254
  range([172, 16], 12, "private"),
  range([192, 0, 0], 24, "reserved"), // IETF protocol assignments
  range([192, 0, 2], 24, "reserved"), // TEST-NET-1 documentation
  range([192, 88, 99], 24, "reserved"), // deprecated 6to4 relay anycast
  range([192, 168], 16, "private"),
  range([198, 18], 15, "reserved"), // benchmarking
  range([198, 51, 100], 24, "reserved"), // TEST-NET-2 documentation
  range([203, 0, 113], 24, "reserved"), // TEST-NET-3 documentation
  range([224], 4, "multicast"),
  range([240], 4, "reserved") // future use, including the broadcast 255.255.255.255
]

const ipv6Ranges: ReadonlyArray<Range> = [
  range([], 128, "unspecified"), // ::
  range([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 128, "loopback"), // ::1
  range([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff], 96, "ipv4_mapped"), // ::ffff:0:0/96
  range([0x00, 0x64, 0xff, 0x9b], 32, "reserved"), // NAT64 64:ff9b::/96 and local-use 64:ff9b:1::/48
  range([0x01, 0x00, 0, 0, 0, 0, 0, 0], 64, "reserved"), // discard-only 100::/64
  range([0x20, 0x01, 0x0d, 0xb8], 32, "reserved"), // documentation 2001:db8::/32
  range([0x20, 0x01, 0x00], 23, "reserved"), // IETF protocol assignments 2001::/23, incl. Teredo 2001::/32
  range([0x20, 0x02], 16, "reserved"), // 6to4 2002::/16 tunnels to an embedded IPv4 address
  range([0x3f, 0xff, 0x00], 20, "reserved"), // documentation 3fff::/20
  range([0xfc], 7, "private"), // unique local fc00::/7
  range([0xfe, 0x80], 10, "link_local"), // fe80::/10
  range([0xff], 8, "multicast"), // ff00::/8
  range([0x20], 3, "public") // global unicast 2000::/3; everything else falls through to reserved
]

/** Classifies an IP literal in canonical notation (dotted-quad IPv4, or IPv6 with an optional zone). */
export const classifyIp = (ip: string): AddressCategory => {
  const address = stripZone(ip)
  switch (isIP(address)) {
    case 4:
      return matchRange(parseIpv4(address), ipv4Ranges) ?? "public"
    case 6:
      return matchRange(parseIpv6(address), ipv6Ranges) ?? "reserved"
    default:
      return "invalid"
  }
}

export const isPublicIp = (ip: string): boolean => classifyIp(ip) === "public"

/**
 * Whether a delivery may connect to an address of this category. `allowPrivate`
 * (BURNBOX_WEBHOOK_ALLOW_PRIVATE, development and tests only) adds loopback and private
 * networks; link-local (cloud metadata), mapped, multicast and reserved addresses stay refused.
 */
export const isAllowedCategory = (
  category: AddressCategory,
  options: { readonly allowPrivate: boolean }
): boolean =>
  category === "public" || (options.allowPrivate && (category === "loopback" || category === "private"))

// A zone id (`fe80::1%eth0`) names an interface, not a different address.
const stripZone = (ip: string): string => {
  const percent = ip.indexOf("%")
  return percent === -1 ? ip : ip.slice(0, percent)
}

const matchRange = (bytes: ReadonlyArray<number>, ranges: ReadonlyArray<Range>): AddressCategory | undefined =>
  ranges.find((r) => inRange(bytes, r))?.category

const inRange = (bytes: ReadonlyArray<number>, r: Range): boolean => {
  for (let bit = 0; bit < r.bits; bit++) {
    const index = bit >> 3
    const mask = 0x80 >> (bit & 7)
    if (((bytes[index] ?? 0) & mask) !== ((r.prefix[index] ?? 0) & mask)) return false
  }
  return true
}

// Only called after isIP accepted the text, so the shapes are known to be valid.
const parseIpv4 = (ip: string): Array<number> => ip.split(".").map(Number)

const parseIpv6 = (ip: string): Array<number> => {
  const groups = ipv6Groups(ip)
  return groups.flatMap((group) => [group >> 8, group & 0xff])
}

/** The eight 16-bit groups of an IPv6 address, expanding `::` and a dotted IPv4 tail. */
const ipv6Groups = (ip: string): Array<number> => {
  const [head = "", tail] = ip.split("::")
  const parse = (part: string): Array<number> => (part === "" ? [] : part.split(":").flatMap(parseGroup))
  const left = parse(head)
  if (tail === undefined) return left
  const right = parse(tail)
  return [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right]
}

const parseGroup = (group: string): Array<number> => {
  if (!group.includes(".")) return [Number.parseInt(group, 16)]
  const [a = 0, b = 0, c = 0, d = 0] = parseIpv4(group)
  return [(a << 8) | b, (c << 8) | d]
}
