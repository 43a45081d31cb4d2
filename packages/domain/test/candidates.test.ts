import { describe, expect, it } from "@effect/vitest"
import {
  aliasWords,
  CandidatePoolExhausted,
  cryptoRandom,
  generateCandidates,
  generateLocalPart,
  isValidLocalPart,
  normalizeLocalPart,
  parseWordList,
  type LocalPartStyle,
  type RandomSource,
  seededRandom
} from "../src/aliases/index.ts"

const sampleSize = 10_000
const wordSet = new Set(aliasWords)

function sample(style: LocalPartStyle, seed: number, size = sampleSize): ReadonlyArray<string> {
  const random = seededRandom(seed)
  return Array.from({ length: size }, () => generateLocalPart(style, random))
}

/** A source that always draws the same index, so every value it produces repeats. */
const stuckRandom: RandomSource = { nextInt: () => 0 }

const wordsShape = /^([a-z]{3,8})\.([a-z]{3,8})\.([1-9][0-9]{0,2})$/
const pronounceableShape = /^((?:[bdfghjklmnprstvz][aeiou])+[bdfghjklmnprstvz]?)([0-9]{2})?$/
const numericShape = /^[1-9][0-9]{9,11}$/

describe("word list", () => {
  it("ships at least 1,500 distinct words of 3..8 lowercase ASCII letters", () => {
    expect(aliasWords.length).toBeGreaterThanOrEqual(1500)
    expect(new Set(aliasWords).size).toBe(aliasWords.length)
    expect(aliasWords.filter((word) => !/^[a-z]{3,8}$/.test(word))).toEqual([])
  })

  it("leaves out blocklisted words", () => {
    const blocked = ["dead", "poison", "cockatoo", "money", "baryonyx", "bejewled"]
    expect(aliasWords.filter((word) => blocked.includes(word))).toEqual([])
  })

  it("refuses a data file with a word outside 3..8 lowercase letters or a duplicate", () => {
    expect(parseWordList("amber\notter\n")).toEqual(["amber", "otter"])
    expect(() => parseWordList("amber\nOtter\n")).toThrow(/Otter/)
    expect(() => parseWordList("amber\nox\n")).toThrow(/ox/)
    expect(() => parseWordList("amber\namber\n")).toThrow(/duplicate/)
  })
})

describe("random sources", () => {
  it("seededRandom replays the same sequence for the same seed", () => {
    const draw = (seed: number) => {
      const random = seededRandom(seed)
      return Array.from({ length: 50 }, () => random.nextInt(1_000_000))
    }
    expect(draw(42)).toEqual(draw(42))
    expect(draw(42)).not.toEqual(draw(43))
  })

  it("seededRandom and cryptoRandom draw every value of [0, max) and nothing outside it", () => {
    for (const random of [seededRandom(7), cryptoRandom]) {
      const seen = new Set(Array.from({ length: 2_000 }, () => random.nextInt(7)))
      expect([...seen].sort()).toEqual([0, 1, 2, 3, 4, 5, 6])
    }
  })

  it("refuses a bound that is not a positive integer", () => {
    for (const random of [seededRandom(1), cryptoRandom]) {
      expect(() => random.nextInt(0)).toThrow(RangeError)
      expect(() => random.nextInt(-3)).toThrow(RangeError)
      expect(() => random.nextInt(2.5)).toThrow(RangeError)
    }
  })
})

describe("generateLocalPart", () => {
  it("is deterministic under a seed, for every style", () => {
    for (const style of ["words", "pronounceable", "numeric"] as const) {
      expect(sample(style, 2024, 20)).toEqual(sample(style, 2024, 20))
      expect(sample(style, 2024, 20)).not.toEqual(sample(style, 2025, 20))
    }
  })

  it("words: two different dictionary words and a number 1..999, joined by dots", () => {
    const values = sample("words", 1)
    const numbers = new Set<number>()
    for (const value of values) {
      const parts = wordsShape.exec(value)
      expect(parts, value).not.toBeNull()
      const [, first = "", second = "", number = ""] = parts ?? []
      expect(wordSet.has(first), value).toBe(true)
      expect(wordSet.has(second), value).toBe(true)
      expect(first, value).not.toBe(second)
      numbers.add(Number(number))
    }
    expect(Math.min(...numbers)).toBe(1)
    expect(Math.max(...numbers)).toBe(999)
  })

  it("pronounceable: consonant-vowel letters, 8..12 of them, sometimes two digits", () => {
    const values = sample("pronounceable", 2)
    const lengths = new Set<number>()
    let withDigits = 0
    for (const value of values) {
      const parts = pronounceableShape.exec(value)
      expect(parts, value).not.toBeNull()
      const letters = parts?.[1] ?? ""
      expect(letters.length, value).toBeGreaterThanOrEqual(8)
      expect(letters.length, value).toBeLessThanOrEqual(12)
      lengths.add(letters.length)
      if (parts?.[2] !== undefined) withDigits++
    }
    expect([...lengths].sort((a, b) => a - b)).toEqual([8, 9, 10, 11, 12])
    // Half the values carry digits; far outside 40..60 % would mean the coin is broken.
    expect(withDigits).toBeGreaterThan(sampleSize * 0.4)
    expect(withDigits).toBeLessThan(sampleSize * 0.6)
  })

  it("pronounceable: never spells a blocked fragment", () => {
    const blocked = /anal|anus|dik|fag|fuk|homo|kike|nazi|nig|pedo|penis|pube|puta|rape|semen|tit|vagina/
    expect(sample("pronounceable", 3).filter((value) => blocked.test(value))).toEqual([])
  })

  it("numeric: 10..12 digits, never starting with 0", () => {
    const values = sample("numeric", 4)
    expect(values.filter((value) => !numericShape.test(value))).toEqual([])
    expect([...new Set(values.map((value) => value.length))].sort()).toEqual([10, 11, 12])
  })

  it("every style yields valid RFC 5321 local parts over 10,000 values, seeded and crypto", () => {
    for (const style of ["words", "pronounceable", "numeric"] as const) {
      const crypto = Array.from({ length: sampleSize }, () => generateLocalPart(style, cryptoRandom))
      const invalid = [...sample(style, 5), ...crypto].filter((value) => !isValidLocalPart(value))
      expect(invalid, style).toEqual([])
    }
  })
})

describe("isValidLocalPart", () => {
  it("accepts lowercase letters and digits with single inner dots or dashes", () => {
    expect(isValidLocalPart("amber.otter-42")).toBe(true)
    expect(isValidLocalPart("a".repeat(64))).toBe(true)
  })

  it("refuses leading, trailing or doubled separators, other characters and more than 64", () => {
    for (const bad of [".amber", "amber.", "amber..otter", "-amber", "amber-", "amber.-otter", "Amber",
      "am_ber", "am+ber", "", "a".repeat(65)]) {
      expect(isValidLocalPart(bad), bad).toBe(false)
    }
  })
})

describe("generateCandidates", () => {
  it("returns the requested number of distinct local parts, reproducibly under a seed", () => {
    const first = generateCandidates("words", 5, seededRandom(9), () => false)
    expect(first).toHaveLength(5)
    expect(new Set(first).size).toBe(5)
    expect(generateCandidates("words", 5, seededRandom(9), () => false)).toEqual(first)
  })

  it("skips local parts that are taken", () => {
    // Taking every numeric value that ends in an odd digit forces the generator to skip half.
    const checked: Array<string> = []
    const isTaken = (localPart: string) => {
      checked.push(localPart)
      return /[13579]$/.test(localPart)
    }
    const candidates = generateCandidates("numeric", 5, seededRandom(10), isTaken)
    expect(candidates.filter((value) => /[13579]$/.test(value))).toEqual([])
    expect(checked.some((value) => /[13579]$/.test(value))).toBe(true)
    expect(candidates).toHaveLength(5)
  })

  it("never returns a repeat, even when the random source repeats itself", () => {
    expect(() => generateCandidates("numeric", 2, stuckRandom, () => false)).toThrow(CandidatePoolExhausted)
  })

  it("throws CandidatePoolExhausted after maxAttempts draws, saying how far it got", () => {
    let calls = 0
    const error = (() => {
      try {
        generateCandidates("numeric", 5, stuckRandom, () => calls++ > 0, 25)
        return undefined
      } catch (caught) {
        return caught
      }
    })()
    expect(error).toBeInstanceOf(CandidatePoolExhausted)
    expect(error).toMatchObject({ _tag: "CandidatePoolExhausted", style: "numeric", wanted: 5, found: 1, attempts: 25 })
    expect(String(error)).toMatch(/found 1 of 5 free numeric local parts in 25 attempts/)
  })

  it("asks isTaken once per attempt and stops at maxAttempts when every local part is taken", () => {
    let calls = 0
    const allTaken = () => {
      calls++
      return true
    }
    expect(() => generateCandidates("pronounceable", 1, seededRandom(11), allTaken, 25)).toThrow(CandidatePoolExhausted)
    expect(calls).toBe(25)
  })
})

describe("normalizeLocalPart (receiving)", () => {
  it("delivers local+detail to the alias local, lowercasing the base only", () => {
    expect(normalizeLocalPart("Amber.Otter.42+Run7")).toEqual({ base: "amber.otter.42", detail: "Run7" })
  })

  it("has no detail without a plus", () => {
    expect(normalizeLocalPart("AMBER.otter.42")).toEqual({ base: "amber.otter.42", detail: null })
  })

  it("splits at the first plus and keeps an empty detail for a trailing plus", () => {
    expect(normalizeLocalPart("amber+a+b")).toEqual({ base: "amber", detail: "a+b" })
    expect(normalizeLocalPart("amber+")).toEqual({ base: "amber", detail: "" })
  })
})
