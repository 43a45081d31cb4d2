/**
 * The rules an alias's life can break (spec 3.1, 4.3). Each error names the rule and carries
 * what a caller needs to explain it; how it is answered over HTTP is the server's business.
 */
import { Schema } from "effect"

/** No alias of the account has this id (a stranger's alias is not the caller's either). */
export class AliasNotFound extends Schema.TaggedError<AliasNotFound>()("AliasNotFound", {
  aliasId: Schema.Int
}) {}

/** A paused alias receives no mail until it is resumed. */
export class AliasPaused extends Schema.TaggedError<AliasPaused>()("AliasPaused", {
  aliasId: Schema.Int
}) {}

/** What was asked of a burned alias: a status change, a change of its timer, or mail. */
export const BurnedAliasRequest = Schema.Literals(["statusChange", "timerChange", "mailInjection"])
export type BurnedAliasRequest = typeof BurnedAliasRequest.Type

/** A burned alias stays burned: it changes no more and receives nothing. */
export class AliasBurned extends Schema.TaggedError<AliasBurned>()("AliasBurned", {
  aliasId: Schema.Int,
  refused: BurnedAliasRequest
}) {}

/** The plan's cap on active aliases is reached; one must be paused or burned first. */
export class ActiveAliasCapReached extends Schema.TaggedError<ActiveAliasCapReached>()("ActiveAliasCapReached", {
  limit: Schema.Int
}) {}

/** The plan's cap on aliases claimed over the account's lifetime is reached. */
export class AliasLifetimeCapReached extends Schema.TaggedError<AliasLifetimeCapReached>()("AliasLifetimeCapReached", {
  limit: Schema.Int
}) {}

/** The plan's claims of one UTC day are used up; `retryAfter` seconds until the next day. */
export class DailyClaimLimitReached extends Schema.TaggedError<DailyClaimLimitReached>()("DailyClaimLimitReached", {
  limit: Schema.Int,
  retryAfter: Schema.Int
}) {}

/** The plan's candidate reservations of the hour are used up; `retryAfter` seconds until one frees. */
export class HourlyShuffleLimitReached extends Schema.TaggedError<HourlyShuffleLimitReached>()("HourlyShuffleLimitReached", {
  limit: Schema.Int,
  retryAfter: Schema.Int
}) {}

/** The account holds as many live reservations as its plan allows; one must be claimed, released or expire first. */
export class ReservationCapReached extends Schema.TaggedError<ReservationCapReached>()("ReservationCapReached", {
  limit: Schema.Int
}) {}

/** The reservation token is unknown, released or expired. */
export class ReservationUnavailable extends Schema.TaggedError<ReservationUnavailable>()("ReservationUnavailable", {}) {}

/** The candidate is not one of the reservation's. */
export class CandidateNotReserved extends Schema.TaggedError<CandidateNotReserved>()("CandidateNotReserved", {
  aliasId: Schema.Int
}) {}

/** A self-destruct deadline must lie in the future. */
export class SelfDestructNotInFuture extends Schema.TaggedError<SelfDestructNotInFuture>()("SelfDestructNotInFuture", {
  selfDestructAt: Schema.String
}) {}

/** A PATCH's `action` and `status` ask for different transitions. */
export class TransitionsConflict extends Schema.TaggedError<TransitionsConflict>()("TransitionsConflict", {}) {}

export type AliasError =
  | AliasNotFound
  | AliasPaused
  | AliasBurned
  | ActiveAliasCapReached
  | AliasLifetimeCapReached
  | DailyClaimLimitReached
  | HourlyShuffleLimitReached
  | ReservationCapReached
  | ReservationUnavailable
  | CandidateNotReserved
  | SelfDestructNotInFuture
  | TransitionsConflict
