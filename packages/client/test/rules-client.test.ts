/**
 * The rules resource of @burnbox/client against a real service (the harness), both faces: a
 * rule written, listed, changed and deleted; the server's refusals arrive as BurnboxProblems.
 */
import { BurnboxClient, BurnboxProblem, createClient, rulesClient, rulesOf } from "@burnbox/client"
import { type Harness, startHarness } from "@burnbox/testkit"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
let token: string
beforeAll(async () => {
  h = await startHarness()
  const session = await h.signup({ plan: "pro" })
  token = await h.createToken(session, ["read", "manage-aliases"])
  // A cap of 3 rules, so that the test reaches it.
  await h.query(`UPDATE accounts SET overrides = '{"mailRuleCount": 3}' WHERE id = $1`, [session.accountId])
})
afterAll(() => h?.close())

describe("rules", () => {
  it("the Promise face writes, lists, changes and deletes a rule; 422 and 409 are BurnboxProblems", async () => {
    const rules = rulesClient(createClient({ baseUrl: h.baseUrl, token }))
    const rule = await rules.create({ name: "Receipts", match: { subject: "receipt" }, actions: [{ type: "mark_read" }, { type: "archive" }] })
    expect(rule).toMatchObject({ name: "Receipts", enabled: true, position: 0, aliasId: null, stop: false })
    expect(await rules.list()).toMatchObject({ items: [{ id: rule.id }], limit: 3 })
    expect(await rules.update(rule.id, { enabled: false, stop: true })).toMatchObject({ id: rule.id, enabled: false, stop: true })

    // What the contract's schema refuses is refused before sending; what only the server knows is its 422.
    const invalid = await rules.create({ name: "x", aliasId: 999_999, actions: [{ type: "tag", tagId: 999_999 }] }).then(() => undefined, (e: unknown) => e)
    expect(invalid).toBeInstanceOf(BurnboxProblem)
    expect(invalid).toMatchObject({ status: 422, code: "validation_failed", fields: { aliasId: "unknown_alias", actions: "unknown_tag" } })

    for (let i = 1; i < 3; i++) await rules.create({ name: `rule ${i}`, actions: [{ type: "star" }] })
    const over = await rules.create({ name: "eleventh", actions: [{ type: "star" }] }).then(() => undefined, (e: unknown) => e)
    expect(over).toMatchObject({ status: 409, code: "rule_limit_reached" })

    await rules.delete(rule.id)
    expect((await rules.list()).items.map((r) => r.id)).not.toContain(rule.id)
    expect(await rules.delete(rule.id).then(() => undefined, (e: unknown) => e)).toMatchObject({ status: 404, code: "not_found" })
  })

  it("the Effect face lists through a BurnboxClient", async () => {
    const list = await Effect.runPromise(
      Effect.gen(function*() {
        return yield* rulesOf(yield* BurnboxClient).list()
      }).pipe(Effect.provide(BurnboxClient.layer({ baseUrl: h.baseUrl, token })))
    )
    expect(list.limit).toBe(3)
  })
})
