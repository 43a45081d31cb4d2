/**
 * Getting mail into a harness: test mail through POST /test/messages, or raw bytes over its
 * SMTP ingest; then waiting until the real pipeline is done with it.
 */
import { MessageDetail } from "@burnbox/domain"
import type { TestMessageRequest } from "@burnbox/domain/mail/index"
import { expect } from "vitest"
import type { Caller, Detail } from "./ApiSteps.ts"
import type { Harness } from "./Harness.ts"
import { expectShape } from "./Shapes.ts"
import { SmtpClient } from "./SmtpClient.ts"

/**
 * The body of a test mail, over the defaults `from: "Sender <sender@example.com>"`,
 * `subject: "hello"`, `text: "hello there"` (`text: null` drops the text part).
 * `fakeMailRequest` (FakeMail.ts) writes a realistic one.
 */
export type MailInput = Partial<TestMessageRequest>

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

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

/** Polls GET /messages/{id} until the pipeline processed it (bounded, 15 s); a failed message throws. */
export const processed = async (h: Harness, who: Caller, id: number): Promise<Detail> => {
  const deadline = Date.now() + 15_000
  for (;;) {
    const answer = await h.request(`/messages/${id}`, { ...who })
    expect(answer.status, answer.text).toBe(200)
    if (answer.body.processingStatus === "processed") return expectShape(MessageDetail, answer.body)
    if (answer.body.processingStatus === "failed") throw new Error(`message ${id} failed processing`)
    if (Date.now() > deadline) throw new Error(`message ${id} still ${answer.body.processingStatus} after 15 s`)
    await sleep(50)
  }
}

/** Injects `count` messages (subjects "message 0", "message 1", … unless `mail` names one) and waits for all of them. */
export const deliver = async (h: Harness, who: Caller, aliasId: number, count = 1, mail: MailInput = {}) => {
  const ids: Array<number> = []
  for (let i = 0; i < count; i++) ids.push(await injectMail(h, who, aliasId, { subject: `message ${i}`, ...mail }))
  for (const id of ids) await processed(h, who, id)
  return ids
}

/**
 * Sends `raw` to `to` over the harness's SMTP ingest (which must answer 250), then polls the
 * message's row until the pipeline processed it or gave up on it (bounded, 20 s); answers its id.
 */
export const sendMail = async (h: Harness, to: string, raw: Uint8Array, options: { readonly from?: string } = {}) => {
  const reply = await SmtpClient.sendOne(h.smtpPort, to, raw, options.from)
  expect(reply.code, reply.text).toBe(250)
  const id = Number(/stored as (\d+)/.exec(reply.text)?.[1])
  expect(Number.isInteger(id), reply.text).toBe(true)
  for (const deadline = Date.now() + 20_000; ;) {
    const [row] = await h.query<{ processing_status: string }>("SELECT processing_status FROM messages WHERE id = $1", [id])
    if (row !== undefined && ["processed", "failed"].includes(row.processing_status)) return id
    if (Date.now() > deadline) throw new Error(`message ${id} still ${row?.processing_status} after 20 s`)
    await sleep(20)
  }
}
