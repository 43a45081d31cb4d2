/**
 * Shared steps of the messages-* tests: an alias, test mail injected through POST /test/messages
 * and processed by the harness's real pipeline, and reads of what the reader sees.
 */
import { Alias, CandidateReservation, MessageDetail } from "@burnbox/domain"
import { expectShape, type Harness, type Session } from "@burnbox/testkit"
import { expect } from "vitest"

export type Detail = typeof MessageDetail.Type
export type Caller = { readonly token: string } | { readonly session: Session }

export const claimAlias = async (h: Harness, who: Caller) => {
  const reservation = await h.request<typeof CandidateReservation.Type>("/aliases/candidates", {
    method: "POST",
    ...who,
    body: { domainId: 1, style: "numeric" }
  })
  expect(reservation.status, reservation.text).toBe(200)
  const answer = await h.request("/aliases", {
    method: "POST",
    ...who,
    body: { aliasId: reservation.body.candidates[0]!.id, reservationToken: reservation.body.reservationToken }
  })
  expect(answer.status, answer.text).toBe(201)
  return expectShape(Alias, answer.body)
}

export interface MailInput {
  readonly from?: string
  readonly subject?: string
  readonly text?: string
  readonly html?: string
  readonly attachments?: ReadonlyArray<{ filename: string; contentType?: string; contentBase64: string }>
}

/** Injects test mail and answers its id, without waiting for the pipeline. */
export const injectMail = async (h: Harness, who: Caller, aliasId: number, mail: MailInput = {}) => {
  const answer = await h.request("/test/messages", {
    method: "POST",
    ...who,
    body: { aliasId, from: mail.from ?? "Sender <sender@example.com>", subject: mail.subject ?? "hello", text: mail.text ?? "hello there", ...mail }
  })
  expect(answer.status, answer.text).toBe(202)
  return answer.body.id as number
}

/** Polls GET /messages/{id} until the pipeline processed it (bounded). */
export const processed = async (h: Harness, who: Caller, id: number): Promise<Detail> => {
  const deadline = Date.now() + 15_000
  for (;;) {
    const answer = await h.request(`/messages/${id}`, { ...who })
    expect(answer.status, answer.text).toBe(200)
    if (answer.body.processingStatus === "processed") return expectShape(MessageDetail, answer.body)
    if (answer.body.processingStatus === "failed") throw new Error(`message ${id} failed processing`)
    if (Date.now() > deadline) throw new Error(`message ${id} still ${answer.body.processingStatus} after 15 s`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** Injects `count` messages and waits for all of them. */
export const deliver = async (h: Harness, who: Caller, aliasId: number, count = 1, mail: MailInput = {}) => {
  const ids: Array<number> = []
  for (let i = 0; i < count; i++) ids.push(await injectMail(h, who, aliasId, { subject: `message ${i}`, ...mail }))
  for (const id of ids) await processed(h, who, id)
  return ids
}

export const detail = async (h: Harness, who: Caller, id: number): Promise<Detail> => {
  const answer = await h.request(`/messages/${id}`, { ...who })
  expect(answer.status, answer.text).toBe(200)
  return expectShape(MessageDetail, answer.body)
}

export const aliasOf = async (h: Harness, who: Caller, id: number) => {
  const answer = await h.request<{ items: Array<typeof Alias.Type> }>("/aliases", { ...who })
  const found = answer.body.items.find((a) => a.id === id)
  expect(found).toBeDefined()
  return found!
}

export const listIds = async (h: Harness, who: Caller, query = "") => {
  const answer = await h.request(`/messages${query}`, { ...who })
  expect(answer.status, answer.text).toBe(200)
  return { ids: (answer.body.items as Array<{ id: number }>).map((m) => m.id), total: answer.body.total as number }
}
