import { describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import {
  InvalidSearchDate,
  isCalendarDate,
  isEmptySearchQuery,
  parseSearchQuery,
  type SearchQuery,
  type SearchQueryError,
  SearchQueryTooLong,
  SearchQueryTooManyTerms
} from "../src/search/index.ts"

const empty: SearchQuery = { terms: [], from: [], to: [], subject: [], tags: [] }

function parsed(q: string): SearchQuery {
  const result = parseSearchQuery(q)
  if (Result.isFailure(result)) throw new Error(`expected ${q} to parse, got ${result.failure._tag}`)
  return result.success
}

function failure(q: string): SearchQueryError {
  const result = parseSearchQuery(q)
  if (Result.isSuccess(result)) throw new Error(`expected ${q} to fail, got ${JSON.stringify(result.success)}`)
  return result.failure
}

const text = (value: string, negated = false) => ({ kind: "text", value, negated })
const phrase = (value: string, negated = false) => ({ kind: "phrase", value, negated })

describe("free text", () => {
  it("splits on any whitespace; every term must match", () => {
    expect(parsed("  invoice\tacme\nmarch ")).toEqual({
      ...empty,
      terms: [text("invoice"), text("acme"), text("march")]
    })
  })

  it("blank and sign-only input sets no condition", () => {
    expect(parsed("")).toEqual(empty)
    expect(parsed("   - \"\" -\"\"")).toEqual(empty)
    expect(isEmptySearchQuery(parsed("  "))).toBe(true)
    expect(isEmptySearchQuery(parsed("a"))).toBe(false)
    expect(isEmptySearchQuery(parsed("is:pinned"))).toBe(false)
  })

  it("keeps the case as typed", () => {
    expect(parsed("ACME").terms).toEqual([text("ACME")])
  })

  it("-term excludes a word", () => {
    expect(parsed("invoice -spam").terms).toEqual([text("invoice"), text("spam", true)])
  })

  it("a dash inside a word is not a negation", () => {
    expect(parsed("e-mail").terms).toEqual([text("e-mail")])
  })
})

describe("quoting", () => {
  it("a quoted phrase is one term, whitespace included", () => {
    expect(parsed("\"order  shipped\" now").terms).toEqual([phrase("order  shipped"), text("now")])
  })

  it("-\"phrase\" excludes the phrase", () => {
    expect(parsed("-\"weekly digest\"").terms).toEqual([phrase("weekly digest", true)])
  })

  it("an unterminated quote takes the rest of the input as the phrase", () => {
    expect(parsed("code \"your verification code is").terms)
      .toEqual([text("code"), phrase("your verification code is")])
    expect(parsed("subject:\"half typed").subject).toEqual([phrase("half typed")])
  })

  it("a quote inside a word starts a new term", () => {
    expect(parsed("ab\"cd ef\"gh").terms).toEqual([text("ab"), phrase("cd ef"), text("gh")])
  })

  it("filter words inside a phrase are plain text", () => {
    expect(parsed("\"from:alice is:unread\"")).toEqual({ ...empty, terms: [phrase("from:alice is:unread")] })
  })
})

describe("field filters", () => {
  it("from:, to: and subject: collect their values", () => {
    expect(parsed("from:alice@example.com to:amber.otter.42+run7 subject:invoice")).toEqual({
      ...empty,
      from: [text("alice@example.com")],
      to: [text("amber.otter.42+run7")],
      subject: [text("invoice")]
    })
  })

  it("a field value may be quoted", () => {
    expect(parsed("subject:\"two words\" from:\"Alice Example\"")).toEqual({
      ...empty,
      subject: [phrase("two words")],
      from: [phrase("Alice Example")]
    })
  })

  it("-field:value excludes, quoted or not", () => {
    expect(parsed("-from:noreply -subject:\"daily report\" -to:x")).toEqual({
      ...empty,
      from: [text("noreply", true)],
      subject: [phrase("daily report", true)],
      to: [text("x", true)]
    })
  })

  it("field names are case-insensitive, and a value may contain a colon", () => {
    expect(parsed("FROM:bob Subject:re:hello")).toEqual({
      ...empty,
      from: [text("bob")],
      subject: [text("re:hello")]
    })
  })

  it("repeated filters all apply", () => {
    expect(parsed("from:a from:b").from).toEqual([text("a"), text("b")])
  })

  it("a known filter with nothing after the colon adds no condition", () => {
    expect(parsed("from: subject:\"\" tag: before: invoice")).toEqual({ ...empty, terms: [text("invoice")] })
  })

  it("tag:name, and -tag:name for mail without that tag", () => {
    expect(parsed("tag:work -tag:\"to do\"").tags).toEqual([
      { value: "work", negated: false },
      { value: "to do", negated: true }
    ])
  })
})

describe("flags", () => {
  it("has:attachment, is:unread, is:starred, is:pinned set true", () => {
    expect(parsed("has:attachment is:unread is:starred is:pinned")).toEqual({
      ...empty,
      hasAttachment: true,
      isUnread: true,
      isStarred: true,
      isPinned: true
    })
  })

  it("negation gives false", () => {
    expect(parsed("-has:attachment -is:unread -is:starred -is:pinned")).toEqual({
      ...empty,
      hasAttachment: false,
      isUnread: false,
      isStarred: false,
      isPinned: false
    })
  })

  it("values are case-insensitive", () => {
    expect(parsed("HAS:Attachment IS:UNREAD")).toMatchObject({ hasAttachment: true, isUnread: true })
  })

  it("a contradicted flag takes the last one written", () => {
    expect(parsed("is:unread -is:unread").isUnread).toBe(false)
    expect(parsed("-is:unread is:unread").isUnread).toBe(true)
  })

  it("unknown has: and is: values are searched as text", () => {
    expect(parsed("has:link is:archived -is:spam")).toEqual({
      ...empty,
      terms: [text("has:link"), text("is:archived"), text("is:spam", true)]
    })
  })
})

describe("dates", () => {
  it("before: and after: take a YYYY-MM-DD day", () => {
    expect(parsed("after:2024-03-01 before:2024-04-01")).toEqual({
      ...empty,
      after: "2024-03-01",
      before: "2024-04-01"
    })
  })

  it("negating one bound gives the other on the same day", () => {
    expect(parsed("-before:2024-03-01")).toEqual({ ...empty, after: "2024-03-01" })
    expect(parsed("-after:2024-03-01")).toEqual({ ...empty, before: "2024-03-01" })
  })

  it("repeated bounds keep the narrowest", () => {
    expect(parsed("before:2024-05-01 before:2024-04-01 before:2024-06-01").before).toBe("2024-04-01")
    expect(parsed("after:2024-02-01 after:2024-03-01 after:2024-01-01").after).toBe("2024-03-01")
  })

  it("a day that does not exist or is not YYYY-MM-DD fails with the offending term", () => {
    for (const term of ["before:2024-02-30", "after:2023-02-29", "before:2024-13-01", "after:2024-1-5",
      "before:yesterday", "-after:0000-01-01", "before:\"2024-01-01 \"", "after:2024-01-01T00:00"]) {
      const error = failure(`invoice ${term} from:x`)
      expect(error, term).toBeInstanceOf(InvalidSearchDate)
      expect(error, term).toMatchObject({ _tag: "InvalidSearchDate", term })
    }
  })

  it("a leap day parses", () => {
    expect(parsed("after:2024-02-29").after).toBe("2024-02-29")
    expect(isCalendarDate("2000-02-29")).toBe(true)
    expect(isCalendarDate("1900-02-29")).toBe(false)
    expect(isCalendarDate("0099-12-31")).toBe(true)
  })
})

describe("unknown prefixes", () => {
  it("the whole field:value token is searched as plain text", () => {
    expect(parsed("cc:bob http://example.com/x label:\"a b\"")).toEqual({
      ...empty,
      terms: [text("cc:bob"), text("http://example.com/x"), phrase("label:a b")]
    })
  })

  it("a negated unknown prefix excludes the text", () => {
    expect(parsed("-cc:bob").terms).toEqual([text("cc:bob", true)])
  })

  it("object property names are not mistaken for fields", () => {
    expect(parsed("constructor:x __proto__:y is:toString").terms)
      .toEqual([text("constructor:x"), text("__proto__:y"), text("is:toString")])
  })
})

describe("limits", () => {
  it("accepts 512 characters and refuses 513", () => {
    expect(parsed("a".repeat(512)).terms).toEqual([text("a".repeat(512))])
    const error = failure("a".repeat(513))
    expect(error).toBeInstanceOf(SearchQueryTooLong)
    expect(error).toMatchObject({ length: 513, maxLength: 512 })
  })

  it("accepts 32 terms and refuses 33, filters included", () => {
    const terms = (count: number) => Array.from({ length: count }, (_, index) => `from:w${index}`).join(" ")
    expect(parsed(terms(32)).from).toHaveLength(32)
    const error = failure(terms(33))
    expect(error).toBeInstanceOf(SearchQueryTooManyTerms)
    expect(error).toMatchObject({ count: 33, maxTerms: 32 })
  })

  it("a long phrase counts as one term", () => {
    const words = Array.from({ length: 40 }, (_, index) => `w${index}`).join(" ")
    expect(parsed(`"${words}"`).terms).toEqual([phrase(words)])
  })

  it("errors carry a readable message", () => {
    expect(failure("a".repeat(600)).message).toMatch(/600 characters/)
    expect(failure("before:2024-02-30").message).toMatch(/before:2024-02-30/)
  })
})

describe("everything together", () => {
  it("parses a mixed query into one value", () => {
    expect(parsed("invoice -draft \"order shipped\" from:shop -to:old@x.test subject:\"your receipt\" " +
      "has:attachment -is:unread is:starred tag:receipts after:2024-01-01 -after:2024-07-01 size:big")).toEqual({
        terms: [text("invoice"), text("draft", true), phrase("order shipped"), text("size:big")],
        from: [text("shop")],
        to: [text("old@x.test", true)],
        subject: [phrase("your receipt")],
        tags: [{ value: "receipts", negated: false }],
        hasAttachment: true,
        isUnread: false,
        isStarred: true,
        after: "2024-01-01",
        before: "2024-07-01"
      })
  })
})
