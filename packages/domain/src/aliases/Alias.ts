import { Schema } from "effect"
import { DateTimeInput, DateTimeString, Id, NonNegativeInt } from "../platform/Common.ts"
import { DomainTier } from "../domains/MailDomain.ts"

export const AliasStyle = Schema.Literals(["words", "pronounceable", "numeric"])
export const AliasStatus = Schema.Literals(["active", "paused", "burned"])
export const AliasRole = Schema.Literals(["owner", "collaborator", "viewer"])

/** Spec 2.7. */
export const Alias = Schema.Struct({
  canSend: Schema.optionalKey(Schema.Boolean),
  id: Id,
  address: Schema.String,
  localPart: Schema.String,
  domain: Schema.Struct({
    id: Id,
    name: Schema.String,
    state: Schema.Literals(["active", "closed", "draining", "retired"])
  }),
  style: AliasStyle,
  status: AliasStatus,
  label: Schema.NullOr(Schema.String),
  note: Schema.NullOr(Schema.String),
  receivedCount: NonNegativeInt,
  rejectedCount: NonNegativeInt,
  unreadCount: NonNegativeInt,
  storageUsedBytes: NonNegativeInt,
  pushEnabled: Schema.Boolean,
  lastReceivedAt: Schema.NullOr(DateTimeString),
  claimedAt: Schema.NullOr(DateTimeString),
  pausedAt: Schema.NullOr(DateTimeString),
  burnedAt: Schema.NullOr(DateTimeString),
  planPaused: Schema.Boolean,
  selfDestructAt: Schema.NullOr(DateTimeString),
  selfDestructSuspended: Schema.Boolean,
  expiringNotifiedAt: Schema.NullOr(DateTimeString),
  domainTier: DomainTier,
  role: AliasRole,
  shared: Schema.Boolean,
  ownerHandle: Schema.NullOr(Schema.String),
  guestCount: NonNegativeInt,
  trash: Schema.Struct({ enabled: Schema.Boolean, retentionDays: NonNegativeInt })
}).annotate({ identifier: "Alias" })
export type Alias = typeof Alias.Type

/** Spec 2.8. */
export const AliasTimer = Schema.Struct({
  id: Id,
  selfDestructAt: Schema.NullOr(DateTimeString),
  selfDestructSuspended: Schema.Boolean,
  expiringNotifiedAt: Schema.NullOr(DateTimeString)
}).annotate({ identifier: "AliasTimer" })
export type AliasTimer = typeof AliasTimer.Type

/** Spec 2.9. */
export const CandidateReservation = Schema.Struct({
  reservationToken: Schema.String,
  expiresAt: DateTimeString,
  candidates: Schema.Array(Schema.Struct({
    id: Id,
    localPart: Schema.String,
    domain: Schema.String,
    address: Schema.String
  }))
}).annotate({ identifier: "CandidateReservation" })
export type CandidateReservation = typeof CandidateReservation.Type

export const CandidateRelease = Schema.Struct({ released: NonNegativeInt }).annotate({ identifier: "CandidateRelease" })

export const ReserveCandidates = Schema.Struct({ domainId: Id, style: AliasStyle })
export const ReleaseCandidates = Schema.Struct({ reservationToken: Schema.optionalKey(Schema.String) })

const Label = Schema.String.check(Schema.isMaxLength(160))
const Note = Schema.String.check(Schema.isMaxLength(2000))

export const ClaimAlias = Schema.Struct({
  aliasId: Id,
  reservationToken: Schema.String.check(Schema.isMinLength(1)),
  label: Schema.optionalKey(Schema.NullOr(Label)),
  note: Schema.optionalKey(Schema.NullOr(Note)),
  selfDestructAt: Schema.optionalKey(Schema.NullOr(DateTimeInput))
})

/** The lifecycle transitions of spec 3.1 an owner asks for. */
export const AliasTransition = Schema.Literals(["pause", "resume", "burn"])
export type AliasTransition = typeof AliasTransition.Type

export const UpdateAlias = Schema.Struct({
  label: Schema.optionalKey(Schema.NullOr(Label)),
  note: Schema.optionalKey(Schema.NullOr(Note)),
  action: Schema.optionalKey(AliasTransition),
  status: Schema.optionalKey(AliasStatus)
})

const transitionToStatus = { active: "resume", paused: "pause", burned: "burn" } as const

/**
 * The transition a PATCH asks for (spec 4.3: `action`, or `status` naming the state to reach),
 * none, or "conflict" when the two name different transitions.
 */
export const requestedTransition = (input: {
  readonly action?: AliasTransition | undefined
  readonly status?: typeof AliasStatus.Type | undefined
}): AliasTransition | undefined | "conflict" => {
  const fromStatus = input.status === undefined ? undefined : transitionToStatus[input.status]
  if (input.action !== undefined && fromStatus !== undefined && input.action !== fromStatus) return "conflict"
  return input.action ?? fromStatus
}

export const SetTimer = Schema.Struct({ selfDestructAt: DateTimeInput })

export const ListAliasesQuery = {
  includeBurned: Schema.optionalKey(Schema.Literals(["true", "false"]))
}

/** A reservation holds exactly five candidates for ten minutes (spec 8, decisions.md). */
export const CandidatesPerReservation = 5
export const ReservationLifetimeMs = 10 * 60 * 1000

/**
 * How many reservations an account may hold live at once (each lives its ten minutes unless
 * claimed or released): as many as the aliases its plan lets it have active, so parallel CI jobs
 * on one token each hold their own, and never more than the plan could claim (free 3,
 * premium 20, pro 200; it follows an `activeAliasCap` override).
 */
export const liveReservationCap = (plan: { readonly activeAliasCap: number }): number => Math.max(1, plan.activeAliasCap)

/** How long before a self-destruct deadline `alias.expiring` is emitted. */
export const ExpiringNoticeMs = 24 * 60 * 60 * 1000
