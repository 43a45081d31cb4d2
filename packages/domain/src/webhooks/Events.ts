/** Event types of spec 6.1. */
export type EventType =
  | "message.received"
  | "message.otp_extracted"
  | "message.restored"
  | "alias.claimed"
  | "alias.paused"
  | "alias.burned"
  | "alias.expiring"
  | "webhook.test"

export const ApiVersion = "2026-08-31"

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

/**
 * A ULID (Crockford base32: 48-bit time, 80 random bits) for the given time. The randomness is
 * Web Crypto's, so the contract (which imports this file) also bundles for browsers.
 */
export const ulid = (timeMs: number, random: Uint8Array = crypto.getRandomValues(new Uint8Array(10))): string => {
  let time = ""
  let t = timeMs
  for (let i = 0; i < 10; i++) {
    time = crockford[t % 32]! + time
    t = Math.floor(t / 32)
  }
  let bits = 0n
  for (const byte of random.subarray(0, 10)) bits = (bits << 8n) | BigInt(byte)
  let tail = ""
  for (let i = 0; i < 16; i++) {
    tail = crockford[Number(bits & 31n)]! + tail
    bits >>= 5n
  }
  return time + tail
}

/** Event ids: `evt_` + ULID, stable across every retry and redelivery (spec 6.2). */
export const eventId = (timeMs: number): string => `evt_${ulid(timeMs)}`

export const EventIdPattern = /^evt_[0-9A-HJKMNP-TV-Z]{26}$/

/** The alias as events carry it (spec 6.3). */
export interface EventAlias {
  readonly id: number
  readonly address: string
  readonly label: string | null
}
