import { readFileSync } from "node:fs"

// Dictionary words are plain lowercase ASCII so a `words` alias can be read aloud and typed.
const wordPattern = /^[a-z]{3,8}$/

/**
 * Splits a word list (one word a line) and checks every word, so a bad edit to the data file
 * fails at import instead of producing odd addresses later.
 */
export function parseWordList(text: string): ReadonlyArray<string> {
  const words = text.split("\n").map((line) => line.trim()).filter((line) => line.length > 0)
  const invalid = words.find((word) => !wordPattern.test(word))
  if (invalid !== undefined) {
    throw new Error(`word list: "${invalid}" is not 3..8 lowercase ASCII letters`)
  }
  if (new Set(words).size !== words.length) {
    throw new Error("word list: duplicate words")
  }
  return words
}

/** The words for `words`-style aliases; source and licence in data/WORDS-LICENSE.md. */
export const aliasWords: ReadonlyArray<string> = parseWordList(
  readFileSync(new URL("../../data/words.txt", import.meta.url), "utf8")
)
