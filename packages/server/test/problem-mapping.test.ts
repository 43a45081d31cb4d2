/**
 * The one mapping from domain errors to Problems answers exactly what the API answered when
 * the store raised Problems itself: the status, the code (README, clients), the message and
 * the fields. One case per domain error; the type below fails to compile when one is missing.
 */
import {
  ActiveAliasCapReached,
  AliasBurned,
  AliasLifetimeCapReached,
  AliasNotFound,
  AliasPaused,
  AlreadyShared,
  AttachmentNotFound,
  AttachmentPreviewUnavailable,
  BulkTagActionWithoutTag,
  CandidateNotReserved,
  DailyClaimLimitReached,
  DangerousAttachmentUnconfirmed,
  DeliveryInProgress,
  DeskNotFound,
  DeskSendingUnavailable,
  DeskSendLimitReached,
  ReplyTargetUnavailable,
  PushQueueUnavailable,
  PushSubscriptionExists,
  PushSubscriptionNotFound,
  PushSubscriptionRefused,
  PushTestLimited,
  DeliveryNotFound,
  DeliveryPayloadExpired,
  type DomainError,
  DomainNotFound,
  DomainRetired,
  EmailTaken,
  FeatureNotInPlan,
  GuestLimitReached,
  HourlyShuffleLimitReached,
  InvalidCredentials,
  InvalidCursor,
  InvalidSearchDate,
  InvalidTestMessage,
  InvitationNotFound,
  MessageNotFound,
  ExportInProgress,
  ExportNotFound,
  NotFound,
  PinLimitReached,
  type ProblemBody,
  QuotaExceeded,
  ReservationUnavailable,
  SearchQueryTooLong,
  SearchQueryTooManyTerms,
  SelfDestructNotInFuture,
  ShareGrantNotFound,
  ShareNotFound,
  ShareTargetNotFound,
  SignInThrottled,
  StateFieldsNeedSession,
  TagNameTaken,
  TagNotFound,
  TagNotOwned,
  RuleLimitReached,
  RuleNotFound,
  RuleReferenceRefused,
  TestMessagesPerDayReached,
  TokenExpiryNotInFuture,
  TokenLimitReached,
  TokenNotFound,
  TransitionsConflict,
  WebhookInactive,
  WebhookLimitReached,
  WebhookNotFound,
  WebhookUrlRefused
} from "@burnbox/domain"
import { ReservationCapReached } from "@burnbox/domain/aliases/errors"
import { Effect } from "effect"
import { HttpServerRequest, HttpServerRespondable } from "effect/http"
import { describe, expect, it } from "vitest"
import { isDomainError, problemOf, withProblems } from "@burnbox/server/platform/ProblemMapping"

interface Answer {
  readonly status: number
  readonly body: ProblemBody["error"] & { readonly retryAfter?: number }
}

const answer = (status: number, code: string, message: string, fields?: Record<string, string>): Answer => ({
  status,
  body: fields === undefined ? { code, message } : { code, message, fields }
})

const cases: { readonly [Tag in DomainError["_tag"]]: readonly [Extract<DomainError, { readonly _tag: Tag }>, Answer] } = {
  EmailTaken: [new EmailTaken(), answer(409, "email_taken", "An account with this email exists already.")],
  InvalidCredentials: [new InvalidCredentials(), answer(401, "invalid_credentials", "The email or password is wrong.")],
  SignInThrottled: [
    new SignInThrottled({ retryAfter: 900 }),
    answer(429, "too_many_login_attempts", "Too many failed sign-ins; retry in 900 s.")
  ],

  AliasNotFound: [new AliasNotFound({ aliasId: 7 }), answer(404, "not_found", "Alias was not found.")],
  AliasPaused: [new AliasPaused({ aliasId: 7 }), answer(409, "alias_paused", "The alias is paused; resume it to receive mail.")],
  AliasBurned: [
    new AliasBurned({ aliasId: 7, refused: "statusChange" }),
    answer(409, "alias_burned", "This alias is burned; burning cannot be undone.")
  ],
  ActiveAliasCapReached: [
    new ActiveAliasCapReached({ limit: 3 }),
    answer(409, "active_alias_cap", "Your plan allows 3 active aliases; pause or burn one first.")
  ],
  AliasLifetimeCapReached: [new AliasLifetimeCapReached({ limit: 50 }), answer(409, "alias_lifetime_cap", "Your plan allows 50 aliases in all.")],
  DailyClaimLimitReached: [
    new DailyClaimLimitReached({ limit: 5, retryAfter: 3600 }),
    answer(429, "claims_per_day_reached", "At most 5 claims a day; retry in 3600 s.")
  ],
  HourlyShuffleLimitReached: [
    new HourlyShuffleLimitReached({ limit: 10, retryAfter: 120 }),
    answer(429, "shuffle_limit_reached", "At most 10 candidate reservations an hour; retry in 120 s.")
  ],
  ReservationCapReached: [
    new ReservationCapReached({ limit: 3 }),
    answer(409, "reservation_cap", "Your plan allows 3 live candidate reservations; claim from one or release one first.")
  ],
  ReservationUnavailable: [
    new ReservationUnavailable(),
    answer(409, "reservation_invalid", "The reservation is unknown, released or expired; reserve candidates again.")
  ],
  CandidateNotReserved: [new CandidateNotReserved({ aliasId: 7 }), answer(409, "candidate_not_reserved", "This candidate is not part of the reservation.")],
  SelfDestructNotInFuture: [
    new SelfDestructNotInFuture({ selfDestructAt: "2020-01-01T00:00:00Z" }),
    answer(422, "validation_failed", "The request is not valid; see fields.", { selfDestructAt: "must_be_future" })
  ],

  TransitionsConflict: [
    new TransitionsConflict(),
    answer(422, "validation_failed", "action and status ask for different transitions.", { status: "conflicts_with_action" })
  ],

  DomainNotFound: [new DomainNotFound({ domainId: 9 }), answer(404, "not_found", "Domain was not found.")],
  DomainRetired: [new DomainRetired({ domainId: 9 }), answer(409, "domain_retired", "This domain accepts no new aliases.")],

  FeatureNotInPlan: [new FeatureNotInPlan({ feature: "earlyAccessDomains" }), answer(403, "plan_required", "Your plan does not include early-access domains.")],
  QuotaExceeded: [
    new QuotaExceeded({ accountId: 1, sizeBytes: 2048, quotaBytes: 1024 }),
    answer(422, "validation_failed", "The message is larger than your whole storage quota.", { body: "exceeds_storage_quota" })
  ],

  ShareTargetNotFound: [new ShareTargetNotFound({ aliasId: 7 }), answer(404, "not_found", "Alias was not found.")],
  ShareNotFound: [new ShareNotFound({ shareId: 3 }), answer(404, "not_found", "Share was not found.")],
  InvitationNotFound: [new InvitationNotFound({ invitationId: 3 }), answer(404, "not_found", "Invitation was not found.")],
  AlreadyShared: [new AlreadyShared({ aliasId: 7 }), answer(409, "already_shared", "This mailbox is already shared with that account.")],
  GuestLimitReached: [new GuestLimitReached({ limit: 5 }), answer(409, "guest_limit_reached", "A mailbox has at most 5 guests; end a share first.")],
  ShareGrantNotFound: [new ShareGrantNotFound({ aliasId: 7, subjectId: 2 }), answer(404, "not_found", "Share grant was not found.")],

  MessageNotFound: [new MessageNotFound({ messageId: 11 }), answer(404, "not_found", "Message was not found.")],
  ExportNotFound: [new ExportNotFound({ exportId: 4 }), answer(404, "not_found", "Export was not found.")],
  ExportInProgress: [new ExportInProgress({ exportId: 4 }), answer(409, "export_in_progress", "Export 4 is still being built; wait for it to finish.")],
  PinLimitReached: [new PinLimitReached({ limit: 3 }), answer(409, "max_pinned_reached", "Your plan keeps at most 3 pinned messages; unpin one first.")],
  BulkTagActionWithoutTag: [
    new BulkTagActionWithoutTag({ action: "remove_tag" }),
    answer(422, "validation_failed", "remove_tag needs a tagId.", { tagId: "required" })
  ],
  StateFieldsNeedSession: [
    new StateFieldsNeedSession({ fields: ["starred", "tagIds"] }),
    answer(403, "session_required_for_field", "A bearer token may change only isRead; starred, tagIds need a browser session.")
  ],
  AttachmentNotFound: [new AttachmentNotFound({ messageId: 11, attachmentId: 2 }), answer(404, "not_found", "Attachment was not found.")],
  DangerousAttachmentUnconfirmed: [
    new DangerousAttachmentUnconfirmed({ attachmentId: 2 }),
    answer(409, "dangerous_attachment", "This attachment could run code when opened; repeat the request with confirm=1 to download it.")
  ],
  AttachmentPreviewUnavailable: [new AttachmentPreviewUnavailable({ attachmentId: 2 }), answer(404, "not_found", "Attachment preview was not found.")],
  InvalidCursor: [
    new InvalidCursor(),
    answer(422, "validation_failed", "The cursor is not one this list gave out, or it belongs to other filters.", { cursor: "invalid_cursor" })
  ],
  SearchQueryTooLong: [
    new SearchQueryTooLong({ length: 600, maxLength: 512 }),
    answer(422, "validation_failed", "q is 600 characters long; at most 512 are allowed", { q: "invalid_query" })
  ],
  SearchQueryTooManyTerms: [
    new SearchQueryTooManyTerms({ count: 40, maxTerms: 32 }),
    answer(422, "validation_failed", "q has 40 terms; at most 32 are allowed", { q: "invalid_query" })
  ],
  InvalidSearchDate: [
    new InvalidSearchDate({ term: "before:2024-02-30" }),
    answer(422, "validation_failed", "before:2024-02-30: dates are written YYYY-MM-DD and must exist in the calendar", { q: "invalid_query" })
  ],

  TagNotFound: [new TagNotFound({ tagId: 3 }), answer(404, "not_found", "Tag was not found.")],
  TagNameTaken: [new TagNameTaken({ name: "Receipts" }), answer(409, "tag_name_taken", "You already have a tag with this name.")],
  // mail rules (#34)
  RuleNotFound: [new RuleNotFound({ ruleId: 4 }), answer(404, "not_found", "Rule was not found.")],
  RuleLimitReached: [new RuleLimitReached({ limit: 10 }), answer(409, "rule_limit_reached", "Your plan allows 10 mail rules; delete one first.")],
  RuleReferenceRefused: [
    new RuleReferenceRefused({ fields: { aliasId: "unknown_alias", actions: "unknown_tag" } }),
    answer(422, "validation_failed", "A rule may name only your own aliases and tags; see fields.", { aliasId: "unknown_alias", actions: "unknown_tag" })
  ],
  TagNotOwned: [
    new TagNotOwned({ tagIds: [3, 4], input: "tagIds" }),
    answer(422, "validation_failed", "Every tag must be one of your own tags.", { tagIds: "unknown_tag" })
  ],

  InvalidTestMessage: [
    new InvalidTestMessage({ fields: { text: "text_or_html_required" } }),
    answer(422, "validation_failed", "The request is not valid; see fields.", { text: "text_or_html_required" })
  ],
  TestMessagesPerDayReached: [
    new TestMessagesPerDayReached({ limit: 500, retryAfter: 60 }),
    answer(429, "test_messages_per_day_reached", "At most 500 test messages a day; retry in 60 s.")
  ],

  TokenLimitReached: [new TokenLimitReached({ limit: 10 }), answer(409, "token_limit_reached", "At most 10 tokens may be active; revoke one first.")],
  TokenNotFound: [new TokenNotFound({ tokenId: 4 }), answer(404, "not_found", "Token was not found.")],
  TokenExpiryNotInFuture: [
    new TokenExpiryNotInFuture({ expiresAt: "2020-01-01T00:00:00Z" }),
    answer(422, "validation_failed", "The request is not valid; see fields.", { expiresAt: "must_be_future" })
  ],

  WebhookNotFound: [new WebhookNotFound({ webhookId: 5 }), answer(404, "not_found", "Webhook was not found.")],
  WebhookUrlRefused: [
    new WebhookUrlRefused({ reason: "https_required" }),
    answer(422, "validation_failed", "The webhook URL is not allowed; see fields.", { url: "https_required" })
  ],
  WebhookLimitReached: [
    new WebhookLimitReached({ limit: 5 }),
    answer(409, "webhook_limit_reached", "Your plan allows 5 webhook endpoints; delete one first.")
  ],
  WebhookInactive: [
    new WebhookInactive({ webhookId: 5, status: "paused", refused: "test" }),
    answer(409, "webhook_paused", "The endpoint is paused; set it active to send a test.")
  ],
  DeliveryNotFound: [new DeliveryNotFound({ deliveryId: 12 }), answer(404, "not_found", "Delivery was not found.")],
  DeliveryPayloadExpired: [
    new DeliveryPayloadExpired({ deliveryId: 12 }),
    answer(410, "payload_expired", "Delivery payloads are kept 30 days; this one has expired.")
  ],
  DeliveryInProgress: [new DeliveryInProgress({ deliveryId: 12 }), answer(409, "delivery_in_progress", "This delivery is being attempted right now.")],

  DeskNotFound: [new DeskNotFound({ aliasId: 7 }), answer(404, "not_found", "Protected desk was not found.")],
  ReplyTargetUnavailable: [
    new ReplyTargetUnavailable({ messageId: 9, input: "message_id" }),
    answer(422, "validation_failed", "The reply target must be a received message of this desk's mailbox.", { message_id: "unavailable_reply_target" })
  ],
  DeskSendLimitReached: [
    new DeskSendLimitReached({ scope: "account", limit: 10, retryAfter: 120 }),
    answer(429, "desk_send_limit_reached", "At most 10 desk sends an hour per account; retry in 120 s.")
  ],
  DeskSendingUnavailable: [
    new DeskSendingUnavailable({ reason: "relay_failed", sentId: 3 }),
    answer(503, "sending_unavailable", "The outbound relay did not accept the message; it is recorded as failed. Check Sent before retrying.")
  ],
  PushSubscriptionNotFound: [new PushSubscriptionNotFound({ subscriptionId: 3 }), answer(404, "not_found", "Push subscription was not found.")],
  PushSubscriptionExists: [new PushSubscriptionExists(), answer(409, "push_subscription_exists", "This browser is subscribed already.")],
  PushSubscriptionRefused: [
    new PushSubscriptionRefused({ field: "endpoint", reason: "private_address" }),
    answer(422, "validation_failed", "The push subscription is not allowed; see fields.", { endpoint: "private_address" })
  ],
  PushTestLimited: [
    new PushTestLimited({ allowance: "outstanding", retryAfter: 30 }),
    answer(429, "push_test_limited", "Test pushes are still waiting to be sent; retry in 30 s.")
  ],
  PushQueueUnavailable: [new PushQueueUnavailable(), answer(503, "push_queue_unavailable", "The test push could not be queued; retry later.")]
}

/** The status and Problem body the error answers with on the wire. */
const wire = (problem: unknown) =>
  Effect.runPromise(Effect.gen(function*() {
    if (!HttpServerRespondable.isRespondable(problem)) throw new Error("not a Problem")
    const response = yield* HttpServerRespondable.toResponse(problem)
    if (response.body._tag !== "Uint8Array") throw new Error(`unexpected body ${response.body._tag}`)
    const body = JSON.parse(new TextDecoder().decode(response.body.body)) as ProblemBody
    return { status: response.status, body: body.error }
  }))

describe("the Problem of each domain error", () => {
  for (const [tag, [error, expected]] of Object.entries(cases)) {
    it(`${tag} answers ${expected.status} ${expected.body.code}`, async () => {
      expect(isDomainError(error)).toBe(true)
      expect(await wire(problemOf(error))).toEqual(expected)
    })
  }

  it("the other refusals of a burned alias and of an inactive endpoint keep their own messages", async () => {
    expect((await wire(problemOf(new AliasBurned({ aliasId: 7, refused: "timerChange" })))).body.message).toBe("This alias is burned.")
    expect((await wire(problemOf(new AliasBurned({ aliasId: 7, refused: "mailInjection" })))).body.message).toBe("The alias is burned.")
    expect(await wire(problemOf(new WebhookInactive({ webhookId: 5, status: "disabled", refused: "redelivery" })))).toEqual(
      answer(409, "webhook_disabled", "The endpoint is disabled; set it active to redeliver.")
    )
    expect((await wire(problemOf(new FeatureNotInPlan({ feature: "selfDestructTimers" })))).body.message)
      .toBe("Your plan does not include self-destruct timers.")
    // The refusals the token and test-mail handlers raised themselves before plans had one owner.
    expect(await wire(problemOf(new FeatureNotInPlan({ feature: "developerAccess" })))).toEqual(
      answer(403, "plan_required", "Your plan does not include API tokens (developer access).")
    )
    expect(await wire(problemOf(new FeatureNotInPlan({ feature: "testMail" })))).toEqual(
      answer(403, "plan_required", "Your plan does not include test-mail injection (Pro).")
    )
    expect((await wire(problemOf(new TagNotOwned({ tagIds: [3], input: "tagId" })))).body.fields).toEqual({ tagId: "unknown_tag" })
  })

  it("a 429 keeps its wait for the Retry-After header", () => {
    expect(problemOf(new DailyClaimLimitReached({ limit: 5, retryAfter: 3600 })).retryAfter).toBe(3600)
    expect(problemOf(new HourlyShuffleLimitReached({ limit: 10, retryAfter: 120 })).retryAfter).toBe(120)
    expect(problemOf(new SignInThrottled({ retryAfter: 900 })).retryAfter).toBe(900)
    expect(problemOf(new TestMessagesPerDayReached({ limit: 500, retryAfter: 60 })).retryAfter).toBe(60)
  })

  it("withProblems passes a Problem a handler raised itself through unchanged", async () => {
    const own = NotFound.of("Attachment")
    expect(isDomainError(own)).toBe(false)
    const request = HttpServerRequest.fromWeb(new Request("http://burnbox.test/api/v1/messages/1/attachments/2"))
    const failed = await Effect.runPromise(
      Effect.flip(withProblems(Effect.fail(own))).pipe(Effect.provideService(HttpServerRequest.HttpServerRequest, request))
    )
    expect(failed).toBe(own)
  })
})
