/**
 * Steps a reader takes through the API, shared by the tests that need a mailbox: claim an alias,
 * read one message, list the ids of a view. Each checks its answer's status as it goes.
 */
import { Alias, CandidateReservation, MessageDetail } from "@burnbox/domain"
import { expect } from "vitest"
import type { Harness, Session } from "./Harness.ts"
import { expectShape } from "./Shapes.ts"

export type Detail = typeof MessageDetail.Type
/** Who makes a request: an API token or a browser session. */
export type Caller = { readonly token: string } | { readonly session: Session }

/** Reserves numeric candidates on domain 1 and claims the first; answers the new alias. */
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

/** GET /messages/{id}, as it is now. */
export const detail = async (h: Harness, who: Caller, id: number): Promise<Detail> => {
  const answer = await h.request(`/messages/${id}`, { ...who })
  expect(answer.status, answer.text).toBe(200)
  return expectShape(MessageDetail, answer.body)
}

/** The alias `id` as GET /aliases lists it. */
export const aliasOf = async (h: Harness, who: Caller, id: number) => {
  const answer = await h.request<{ items: Array<typeof Alias.Type> }>("/aliases", { ...who })
  const found = answer.body.items.find((a) => a.id === id)
  expect(found).toBeDefined()
  return found!
}

/** GET /messages`query`: the ids of the page, in order, and the total. */
export const listIds = async (h: Harness, who: Caller, query = "") => {
  const answer = await h.request(`/messages${query}`, { ...who })
  expect(answer.status, answer.text).toBe(200)
  return { ids: (answer.body.items as Array<{ id: number }>).map((m) => m.id), total: answer.body.total as number }
}

/** The owner shares mailbox `aliasId` with `guest` as `role` and the guest accepts: answers the share's id. */
export const shareMailbox = async (h: Harness, owner: Caller, guest: Caller, options: {
  readonly aliasId: number
  readonly email: string
  readonly role: "viewer" | "collaborator"
}) => {
  const invited = await h.request(`/aliases/${options.aliasId}/shares`, { method: "POST", ...owner, body: { email: options.email, role: options.role } })
  expect(invited.status, invited.text).toBe(201)
  const id = invited.body.id as number
  const accepted = await h.request(`/shares/invitations/${id}/accept`, { method: "POST", ...guest })
  expect(accepted.status, accepted.text).toBe(204)
  return id
}

/**
 * The boundary rule of sharing (spec 5, rule 7): none of `secrets` (an account's email, an
 * owner's label or note, an endpoint or token name) anywhere in an answer the other side sees.
 */
export const expectNoneOf = (answer: { readonly text: string }, secrets: ReadonlyArray<string>) => {
  for (const secret of secrets) expect(answer.text.toLowerCase(), `an answer shows "${secret}"`).not.toContain(secret.toLowerCase())
}
