import { Tag, TagWithCount } from "@burnbox/domain"
import { expectProblem, expectShape, type Harness, startHarness } from "@burnbox/testkit"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
beforeAll(async () => {
  h = await startHarness()
})
afterAll(() => h.close())

describe("tags", () => {
  it("creates a tag with the colour stored and answered as uppercase hex", async () => {
    const session = await h.signup()
    const answer = await h.request("/tags", { method: "POST", session, body: { name: "Receipts", color: "#a1b2c3" } })
    expect(answer.status).toBe(201)
    expect(expectShape(Tag, answer.body)).toEqual({ id: answer.body.id, name: "Receipts", color: "#A1B2C3" })
    const [row] = await h.query("SELECT color FROM tags WHERE id = $1", [answer.body.id])
    expect(row.color).toBe("#A1B2C3")
  })

  it("refuses a duplicate name in the account, compared case-insensitively (Unicode too), with 409", async () => {
    const session = await h.signup()
    await h.request("/tags", { method: "POST", session, body: { name: "Ärger" } })
    expectProblem(await h.request("/tags", { method: "POST", session, body: { name: "äRGER" } }), 409, "tag_name_taken")
    const other = await h.signup()
    expect((await h.request("/tags", { method: "POST", session: other, body: { name: "ärger" } })).status).toBe(201)
  })

  it("lists TagWithCount items over a bearer token with the read scope", async () => {
    const session = await h.signup({ plan: "pro" })
    await h.request("/tags", { method: "POST", session, body: { name: "b" } })
    await h.request("/tags", { method: "POST", session, body: { name: "A", color: null } })
    const token = await h.createToken(session, ["read"])
    const list = expectShape(Schema.Struct({ items: Schema.Array(TagWithCount) }), (await h.request("/tags", { token })).body)
    expect(list.items.map((t) => [t.name, t.messageCount])).toEqual([["A", 0], ["b", 0]])
  })

  it("PATCH renames, recolours and clears the colour; a rename onto another tag's name is 409", async () => {
    const session = await h.signup()
    const a = (await h.request("/tags", { method: "POST", session, body: { name: "one", color: "#000000" } })).body
    await h.request("/tags", { method: "POST", session, body: { name: "two" } })
    expect((await h.request(`/tags/${a.id}`, { method: "PATCH", session, body: { name: "uno" } })).body).toEqual({ id: a.id, name: "uno", color: "#000000" })
    expect((await h.request(`/tags/${a.id}`, { method: "PATCH", session, body: { color: "#ffffff" } })).body).toEqual({ id: a.id, name: "uno", color: "#FFFFFF" })
    expect((await h.request(`/tags/${a.id}`, { method: "PATCH", session, body: { color: null } })).body).toEqual({ id: a.id, name: "uno", color: null })
    expectProblem(await h.request(`/tags/${a.id}`, { method: "PATCH", session, body: { name: "TWO" } }), 409, "tag_name_taken")
    expect((await h.request(`/tags/${a.id}`, { method: "PATCH", session, body: { name: "UNO" } })).status).toBe(200)
  })

  it("DELETE removes the tag (204) and a second DELETE is 404", async () => {
    const session = await h.signup()
    const tag = (await h.request("/tags", { method: "POST", session, body: { name: "gone" } })).body
    expect((await h.request(`/tags/${tag.id}`, { method: "DELETE", session })).status).toBe(204)
    expectProblem(await h.request(`/tags/${tag.id}`, { method: "DELETE", session }), 404, "not_found")
    expectProblem(await h.request(`/tags/${tag.id}`, { method: "PATCH", session, body: { name: "x" } }), 404, "not_found")
  })

  it("answers every field rule with 422 naming the field", async () => {
    const session = await h.signup()
    const cases: Array<[string, string, unknown, Record<string, string>]> = [
      ["POST", "/tags", { name: "" }, { name: "too_short" }],
      ["POST", "/tags", { name: "x".repeat(65) }, { name: "too_long" }],
      ["POST", "/tags", { color: "#123456" }, { name: "required" }],
      ["POST", "/tags", { name: "x", color: "red" }, { color: "invalid_color" }],
      ["POST", "/tags", { name: "x", color: "#12345" }, { color: "invalid_color" }],
      ["POST", "/tags", { name: 7 }, { name: "invalid_type" }],
      ["POST", "/tags", { name: "x", icon: "star" }, { icon: "unknown_field" }],
      ["PATCH", "/tags/1", { name: "" }, { name: "too_short" }],
      ["PATCH", "/tags/0", { name: "x" }, { id: "too_small" }]
    ]
    for (const [method, path, body, fields] of cases) {
      const answer = await h.request(path, { method, session, body })
      expectProblem(answer, 422, "validation_failed")
      expect(answer.body.error.fields, JSON.stringify(body)).toEqual(fields)
    }
  })

  it("answers text the database cannot hold (a NUL) with 422, and writes nothing", async () => {
    const session = await h.signup()
    const tag = (await h.request("/tags", { method: "POST", session, body: { name: "kept" } })).body
    for (const [method, path] of [["POST", "/tags"], ["PATCH", `/tags/${tag.id}`]] as const) {
      const answer = await h.request(path, { method, session, body: { name: "a\u0000b" } })
      expectProblem(answer, 422, "validation_failed")
      expect(answer.body.error.fields, `${method} ${path}`).toEqual({ body: "invalid_text" })
    }
    expect((await h.request("/tags", { session })).body.items.map((t: { name: string }) => t.name)).toEqual(["kept"])
  })
})
