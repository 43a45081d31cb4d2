/**
 * The one place domain errors become HTTP answers. Services fail with the tagged errors of
 * `@burnbox/domain` (named for the rule they enforce, carrying its data); this table gives
 * each its Problem (spec 7): the status, the `code` clients and the README rely on, the
 * message and the `fields`. Handlers run the store's work through `withProblems`.
 */
import {
  type ApiError,
  Conflict,
  type DomainError,
  Forbidden,
  Gone,
  NotFound,
  type PlanFeature,
  RateLimited,
  ServiceUnavailable,
  Unauthorized,
  ValidationFailed
} from "@burnbox/domain"
import { Effect } from "effect"
import { addResponseHeaders } from "./Authentication.ts"

type ProblemTable = {
  readonly [Tag in DomainError["_tag"]]: (error: Extract<DomainError, { readonly _tag: Tag }>) => ApiError
}

/** How a plan feature is named in a refusal: "Your plan does not include ...". */
const featureNames: Readonly<Record<PlanFeature, string>> = {
  earlyAccessDomains: "early-access domains",
  selfDestructTimers: "self-destruct timers",
  developerAccess: "API tokens (developer access)",
  bulkExport: "mailbox exports (Pro)",
  testMail: "test-mail injection (Pro)",
  sharing: "shared mailboxes (Premium or Pro)"
}

const conflict = (code: string, message: string) => new Conflict({ code, message })
const rateLimited = (code: string, message: string, retryAfter: number) => new RateLimited({ code, message, retryAfter })

const problems = {
  // accounts
  EmailTaken: () => conflict("email_taken", "An account with this email exists already."),
  InvalidCredentials: () => Unauthorized.invalidCredentials(),
  SignInThrottled: (e) => rateLimited("too_many_login_attempts", `Too many failed sign-ins; retry in ${e.retryAfter} s.`, e.retryAfter),

  // aliases
  AliasNotFound: () => NotFound.of("Alias"),
  AliasPaused: () => conflict("alias_paused", "The alias is paused; resume it to receive mail."),
  AliasBurned: (e) =>
    conflict("alias_burned", {
      statusChange: "This alias is burned; burning cannot be undone.",
      timerChange: "This alias is burned.",
      mailInjection: "The alias is burned."
    }[e.refused]),
  ActiveAliasCapReached: (e) => conflict("active_alias_cap", `Your plan allows ${e.limit} active aliases; pause or burn one first.`),
  AliasLifetimeCapReached: (e) => conflict("alias_lifetime_cap", `Your plan allows ${e.limit} aliases in all.`),
  DailyClaimLimitReached: (e) =>
    rateLimited("claims_per_day_reached", `At most ${e.limit} claims a day; retry in ${e.retryAfter} s.`, e.retryAfter),
  HourlyShuffleLimitReached: (e) =>
    rateLimited("shuffle_limit_reached", `At most ${e.limit} candidate reservations an hour; retry in ${e.retryAfter} s.`, e.retryAfter),
  ReservationCapReached: (e) =>
    conflict("reservation_cap", `Your plan allows ${e.limit} live candidate reservations; claim from one or release one first.`),
  ReservationUnavailable: () =>
    conflict("reservation_invalid", "The reservation is unknown, released or expired; reserve candidates again."),
  CandidateNotReserved: () => conflict("candidate_not_reserved", "This candidate is not part of the reservation."),
  SelfDestructNotInFuture: () => ValidationFailed.withFields({ selfDestructAt: "must_be_future" }),
  TransitionsConflict: () => ValidationFailed.withFields({ status: "conflicts_with_action" }, "action and status ask for different transitions."),

  // domains
  DomainNotFound: () => NotFound.of("Domain"),
  DomainRetired: () => conflict("domain_retired", "This domain accepts no new aliases."),

  // plans
  FeatureNotInPlan: (e) => Forbidden.plan(featureNames[e.feature]),
  QuotaExceeded: () => ValidationFailed.withFields({ body: "exceeds_storage_quota" }, "The message is larger than your whole storage quota."),

  // exports (#33): one at a time per account; a stranger's or an unready export is not found
  ExportNotFound: () => NotFound.of("Export"),
  ExportInProgress: (e) => conflict("export_in_progress", `Export ${e.exportId} is still being built; wait for it to finish.`),

  // messages
  MessageNotFound: () => NotFound.of("Message"),
  PinLimitReached: (e) => conflict("max_pinned_reached", `Your plan keeps at most ${e.limit} pinned messages; unpin one first.`),
  BulkTagActionWithoutTag: (e) => ValidationFailed.withFields({ tagId: "required" }, `${e.action} needs a tagId.`),
  StateFieldsNeedSession: (e) =>
    new Forbidden({
      code: "session_required_for_field",
      message: `A bearer token may change only isRead; ${e.fields.join(", ")} need a browser session.`
    }),
  AttachmentNotFound: () => NotFound.of("Attachment"),
  DangerousAttachmentUnconfirmed: () =>
    conflict("dangerous_attachment", "This attachment could run code when opened; repeat the request with confirm=1 to download it."),
  AttachmentPreviewUnavailable: () => NotFound.of("Attachment preview"),
  InvalidCursor: () =>
    ValidationFailed.withFields({ cursor: "invalid_cursor" }, "The cursor is not one this list gave out, or it belongs to other filters."),
  // The search syntax explains its own refusals (decisions.md, "Search syntax of `q`").
  SearchQueryTooLong: (e) => ValidationFailed.withFields({ q: "invalid_query" }, e.message),
  SearchQueryTooManyTerms: (e) => ValidationFailed.withFields({ q: "invalid_query" }, e.message),
  InvalidSearchDate: (e) => ValidationFailed.withFields({ q: "invalid_query" }, e.message),

  // sharing
  // An unknown email answers as a mailbox the caller does not own, so emails cannot be probed.
  ShareTargetNotFound: () => NotFound.of("Alias"),
  ShareNotFound: () => NotFound.of("Share"),
  InvitationNotFound: () => NotFound.of("Invitation"),
  AlreadyShared: () => conflict("already_shared", "This mailbox is already shared with that account."),
  GuestLimitReached: (e) => conflict("guest_limit_reached", `A mailbox has at most ${e.limit} guests; end a share first.`),
  ShareGrantNotFound: () => NotFound.of("Share grant"),

  // tags
  TagNotFound: () => NotFound.of("Tag"),
  TagNameTaken: () => conflict("tag_name_taken", "You already have a tag with this name."),
  TagNotOwned: (e) => ValidationFailed.withFields({ [e.input]: "unknown_tag" }, "Every tag must be one of your own tags."),

  // mail rules (#34)
  RuleNotFound: () => NotFound.of("Rule"),
  RuleLimitReached: (e) => conflict("rule_limit_reached", `Your plan allows ${e.limit} mail rules; delete one first.`),
  RuleReferenceRefused: (e) => ValidationFailed.withFields(e.fields, "A rule may name only your own aliases and tags; see fields."),

  // test mail
  InvalidTestMessage: (e) => ValidationFailed.withFields(e.fields),
  TestMessagesPerDayReached: (e) =>
    rateLimited("test_messages_per_day_reached", `At most ${e.limit} test messages a day; retry in ${e.retryAfter} s.`, e.retryAfter),

  // tokens
  TokenLimitReached: (e) => conflict("token_limit_reached", `At most ${e.limit} tokens may be active; revoke one first.`),
  TokenNotFound: () => NotFound.of("Token"),
  TokenExpiryNotInFuture: () => ValidationFailed.withFields({ expiresAt: "must_be_future" }),

  // webhooks
  WebhookNotFound: () => NotFound.of("Webhook"),
  WebhookUrlRefused: (e) => ValidationFailed.withFields({ url: e.reason }, "The webhook URL is not allowed; see fields."),
  WebhookLimitReached: (e) => conflict("webhook_limit_reached", `Your plan allows ${e.limit} webhook endpoints; delete one first.`),
  WebhookInactive: (e) =>
    conflict(`webhook_${e.status}`, `The endpoint is ${e.status}; ${{ test: "set it active to send a test", redelivery: "set it active to redeliver" }[e.refused]}.`),
  DeliveryNotFound: () => NotFound.of("Delivery"),
  DeliveryPayloadExpired: () => new Gone({ code: "payload_expired", message: "Delivery payloads are kept 30 days; this one has expired." }),
  DeliveryInProgress: () => conflict("delivery_in_progress", "This delivery is being attempted right now."),

  // protected operator desks (spec 4.6)
  DeskNotFound: () => NotFound.of("Protected desk"),
  ReplyTargetUnavailable: (e) =>
    ValidationFailed.withFields({ [e.input]: "unavailable_reply_target" }, "The reply target must be a received message of this desk's mailbox."),
  DeskSendLimitReached: (e) =>
    rateLimited(
      "desk_send_limit_reached",
      e.scope === "account"
        ? `At most ${e.limit} desk sends an hour per account; retry in ${e.retryAfter} s.`
        : `At most ${e.limit} desk sends an hour across the service; retry in ${e.retryAfter} s.`,
      e.retryAfter
    ),
  DeskSendingUnavailable: (e) =>
    new ServiceUnavailable({
      code: "sending_unavailable",
      message: e.reason === "not_configured"
        ? "Sending is not available: no outbound relay is configured. Check Sent before retrying."
        : "The outbound relay did not accept the message; it is recorded as failed. Check Sent before retrying."
    }),
  // browser push (issue #32)
  PushSubscriptionNotFound: () => NotFound.of("Push subscription"),
  PushSubscriptionExists: () => conflict("push_subscription_exists", "This browser is subscribed already."),
  PushSubscriptionRefused: (e) => ValidationFailed.withFields({ [e.field]: e.reason }, "The push subscription is not allowed; see fields."),
  PushTestLimited: (e) =>
    rateLimited("push_test_limited", `${{ account: "Too many test pushes for this account", address: "Too many test pushes from this address", outstanding: "Test pushes are still waiting to be sent" }[e.allowance]}; retry in ${e.retryAfter} s.`, e.retryAfter),
  PushQueueUnavailable: () => new ServiceUnavailable({ code: "push_queue_unavailable", message: "The test push could not be queued; retry later." })
} satisfies ProblemTable

/** The Problem class a domain error answers as; any other error stays what it is. */
export type ProblemOf<E> = E extends DomainError ? ReturnType<(typeof problems)[E["_tag"]]> : E

export const isDomainError = (error: unknown): error is DomainError =>
  typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string" && Object.hasOwn(problems, error._tag)

/** The Problem a domain error answers as. */
export const problemOf = <E extends DomainError>(error: E): ProblemOf<E> => {
  // The table's entry for this tag takes this error: the index and the argument agree by construction.
  const answer = problems[error._tag] as (error: DomainError) => ApiError
  return answer(error) as ProblemOf<E>
}

/**
 * A handler's work with the domain errors of the services it calls answered as their Problems.
 * A 429 that says when to retry carries it as the Retry-After header.
 */
export const withProblems = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.mapError((error) => (isDomainError(error) ? problemOf(error) : error) as ProblemOf<E>),
    Effect.tapError((problem) => {
      const limited = problem as Partial<RateLimited>
      return limited._tag === "RateLimited" && limited.retryAfter !== undefined
        ? addResponseHeaders({ "retry-after": String(limited.retryAfter) })
        : Effect.void
    })
  )
