/**
 * Mailbox exports (spec 2.18, 3.4, 4.7, 8; issue #33): Pro only; queued (202, camelCase aliasId,
 * Location), listed and read in snake_case with database timestamp text; built by the worker's job
 * into a ZIP of every retained raw .eml (byte for byte, trashed mail left out) with manifest.json;
 * downloadable with ranges for 24 hours, then expired by the sweep with its bytes deleted; a
 * downgrade holds the exports API and its archives, an upgrade gives them back; a build stopped
 * or whose worker died is built again; a guest exports a shared mailbox it reads by its id.
 */
import { createHash } from "node:crypto"
import { ExportDetail, ExportListItem, ExportManifest, QueuedExport } from "@burnbox/domain"
import { type Caller, claimAlias, deliver, expectProblem, expectShape, type Harness, readZip, type Session, shareMailbox, startHarness } from "@burnbox/testkit"
import { Schema } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
beforeAll(async () => {
  h = await startHarness({}, undefined, { seed: 3301 })
})
afterAll(() => h.close())

const DatabaseText = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\+00$/
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

interface Pro {
  readonly session: Session
  readonly token: string
  readonly who: Caller
}

const pro = async (): Promise<Pro> => {
  const session = await h.signup({ plan: "pro" })
  const token = await h.createToken(session, ["read", "manage-aliases", "delete", "test"])
  return { session, token, who: { token } }
}

/** The download as bytes (the harness's `request` reads text). */
const download = async (token: string, id: number, headers: Record<string, string> = {}) => {
  const response = await fetch(`${h.baseUrl}/exports/${id}/download`, { headers: { authorization: `Bearer ${token}`, ...headers } })
  return { status: response.status, headers: response.headers, bytes: new Uint8Array(await response.arrayBuffer()) }
}

const raw = async (token: string, id: number) => {
  const response = await fetch(`${h.baseUrl}/messages/${id}/raw`, { headers: { authorization: `Bearer ${token}` } })
  expect(response.status).toBe(200)
  return new Uint8Array(await response.arrayBuffer())
}

const queue = async (who: Caller, body?: unknown) => {
  const answer = await h.request("/exports", { method: "POST", ...who, ...(body === undefined ? {} : { body }) })
  expect(answer.status, answer.text).toBe(202)
  return expectShape(QueuedExport, answer.body)
}

const exportDetail = async (who: Caller, id: number) => {
  const answer = await h.request(`/exports/${id}`, { ...who })
  expect(answer.status, answer.text).toBe(200)
  return { detail: expectShape(ExportDetail, answer.body), progress: answer.headers.get("export-progress") }
}

/** Builds what is due and answers the export, ready. */
const built = async (who: Caller, id: number) => {
  await h.worker.buildExports()
  const { detail } = await exportDetail(who, id)
  expect(detail.status, detail.error ?? "").toBe("ready")
  return detail
}

const decodeManifest = Schema.decodeUnknownSync(ExportManifest)
const zipOf = async (token: string, id: number) => {
  const answer = await download(token, id)
  expect(answer.status).toBe(200)
  const entries = await readZip(answer.bytes)
  return { answer, entries, manifest: decodeManifest(JSON.parse(entries.get("manifest.json")!.toString("utf8"))) }
}

describe("the plan: exports are Pro only", () => {
  it("answers 403 plan_required to free and premium accounts on every export endpoint", async () => {
    for (const plan of ["free", "premium"] as const) {
      const session = await h.signup({ plan })
      for (const [path, method] of [["/exports", "GET"], ["/exports", "POST"], ["/exports/1", "GET"], ["/exports/1/download", "GET"]] as const) {
        const answer = await h.request(path, { method, session, ...(method === "POST" ? { body: {} } : {}) })
        expectProblem(answer, 403, "plan_required")
      }
    }
  })
})

describe("an export of the whole mailbox", () => {
  let owner: Pro
  let kept: Array<number>
  let trashed: number
  let other: Array<number>
  let queued: typeof QueuedExport.Type

  beforeAll(async () => {
    owner = await pro()
    const first = await claimAlias(h, owner.who)
    const second = await claimAlias(h, owner.who)
    const a = await deliver(h, owner.who, first.id, 3, { text: "Your code is 123456\r\nügen — unicode stays as sent" })
    const b = await deliver(h, owner.who, second.id, 2)
    trashed = a[2]!
    const removed = await h.request(`/messages/${trashed}`, { method: "DELETE", token: owner.token })
    expect(removed.status, removed.text).toBe(204)
    kept = [a[0]!, a[1]!, ...b]
    // Someone else's mail is never in it.
    const stranger = await pro()
    other = await deliver(h, stranger.who, (await claimAlias(h, stranger.who)).id, 1)
    queued = await queue(owner.who)
  })

  it("queues with 202, the queue form (camelCase aliasId) and a Location header; an empty body is the whole mailbox", async () => {
    expect(queued).toMatchObject({ purpose: "mailbox", status: "pending", aliasId: null, alias: null, error: null, ready_at: null, expires_at: null })
    expect(queued.created_at).toMatch(DatabaseText)
    expect(Object.keys(queued).sort()).toEqual(["alias", "aliasId", "created_at", "error", "expires_at", "id", "purpose", "ready_at", "status"])
    const again = await h.request("/exports", { method: "POST", token: owner.token, rawBody: "", headers: { "content-type": "application/json" } })
    // One at a time: a second request while this one waits is a conflict.
    expectProblem(again, 409, "export_in_progress")
  })

  it("lists and reads it in snake_case with no download URL until it is ready, and shows progress", async () => {
    const list = await h.request("/exports", { token: owner.token })
    expect(list.status).toBe(200)
    const items = Schema.decodeUnknownSync(Schema.Struct({ items: Schema.Array(ExportListItem) }), { onExcessProperty: "error" })(list.body).items
    expect(items.map((e) => e.id)).toEqual([queued.id])
    expect(Object.keys(list.body.items[0]).sort()).toEqual(["alias", "alias_id", "created_at", "error", "expires_at", "id", "purpose", "ready_at", "status"])
    const { detail, progress } = await exportDetail(owner.who, queued.id)
    expect(detail).toMatchObject({ status: "pending", alias_id: null, downloadUrl: null })
    expect(progress).toBe("0/?")
  })

  it("builds a ZIP of every retained .eml, byte for byte as GET /messages/{id}/raw, with the manifest's hashes; trashed and others' mail left out", async () => {
    const detail = await built(owner.who, queued.id)
    expect(detail.downloadUrl).toBe(`${h.baseUrl}/exports/${queued.id}/download`)
    expect(detail.ready_at).toMatch(DatabaseText)
    expect(Date.parse(detail.expires_at!.replace(" ", "T").replace("+00", "Z")) - Date.parse(detail.ready_at!.replace(" ", "T").replace("+00", "Z"))).toBe(24 * 3600 * 1000)
    expect((await exportDetail(owner.who, queued.id)).progress).toBe(`${kept.length}/${kept.length}`)

    const { answer, entries, manifest } = await zipOf(owner.token, queued.id)
    expect(answer.headers.get("content-type")).toBe("application/zip")
    expect(Number(answer.headers.get("content-length"))).toBe(answer.bytes.byteLength)
    expect(answer.headers.get("content-disposition")).toMatch(/^attachment; filename="burnbox-export-\d+-\d{4}-\d{2}-\d{2}\.zip"$/)
    expect(answer.headers.get("accept-ranges")).toBe("bytes")

    expect(manifest.messages.map((m) => m.id)).toEqual(kept)
    expect(manifest.counts.messages).toBe(kept.length)
    expect([...entries.keys()].sort()).toEqual([...kept.map((id) => `messages/${id}.eml`), "manifest.json"].sort())
    for (const message of manifest.messages) {
      const eml = entries.get(message.file)!
      expect(Buffer.compare(eml, await raw(owner.token, message.id))).toBe(0)
      expect(message.sha256).toBe(sha256(eml))
      expect(message.size).toBe(eml.byteLength)
      expect(message.from).toBe("sender@example.com")
    }
    expect(manifest.counts.bytes).toBe(manifest.messages.reduce((n, m) => n + m.size, 0))
    expect(manifest.messages.map((m) => m.id)).not.toContain(trashed)
    for (const id of other) expect(entries.has(`messages/${id}.eml`)).toBe(false)
  })

  it("serves byte ranges (206 with Content-Range), so a broken download resumes; a range past the end is 416", async () => {
    const whole = (await download(owner.token, queued.id)).bytes
    const size = whole.byteLength
    const part = await download(owner.token, queued.id, { range: "bytes=100-" })
    expect(part.status).toBe(206)
    expect(part.headers.get("content-range")).toBe(`bytes 100-${size - 1}/${size}`)
    expect(Number(part.headers.get("content-length"))).toBe(size - 100)
    expect(Buffer.compare(Buffer.from(part.bytes), Buffer.from(whole.subarray(100)))).toBe(0)
    const head = await download(owner.token, queued.id, { range: "bytes=0-99" })
    const tail = await download(owner.token, queued.id, { range: "bytes=-50" })
    expect([head.status, tail.status]).toEqual([206, 206])
    expect(Buffer.compare(Buffer.concat([head.bytes, whole.subarray(100, size - 50), tail.bytes]), Buffer.from(whole))).toBe(0)
    expect((await download(owner.token, queued.id, { range: `bytes=${size}-` })).status).toBe(416)
  })

  it("answers 404 for another account's export, and allows the next export once this one is done", async () => {
    const stranger = await pro()
    expectProblem(await h.request(`/exports/${queued.id}`, { token: stranger.token }), 404, "not_found")
    expect((await download(stranger.token, queued.id)).status).toBe(404)
    const next = await queue(owner.who, {})
    await built(owner.who, next.id)
  })
})

describe("an export of one mailbox", () => {
  it("holds only that alias's mail, names it, and refuses an alias the caller does not own with 404", async () => {
    const owner = await pro()
    const one = await claimAlias(h, owner.who)
    const two = await claimAlias(h, owner.who)
    const ids = await deliver(h, owner.who, one.id, 2)
    await deliver(h, owner.who, two.id, 1)
    const stranger = await pro()
    const theirs = await claimAlias(h, stranger.who)
    expectProblem(await h.request("/exports", { method: "POST", token: owner.token, body: { aliasId: theirs.id } }), 404, "not_found")
    expectProblem(await h.request("/exports", { method: "POST", token: owner.token, body: { aliasId: 0 } }), 422, "validation_failed")
    expectProblem(await h.request("/exports", { method: "POST", token: owner.token, body: { aliasId: one.id, extra: 1 } }), 422, "validation_failed")

    const queued = await queue(owner.who, { aliasId: one.id })
    expect(queued).toMatchObject({ aliasId: one.id, alias: one.address })
    const detail = await built(owner.who, queued.id)
    expect(detail).toMatchObject({ alias_id: one.id, alias: one.address })
    const { manifest } = await zipOf(owner.token, queued.id)
    expect(manifest.messages.map((m) => m.id)).toEqual(ids)
    expect(manifest.alias).toBe(one.address)
    expect(manifest.messages.every((m) => m.alias === one.address)).toBe(true)
  })
})

describe("expiry", () => {
  it("is downloadable for 24 hours, then the sweep marks it expired and deletes its bytes", async () => {
    const owner = await pro()
    await deliver(h, owner.who, (await claimAlias(h, owner.who)).id, 1)
    const queued = await queue(owner.who)
    await built(owner.who, queued.id)
    const [before] = await h.query<{ blob_oid: number }>("SELECT blob_oid FROM exports WHERE id = $1", [queued.id])
    h.clock.advance("23 hours")
    await h.worker.sweepExports()
    expect((await exportDetail(owner.who, queued.id)).detail.status).toBe("ready")
    h.clock.advance("1 hour")
    await h.worker.sweepExports()
    const { detail } = await exportDetail(owner.who, queued.id)
    expect(detail).toMatchObject({ status: "expired", downloadUrl: null })
    expect((await download(owner.token, queued.id)).status).toBe(404)
    expect(await h.query("SELECT 1 FROM pg_largeobject_metadata WHERE oid = $1", [before!.blob_oid])).toHaveLength(0)
  })
})

describe("plan changes", () => {
  it("a downgrade suspends the exports API and holds the archive (it does not expire); an upgrade restores it", async () => {
    const owner = await pro()
    await deliver(h, owner.who, (await claimAlias(h, owner.who)).id, 1)
    const queued = await queue(owner.who)
    const ready = await built(owner.who, queued.id)
    h.clock.advance("1 hour")
    await h.changePlan(owner.session.accountId, "premium")
    expectProblem(await h.request("/exports", { session: owner.session }), 403, "plan_required")
    expectProblem(await h.request(`/exports/${queued.id}/download`, { session: owner.session }), 403, "plan_required")
    // Held: a day later the sweep leaves it alone.
    h.clock.advance("30 hours")
    await h.worker.sweepExports()
    await h.changePlan(owner.session.accountId, "pro")
    const session = owner.session
    const { detail } = await exportDetail({ session }, queued.id)
    expect(detail.status).toBe("ready")
    expect(detail.downloadUrl).not.toBeNull()
    // The window did not run while held: 23 hours of it are left.
    expect(Date.parse(detail.expires_at!.replace(" ", "T").replace("+00", "Z")) - Date.parse(ready.expires_at!.replace(" ", "T").replace("+00", "Z")))
      .toBe(30 * 3600 * 1000)
    const token = await h.createToken(owner.session, ["read"], "after upgrade")
    expect((await zipOf(token, queued.id)).manifest.counts.messages).toBe(1)
  })

  it("a pending export waits while the plan lacks exports and is built once Pro resumes", async () => {
    const owner = await pro()
    await deliver(h, owner.who, (await claimAlias(h, owner.who)).id, 2)
    const queued = await queue(owner.who)
    await h.changePlan(owner.session.accountId, "free")
    expect(await h.worker.buildExports()).toEqual([])
    await h.changePlan(owner.session.accountId, "pro")
    const token = await h.createToken(owner.session, ["read"], "again")
    await built({ token }, queued.id)
  })
})

describe("a build that does not finish", () => {
  it("is given back when the worker stops mid-export, and built whole by the next run", async () => {
    const owner = await pro()
    await deliver(h, owner.who, (await claimAlias(h, owner.who)).id, 3)
    const queued = await queue(owner.who)
    const stop = new AbortController()
    // Stopped as soon as it has started writing.
    const running = h.worker.buildExports({ signal: stop.signal }).catch(() => "stopped")
    for (const deadline = Date.now() + 10_000; ;) {
      const [row] = await h.query<{ status: string; blob_oid: number | null }>("SELECT status, blob_oid FROM exports WHERE id = $1", [queued.id])
      if (row!.status === "processing" && row!.blob_oid !== null) break
      if (row!.status === "ready" || Date.now() > deadline) break
      await new Promise((resolve) => setTimeout(resolve, 1))
    }
    stop.abort()
    await running
    const [row] = await h.query<{ status: string }>("SELECT status FROM exports WHERE id = $1", [queued.id])
    expect(["pending", "ready"]).toContain(row!.status)
    await built(owner.who, queued.id)
    expect((await zipOf(owner.token, queued.id)).manifest.counts.messages).toBe(3)
  })

  it("is taken again once the lease of a worker that died lapses, its partial bytes deleted", async () => {
    const owner = await pro()
    await deliver(h, owner.who, (await claimAlias(h, owner.who)).id, 2)
    const queued = await queue(owner.who)
    // A worker took it, wrote part of the ZIP, and died: processing, with a lease and bytes left behind.
    const [partial] = await h.query<{ oid: number }>("SELECT lo_from_bytea(0, '\\x504b0304'::bytea)::int8 AS oid")
    await h.query("UPDATE exports SET status = 'processing', attempts = 1, lease_until = $2, blob_oid = $3, messages_total = 2, messages_done = 1 WHERE id = $1", [
      queued.id,
      new Date(h.clock.now().getTime() + 30_000),
      partial!.oid
    ])
    expect((await exportDetail(owner.who, queued.id)).progress).toBe("1/2")
    // Not while its lease holds.
    expect((await h.worker.sweepExports()).built).toBe(0)
    h.clock.advance("31 seconds")
    expect(await h.worker.sweepExports()).toMatchObject({ due: 1, built: 1 })
    await built(owner.who, queued.id)
    expect(await h.query("SELECT 1 FROM pg_largeobject_metadata WHERE oid = $1", [partial!.oid])).toHaveLength(0)
    expect((await zipOf(owner.token, queued.id)).manifest.counts.messages).toBe(2)
  })

  it("fails with a readable error after its last attempt lapses", async () => {
    const owner = await pro()
    const queued = await queue(owner.who)
    await h.query("UPDATE exports SET status = 'processing', attempts = 3, lease_until = $2 WHERE id = $1", [queued.id, h.clock.now()])
    h.clock.advance("1 second")
    await h.worker.sweepExports()
    const { detail } = await exportDetail(owner.who, queued.id)
    expect(detail.status).toBe("failed")
    expect(detail.error).toMatch(/could not be finished/)
    // Failed is not running: a new one may be requested.
    await queue(owner.who)
  })
})

describe("a guest of a shared mailbox", () => {
  it("exports the shared mailbox by its aliasId (the whole export is its own mailboxes); not once the share ends", async () => {
    const owner = await pro()
    const guest = await pro()
    const shared = await claimAlias(h, owner.who)
    const ownerOnly = await claimAlias(h, owner.who)
    const sharedIds = await deliver(h, owner.who, shared.id, 2)
    const hidden = await deliver(h, owner.who, ownerOnly.id, 1)
    const guestIds = await deliver(h, guest.who, (await claimAlias(h, guest.who)).id, 1)
    const shareId = await shareMailbox(h, { session: owner.session }, { session: guest.session }, { aliasId: shared.id, email: guest.session.email, role: "viewer" })

    const all = await queue(guest.who)
    await built(guest.who, all.id)
    const { manifest, entries } = await zipOf(guest.token, all.id)
    // `{}` is every own mailbox: the guest's own mail, not the owner's.
    expect(manifest.messages.map((m) => m.id)).toEqual(guestIds)
    expect(entries.has(`messages/${hidden[0]}.eml`)).toBe(false)

    const one = await queue(guest.who, { aliasId: shared.id })
    expect(one).toMatchObject({ aliasId: shared.id, alias: shared.address })
    await built(guest.who, one.id)
    const sharedZip = await zipOf(guest.token, one.id)
    expect(sharedZip.manifest.messages.map((m) => m.id)).toEqual(sharedIds)
    for (const id of sharedIds) expect(Buffer.compare(sharedZip.entries.get(`messages/${id}.eml`)!, await raw(guest.token, id))).toBe(0)
    // The owner's other mailbox is not the guest's to export.
    expectProblem(await h.request("/exports", { method: "POST", token: guest.token, body: { aliasId: ownerOnly.id } }), 404, "not_found")

    const ended = await h.request(`/aliases/${shared.id}/shares/${shareId}`, { method: "DELETE", session: owner.session, headers: {} })
    expect([200, 204], ended.text).toContain(ended.status)
    expectProblem(await h.request("/exports", { method: "POST", token: guest.token, body: { aliasId: shared.id } }), 404, "not_found")
  })
})
