/**
 * The plan fields are listed once (PlanLimits, PlanEntitlements) and everything else is derived
 * from them; the pure rules the services apply are decided here, without I/O.
 */
import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import {
  DefaultPlans,
  isValidPassword,
  OverridableKeys,
  parseOverrides,
  PlanEntitlements,
  HandlePattern,
  makeHandle,
  planIncludes,
  PlanLimits,
  requestedTransition,
  ResolvedPlan,
  stateFieldsRefused,
  TestMessageLimits,
  toPlanLimits
} from "../src/index.ts"
import { checkTestMessageBody } from "../src/mail/index.ts"

describe("plan fields, listed once", () => {
  it("every entitlement but the plan's code and name is overridable, with the kind of its schema", () => {
    const expected = Object.fromEntries(
      Object.entries(DefaultPlans.pro).filter(([key]) => key !== "code" && key !== "name")
        .map(([key, value]) => [key, typeof value === "boolean" ? "boolean" : "int"])
    )
    expect(OverridableKeys).toEqual(expected)
    expect(Object.keys(OverridableKeys)).toEqual(Object.keys(PlanEntitlements.fields).filter((k) => k !== "code" && k !== "name"))
  })

  it("each overridable key is one `admin account override --set` takes", () => {
    for (const [key, kind] of Object.entries(OverridableKeys)) {
      const parsed = parseOverrides(`${key}=${kind === "boolean" ? "true" : "7"}`)
      expect(parsed).toEqual({ ok: true, overrides: { [key]: kind === "boolean" ? true : 7 } })
    }
    expect(parseOverrides("code=pro")).toEqual({ ok: false, error: `unknown key "code"` })
    expect(parseOverrides("bulkExport=7")).toEqual({ ok: false, error: "bulkExport takes true or false" })
  })

  it("toPlanLimits answers exactly PlanLimits' fields, in their order, and nothing of the plan row beyond them", () => {
    const limits = toPlanLimits(DefaultPlans.premium)
    expect(Object.keys(limits)).toEqual(Object.keys(PlanLimits.fields))
    expect(Schema.decodeUnknownSync(PlanLimits)(limits)).toEqual(limits)
    expect(limits).not.toHaveProperty("trashRetentionDays")
    expect(limits).not.toHaveProperty("requestsPerMinute")
  })

  it("a stored plan row and its account's overrides decode to the resolved entitlements; overrides of the wrong kind are ignored", () => {
    const resolved = Schema.decodeUnknownSync(ResolvedPlan)({
      entitlements: DefaultPlans.free,
      overrides: { activeAliasCap: 9, bulkExport: "yes", storageQuotaBytes: -1, unknownKey: 3, developerAccess: true }
    })
    expect(resolved).toEqual({ ...DefaultPlans.free, activeAliasCap: 9, developerAccess: true })
  })
})

describe("planIncludes", () => {
  it("a boolean feature is the plan's own flag; test mail is a plan with test messages per day", () => {
    expect(planIncludes(DefaultPlans.free, "developerAccess")).toBe(false)
    expect(planIncludes(DefaultPlans.pro, "developerAccess")).toBe(true)
    expect(planIncludes(DefaultPlans.premium, "selfDestructTimers")).toBe(true)
    expect(planIncludes(DefaultPlans.premium, "bulkExport")).toBe(false)
    expect(planIncludes(DefaultPlans.premium, "testMail")).toBe(false)
    expect(planIncludes(DefaultPlans.pro, "testMail")).toBe(true)
    expect(planIncludes({ ...DefaultPlans.pro, testMessagesPerDay: 0 }, "testMail")).toBe(false)
  })

  it("sharing is a paid plan's: premium and pro, not free", () => {
    expect(planIncludes(DefaultPlans.free, "sharing")).toBe(false)
    expect(planIncludes(DefaultPlans.premium, "sharing")).toBe(true)
    expect(planIncludes(DefaultPlans.pro, "sharing")).toBe(true)
  })
})

describe("handles", () => {
  it("are word-word-NNNN, the number padded to four digits", () => {
    expect(makeHandle("amber", "otter", 7)).toBe("amber-otter-0007")
    expect(makeHandle("amber", "otter", 12_345)).toBe("amber-otter-2345")
    expect(HandlePattern.test(makeHandle("amber", "otter", 42))).toBe(true)
    expect(HandlePattern.test("Amber-otter-0042")).toBe(false)
  })
})

describe("the pure rules of requests", () => {
  it("a PATCH's action and status name one transition, none, or a conflict", () => {
    expect(requestedTransition({})).toBeUndefined()
    expect(requestedTransition({ action: "pause" })).toBe("pause")
    expect(requestedTransition({ status: "burned" })).toBe("burn")
    expect(requestedTransition({ status: "active" })).toBe("resume")
    expect(requestedTransition({ action: "pause", status: "paused" })).toBe("pause")
    expect(requestedTransition({ action: "pause", status: "active" })).toBe("conflict")
  })

  it("a bearer changes only isRead on a message; a session changes every field", () => {
    expect(stateFieldsRefused("bearer", { isRead: true })).toEqual([])
    expect(stateFieldsRefused("bearer", { isRead: true, starred: true, tagIds: [1] })).toEqual(["starred", "tagIds"])
    expect(stateFieldsRefused("session", { starred: true, pinned: false, tagIds: [] })).toEqual([])
  })

  it("the password rule is 8 to 256 characters", () => {
    expect(isValidPassword("1234567")).toBe(false)
    expect(isValidPassword("12345678")).toBe(true)
    expect(isValidPassword("x".repeat(256))).toBe(true)
    expect(isValidPassword("x".repeat(257))).toBe(false)
  })

  it("a raw test message needs the query's alias and 1 byte to 15 MiB; a JSON one the rules of its fields", () => {
    const bytes = new TextEncoder().encode("Subject: hi\r\n\r\nhello")
    expect(checkTestMessageBody({ kind: "raw", bytes, aliasId: 4 })).toEqual({ aliasId: 4 })
    expect(checkTestMessageBody({ kind: "raw", bytes, aliasId: undefined })).toEqual({ refused: { aliasId: "required" } })
    expect(checkTestMessageBody({ kind: "raw", bytes: new Uint8Array(0), aliasId: 4 })).toEqual({ refused: { body: "empty" } })
    expect(checkTestMessageBody({ kind: "raw", bytes: new Uint8Array(TestMessageLimits.rawBytes + 1), aliasId: 4 }))
      .toEqual({ refused: { body: "too_large" } })
    const request = { aliasId: 5, from: "Shop <shop@example.com>", subject: "Your code" }
    expect(checkTestMessageBody({ kind: "json", request: { ...request, text: "482913" } })).toEqual({ aliasId: 5 })
    expect(checkTestMessageBody({ kind: "json", request })).toEqual({ refused: { text: "text_or_html_required" } })
  })
})
