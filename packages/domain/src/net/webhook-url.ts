import { isIP } from "node:net"
import { classifyIp, isAllowedCategory } from "./address-policy.ts"

/**
 * Server-side request forgery guard for webhook (and push) target URLs, in two steps:
 * `checkWebhookUrl` when the URL is registered and before each delivery, then
 * `checkResolvedAddresses` on what DNS answered, right before connecting (the caller must
 * connect to one of those checked addresses, not resolve again, or DNS rebinding wins).
 */

export interface TargetPolicyOptions {
  /** BURNBOX_WEBHOOK_ALLOW_PRIVATE: loopback/private targets, local names and any port. */
  readonly allowPrivate: boolean
}

export type WebhookUrlRefusal =
  | "invalid_url"
  | "https_required"
  | "credentials_not_allowed"
  | "fragment_not_allowed"
  | "private_address"
  | "localhost_not_allowed"
  | "port_not_allowed"

export type WebhookUrlCheck =
  | {
    readonly ok: true
    /** The WHATWG-normalized URL; deliver to this, not to the raw text. */
    readonly url: URL
    /** Host name for DNS and TLS SNI, or the IP literal: no IPv6 brackets, no trailing dot. */
    readonly host: string
    /** The IP literal when the host is one (in canonical notation), else null. */
    readonly literalIp: string | null
  }
  | { readonly ok: false; readonly reason: WebhookUrlRefusal }

export type ResolvedAddressCheck =
  | { readonly ok: true }
  | { readonly ok: false; readonly reason: "private_address" | "unresolvable" }

// Suffixes that only ever name machines on the local network (RFC 6761, RFC 6762, RFC 8375).
const localSuffixes: ReadonlyArray<string> = ["localhost", "local", "internal", "localdomain", "home.arpa"]

/**
 * Checks a target URL. The checks run in reading order (scheme, credentials, fragment, host,
 * port), so each URL gets one stable reason code.
 */
export const checkWebhookUrl = (raw: string, options: TargetPolicyOptions): WebhookUrlCheck => {
  const url = parseUrl(raw)
  if (url === null) return refuse("invalid_url")
  if (url.protocol !== "https:") return refuse("https_required")
  if (url.username !== "" || url.password !== "") return refuse("credentials_not_allowed")
  if (hasFragment(url)) return refuse("fragment_not_allowed")

  const host = bareHost(url)
  const literalIp = isIP(host) === 0 ? null : host
  if (literalIp !== null) {
    if (!isAllowedCategory(classifyIp(literalIp), options)) return refuse("private_address")
  } else if (!options.allowPrivate && isLocalName(host)) {
    return refuse("localhost_not_allowed")
  }

  // `new URL` drops a default :443, so any port left is explicit and not 443.
  if (url.port !== "" && !options.allowPrivate) return refuse("port_not_allowed")
  return { ok: true, url, host, literalIp }
}

/** Every resolved address must be allowed: one private answer is enough to refuse the host. */
export const checkResolvedAddresses = (
  addresses: ReadonlyArray<string>,
  options: TargetPolicyOptions
): ResolvedAddressCheck => {
  if (addresses.length === 0) return { ok: false, reason: "unresolvable" }
  for (const address of addresses) {
    const category = classifyIp(address)
    if (category === "invalid") return { ok: false, reason: "unresolvable" }
    if (!isAllowedCategory(category, options)) return { ok: false, reason: "private_address" }
  }
  return { ok: true }
}

const refuse = (reason: WebhookUrlRefusal): WebhookUrlCheck => ({ ok: false, reason })

// WHATWG parsing silently strips tabs and newlines inside a URL and trims surrounding spaces;
// refusing them keeps the stored URL identical to what the owner typed.
const parseUrl = (raw: string): URL | null => {
  if (hasControlOrSpace(raw)) return null
  return URL.canParse(raw) ? new URL(raw) : null
}

const hasControlOrSpace = (text: string): boolean => {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code <= 0x20 || code === 0x7f) return true
  }
  return false
}

// An empty fragment (`https://x/#`) leaves `url.hash` empty; `#` can only appear in the
// serialized form as the fragment delimiter.
const hasFragment = (url: URL): boolean => url.href.includes("#")

// WHATWG has already turned every IPv4 notation (decimal, octal, hex, short forms) into a
// dotted quad and compressed IPv6, so one canonical literal remains to classify.
const bareHost = (url: URL): string => {
  const hostname = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname
  return hostname.replace(/\.+$/, "")
}

// A single-label name resolves through search domains and /etc/hosts, i.e. locally.
const isLocalName = (host: string): boolean =>
  !host.includes(".") || localSuffixes.some((suffix) => host === suffix || host.endsWith(`.${suffix}`))
