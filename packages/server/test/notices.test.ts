import { Notice } from "@burnbox/domain"
import { expectShape, type Harness, startHarness } from "@burnbox/testkit"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
beforeAll(async () => {
  h = await startHarness()
})
afterAll(() => h.close())

describe("GET /notices", () => {
  it("shows the owner, newest first, what the service did on its own (a disabled webhook), and nothing of other accounts", async () => {
    const owner = await h.signup({ plan: "pro" })
    const other = await h.signup({ plan: "pro" })
    const insert = "INSERT INTO account_notices (account_id, kind, data, created_at) VALUES ($1, $2, $3, $4)"
    await h.query(insert, [owner.accountId, "webhook.disabled", { webhookId: 7, name: "ci" }, new Date("2026-11-20T10:00:00Z")])
    await h.query(insert, [owner.accountId, "webhook.disabled", { webhookId: 8, name: "prod" }, new Date("2026-11-21T10:00:00Z")])
    await h.query(insert, [other.accountId, "webhook.disabled", { webhookId: 9 }, new Date("2026-11-21T11:00:00Z")])
    const token = await h.createToken(owner, ["read"])
    const answer = await h.request("/notices", { token })
    expect(answer.status).toBe(200)
    const { items } = expectShape(Schema.Struct({ items: Schema.Array(Notice) }), answer.body)
    expect(items.map((n) => [n.kind, n.data["webhookId"], n.createdAt])).toEqual([
      ["webhook.disabled", 8, "2026-11-21T10:00:00.000Z"],
      ["webhook.disabled", 7, "2026-11-20T10:00:00.000Z"]
    ])
  })
})
