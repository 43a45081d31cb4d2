import { randomInt } from "node:crypto"
import { Data } from "effect"
import { aliasWords } from "./words.ts"

/** How a new alias's local part looks: the same union as `AliasStyle` in ../Alias.ts (Alias.style). */
export type LocalPartStyle = "words" | "pronounceable" | "numeric"

export const localPartStyles: ReadonlyArray<LocalPartStyle> = ["words", "pronounceable", "numeric"]

/** Randomness is injected so tests can replay a sequence from a seed. */
export interface RandomSource {
  /** A uniformly drawn integer in `[0, maxExclusive)`. */
  nextInt(maxExclusive: number): number
}

function checkBound(maxExclusive: number, limit: number): void {
  if (!Number.isSafeInteger(maxExclusive) || maxExclusive < 1 || maxExclusive > limit) {
    throw new RangeError(`nextInt: maxExclusive must be an integer in 1..${limit}, got ${maxExclusive}`)
  }
}

const uint32Range = 2 ** 32

/**
 * A deterministic source (mulberry32): small, fast and well spread; for tests and replays only,
 * never for addresses handed to users (they must not be guessable).
 */
export function seededRandom(seed: number): RandomSource {
  let state = seed >>> 0
  const nextUint32 = (): number => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return (t ^ (t >>> 14)) >>> 0
  }
  return {
    nextInt(maxExclusive) {
      checkBound(maxExclusive, uint32Range)
      return Math.floor((nextUint32() / uint32Range) * maxExclusive)
    }
  }
}

/** The production source: unguessable, so nobody can predict the next alias handed out. */
export const cryptoRandom: RandomSource = {
  nextInt(maxExclusive) {
    // node:crypto randomInt accepts ranges below 2^48 and is free of modulo bias.
    checkBound(maxExclusive, 2 ** 48 - 1)
    return randomInt(maxExclusive)
  }
}

function pick<A>(items: ReadonlyArray<A>, random: RandomSource): A {
  const item = items[random.nextInt(items.length)]
  if (item === undefined) throw new RangeError("pick: empty list or out-of-range draw")
  return item
}

/** An integer in `[min, max]`. */
function between(min: number, max: number, random: RandomSource): number {
  return min + random.nextInt(max - min + 1)
}

// ---------------------------------------------------------------------------------------------
// words: two different dictionary words and a number 1..999, joined by dots: `amber.otter.42`.
// Dots read like a person's `first.last` address and survive every mail system unchanged.

export const wordsSeparator = "."

function wordsLocalPart(random: RandomSource): string {
  const first = pick(aliasWords, random)
  let second = pick(aliasWords, random)
  while (second === first) second = pick(aliasWords, random) // `otter.otter.3` looks like a typo
  return [first, second, String(between(1, 999, random))].join(wordsSeparator)
}

// ---------------------------------------------------------------------------------------------
// pronounceable: alternating consonant and vowel, 8..12 letters, then two digits half the time:
// `tovarelumi`, `gabedufo07`. Strict alternation never builds a consonant cluster, and the
// consonant set leaves out c, q, w, x and y, whose sound or spelling is ambiguous when read aloud.

const consonants: ReadonlyArray<string> = [..."bdfghjklmnprstvz"]
const vowels: ReadonlyArray<string> = [..."aeiou"]

// Alternation can still spell a rude word by chance; such draws are thrown away and redrawn.
const unpronounceableFragments: ReadonlyArray<string> = [
  "anal", "anus", "dik", "fag", "fuk", "homo", "kike", "nazi", "nig", "pedo", "penis", "pube",
  "puta", "rape", "semen", "tit", "vagina"
]

function syllableLetters(length: number, random: RandomSource): string {
  let letters = ""
  for (let index = 0; index < length; index++) {
    letters += pick(index % 2 === 0 ? consonants : vowels, random)
  }
  return letters
}

function isSeemly(letters: string): boolean {
  return !unpronounceableFragments.some((fragment) => letters.includes(fragment))
}

function pronounceableLocalPart(random: RandomSource): string {
  let letters = syllableLetters(between(8, 12, random), random)
  while (!isSeemly(letters)) letters = syllableLetters(between(8, 12, random), random)
  const withDigits = random.nextInt(2) === 1
  return withDigits ? letters + String(random.nextInt(100)).padStart(2, "0") : letters
}

// ---------------------------------------------------------------------------------------------
// numeric: 10..12 digits, never a leading zero (a spreadsheet or phone keypad would drop it).

function numericLocalPart(random: RandomSource): string {
  const length = between(10, 12, random)
  let digits = String(between(1, 9, random))
  while (digits.length < length) digits += String(random.nextInt(10))
  return digits
}

/** One local part in the given style; see the comments above each style for its shape. */
export function generateLocalPart(style: LocalPartStyle, random: RandomSource): string {
  switch (style) {
    case "words":
      return wordsLocalPart(random)
    case "pronounceable":
      return pronounceableLocalPart(random)
    case "numeric":
      return numericLocalPart(random)
  }
}

// ---------------------------------------------------------------------------------------------

/** The longest local part RFC 5321 allows (section 4.5.3.1.1). */
export const maxLocalPartLength = 64

// The subset of RFC 5321 dot-atoms we hand out: lowercase letters, digits, and single dots or
// dashes between them (never leading, trailing or doubled).
const generatedLocalPartPattern = /^[a-z0-9]+(?:[.-][a-z0-9]+)*$/

/** Whether a local part is one this service could have generated. */
export function isValidLocalPart(localPart: string): boolean {
  return localPart.length <= maxLocalPartLength && generatedLocalPartPattern.test(localPart)
}

/** Raised when `generateCandidates` used up its attempts before finding enough free local parts. */
export class CandidatePoolExhausted extends Data.TaggedError("CandidatePoolExhausted")<{
  readonly style: LocalPartStyle
  readonly wanted: number
  readonly found: number
  readonly attempts: number
}> {
  override get message(): string {
    return `found ${this.found} of ${this.wanted} free ${this.style} local parts in ${this.attempts} attempts`
  }
}

/**
 * `count` distinct local parts for which `isTaken` is false. Every draw counts as an attempt,
 * whether it was new, a repeat or taken. When `maxAttempts` draws are not enough, this throws
 * `CandidatePoolExhausted` rather than returning fewer: a reservation always holds exactly the
 * number asked for, and a nearly full pool is an operational problem to surface, not to hide.
 */
export function generateCandidates(
  style: LocalPartStyle,
  count: number,
  random: RandomSource,
  isTaken: (localPart: string) => boolean,
  maxAttempts = 1000
): ReadonlyArray<string> {
  const found = new Set<string>()
  let attempts = 0
  while (found.size < count && attempts < maxAttempts) {
    attempts++
    const localPart = generateLocalPart(style, random)
    if (!found.has(localPart) && !isTaken(localPart)) found.add(localPart)
  }
  if (found.size < count) {
    throw new CandidatePoolExhausted({ style, wanted: count, found: found.size, attempts })
  }
  return [...found]
}

// ---------------------------------------------------------------------------------------------

/** A recipient local part split for delivery: `base` finds the alias, `detail` is informational. */
export interface NormalizedLocalPart {
  readonly base: string
  readonly detail: string | null
}

const subaddressSeparator = "+"

/**
 * Receiving side (RFC 5233 subaddressing): `Amber.Otter.42+run7` is delivered to the alias
 * `amber.otter.42`. Only `base` is lowercased, because only it is matched (aliases match
 * case-insensitively); `detail` keeps its case as written. The first `+` separates, so a detail
 * may itself contain `+`. `detail` is null without a `+` and `""` for a trailing `+`.
 */
export function normalizeLocalPart(localPart: string): NormalizedLocalPart {
  const separatorAt = localPart.indexOf(subaddressSeparator)
  if (separatorAt === -1) return { base: localPart.toLowerCase(), detail: null }
  return {
    base: localPart.slice(0, separatorAt).toLowerCase(),
    detail: localPart.slice(separatorAt + subaddressSeparator.length)
  }
}
