/**
 * The authorization matrix of shared mailboxes (issue #31, point 7; spec 4.3-4.5, 5 rule 7):
 * every endpoint that takes an alias or a message id, asked by the owner, a viewer, a
 * collaborator, a former guest and a stranger. A former guest and a stranger (and a role the
 * endpoint is not for) get the same 404 as for a missing id; the owner's email, label and note
 * appear in no answer to anyone else, and no guest's email in any answer.
 */
import {
  claimAlias,
  deliver,
  expectNoneOf,
  fakeMailRequest,
  type Harness,
  injectMail,
  processed,
  type Session,
  shareMailbox,
  startHarness
} from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

type Role = "owner" | "viewer" | "collaborator" | "former" | "stranger"
const roles: ReadonlyArray<Role> = ["owner", "viewer", "collaborator", "former", "stranger"]
const readers: ReadonlyArray<Role> = ["owner", "viewer", "collaborator"]
const deleters: ReadonlyArray<Role> = ["owner", "collaborator"]
const ownerOnly: ReadonlyArray<Role> = ["owner"]

let h: Harness
const who = {} as Record<Role, Session>
let aliasId: number
let messageId: number
let attachmentId: number
const label = "matrix-label-0c3"
const note = "matrix-note-6b7"

beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 3105 })
  const sessions = await Promise.all(roles.map((role) => h.signup({ plan: role === "owner" ? "pro" : "free" })))
  roles.forEach((role, i) => (who[role] = sessions[i]!))
  aliasId = (await claimAlias(h, { session: who.owner })).id
  expect((await h.request(`/aliases/${aliasId}`, { method: "PATCH", session: who.owner, body: { label, note } })).status).toBe(200)
  await shareMailbox(h, { session: who.owner }, { session: who.viewer }, { aliasId, email: who.viewer.email, role: "viewer" })
  await shareMailbox(h, { session: who.owner }, { session: who.collaborator }, { aliasId, email: who.collaborator.email, role: "collaborator" })
  const formerShare = await shareMailbox(h, { session: who.owner }, { session: who.former }, { aliasId, email: who.former.email, role: "collaborator" })
  expect((await h.request(`/aliases/${aliasId}/shares/${formerShare}`, { method: "DELETE", session: who.owner })).status).toBe(204)
  // A 1x1 PNG, so that the attachment has a preview.
  const png = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==", "base64")
  const mail = fakeMailRequest({ code: "482913", html: true, attachments: [{ filename: "dot.png", contentType: "image/png", content: png }] })
  messageId = await injectMail(h, { session: who.owner }, aliasId, mail)
  const detail = await processed(h, { session: who.owner }, messageId)
  attachmentId = detail.attachments[0]!.id
})
afterAll(() => h.close())

const secretsFor = (role: Role) =>
  role === "owner" ? [who.viewer.email, who.collaborator.email, who.former.email] : [who.owner.email, label, note]

/** Asks every role; the allowed ones must answer `ok`, the others exactly what the stranger of a missing id gets. */
const matrix = async (
  allowed: ReadonlyArray<Role>,
  ok: number,
  ask: (session: Session, role: Role) => Promise<{ status: number; body: any; text: string }>,
  missing: () => Promise<{ status: number; body: any }>
) => {
  const notFound = await missing()
  expect(notFound.status).toBe(404)
  for (const role of roles) {
    const answer = await ask(who[role], role)
    expectNoneOf(answer, secretsFor(role))
    if (allowed.includes(role)) expect(answer.status, `${role}: ${answer.text}`).toBe(ok)
    else {
      expect(answer.status, `${role}: ${answer.text}`).toBe(404)
      expect(answer.body, role).toEqual(notFound.body)
    }
  }
}

const get = (path: string) => (session: Session) => h.request(path, { session })
const missingMessage = (suffix = "") => () => h.request(`/messages/999999${suffix}`, { session: who.stranger })
const missingAlias = (method: string, suffix = "", body?: unknown) => () =>
  h.request(`/aliases/999999${suffix}`, { method, session: who.stranger, ...(body === undefined ? {} : { body }) })

describe("endpoints that take a message id", () => {

  it("GET /messages/{id}, its html, raw bytes, attachment and preview: readers only", async () => {
    await matrix(readers, 200, get(`/messages/${messageId}`), missingMessage())
    await matrix(readers, 200, get(`/messages/${messageId}/html`), missingMessage("/html"))
    await matrix(readers, 200, get(`/messages/${messageId}/raw`), missingMessage("/raw"))
    await matrix(readers, 200, get(`/messages/${messageId}/attachments/${attachmentId}`), () =>
      h.request(`/messages/999999/attachments/${attachmentId}`, { session: who.stranger }))
    await matrix(readers, 200, get(`/messages/${messageId}/attachments/${attachmentId}/preview`), () =>
      h.request(`/messages/999999/attachments/${attachmentId}/preview`, { session: who.stranger }))
  })

  it("PATCH /messages/{id} and the remote-image preference: readers only, each its own", async () => {
    await matrix(readers, 200, (session) => h.request(`/messages/${messageId}`, { method: "PATCH", session, body: { starred: true } }), () =>
      h.request("/messages/999999", { method: "PATCH", session: who.stranger, body: { starred: true } }))
    await matrix(
      readers,
      200,
      (session) => h.request(`/messages/${messageId}/remote-images/preference`, { method: "PUT", session, body: { alwaysLoad: true } }),
      () => h.request("/messages/999999/remote-images/preference", { method: "PUT", session: who.stranger, body: { alwaysLoad: true } })
    )
    await matrix(
      readers,
      200,
      (session) => h.request("/messages/bulk", { method: "POST", session, body: { ids: [messageId], action: "mark_read" } }),
      () => h.request("/messages/bulk", { method: "POST", session: who.stranger, body: { ids: [999999], action: "mark_read" } })
    )
  })

  it("DELETE /messages/{id}, POST .../restore and bulk delete: the owner and a collaborator only", async () => {
    // A message of its own for each role, so one role's delete does not decide another's answer.
    const ids = await deliver(h, { session: who.owner }, aliasId, roles.length, { subject: "to delete" })
    const idOf = (role: Role) => ids[roles.indexOf(role)]!
    await matrix(deleters, 204, (session, role) => h.request(`/messages/${idOf(role)}`, { method: "DELETE", session }), () =>
      h.request("/messages/999999", { method: "DELETE", session: who.stranger }))
    await matrix(deleters, 204, (session, role) => h.request(`/messages/${idOf(role)}/restore`, { method: "POST", session }), () =>
      h.request("/messages/999999/restore", { method: "POST", session: who.stranger }))
    await matrix(
      deleters,
      200,
      (session, role) => h.request("/messages/bulk", { method: "POST", session, body: { ids: [idOf(role)], action: "delete" } }),
      () => h.request("/messages/bulk", { method: "POST", session: who.stranger, body: { ids: [999999], action: "delete" } })
    )
  })
})

describe("endpoints that take an alias id", () => {

  it("managing the alias is the owner's only: PATCH, pause, resume, timer, shares, share grants", async () => {
    const patch = { note }
    await matrix(ownerOnly, 200, (session) => h.request(`/aliases/${aliasId}`, { method: "PATCH", session, body: patch }), missingAlias("PATCH", "", patch))
    await matrix(ownerOnly, 200, (session) => h.request(`/aliases/${aliasId}/pause`, { method: "POST", session }), missingAlias("POST", "/pause"))
    await matrix(ownerOnly, 200, (session) => h.request(`/aliases/${aliasId}/resume`, { method: "POST", session }), missingAlias("POST", "/resume"))
    await matrix(ownerOnly, 200, (session) => h.request(`/aliases/${aliasId}/timer`, { method: "DELETE", session }), missingAlias("DELETE", "/timer"))
    await matrix(ownerOnly, 200, (session) => h.request(`/aliases/${aliasId}/shares`, { session }), missingAlias("GET", "/shares"))
    await matrix(ownerOnly, 200, (session) => h.request(`/aliases/${aliasId}/share-grants`, { session }), missingAlias("GET", "/share-grants"))
    await matrix(ownerOnly, 204, (session) => h.request(`/aliases/${aliasId}/share-grants/acknowledge`, { method: "POST", session }), missingAlias("POST", "/share-grants/acknowledge"))
  })

  it("emptying the alias's trash: the owner and a collaborator; test mail into it: the owner", async () => {
    await matrix(deleters, 200, (session) => h.request(`/messages/trash/empty?alias=${aliasId}`, { method: "POST", session }), () =>
      h.request("/messages/trash/empty?alias=999999", { method: "POST", session: who.stranger }))
    const mail = { aliasId, from: "a@example.com", subject: "x", text: "y" }
    // Test mail needs Pro; the guests here are free, so their refusal is the plan's, not the alias's: asked of the owner and a stranger only.
    const stranger = await h.request("/test/messages", { method: "POST", session: who.stranger, body: mail })
    expect([403, 404]).toContain(stranger.status)
    expect((await h.request("/test/messages", { method: "POST", session: who.owner, body: mail })).status).toBe(202)
  })

  it("the alias's mail in GET /messages?alias=: readers see it, a former guest and a stranger an empty page", async () => {
    for (const role of roles) {
      const answer = await h.request(`/messages?alias=${aliasId}`, { session: who[role] })
      expect(answer.status).toBe(200)
      expectNoneOf(answer, secretsFor(role))
      if (readers.includes(role)) expect(answer.body.total, role).toBeGreaterThan(0)
      else expect(answer.body, role).toEqual({ items: [], nextCursor: null, total: 0 })
    }
  })

  it("leaving: a guest's (204); the owner, a former guest and a stranger as for a missing alias", async () => {
    const missing = await h.request("/aliases/999999/share", { method: "DELETE", session: who.stranger })
    for (const role of ["owner", "former", "stranger"] as const) {
      expect((await h.request(`/aliases/${aliasId}/share`, { method: "DELETE", session: who[role] })).body, role).toEqual(missing.body)
    }
    expect((await h.request(`/aliases/${aliasId}/share`, { method: "DELETE", session: who.viewer })).status).toBe(204)
    // The viewer is now a former guest too.
    expect((await h.request(`/messages/${messageId}`, { session: who.viewer })).body).toEqual((await h.request("/messages/999999", { session: who.viewer })).body)
  })

  it("burning: the owner's only, and it ends every share", async () => {
    await matrix(ownerOnly, 200, (session) => h.request(`/aliases/${aliasId}/burn`, { method: "POST", session }), missingAlias("POST", "/burn"))
    expect((await h.request(`/messages/${messageId}`, { session: who.collaborator })).status).toBe(404)
  })
})
