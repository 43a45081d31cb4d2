/**
 * Test-mail injection (spec 2.19, 4.8): a message put into an owned, active alias through the API,
 * stored and worked exactly as SMTP mail is (Mailstore.accept, then the pipeline), never sent.
 * The plan must include test mail, and at most `testMessagesPerDay` are injected per account in a
 * day (a rolling window).
 */
import {
  type AliasBurned,
  type AliasNotFound,
  type AliasPaused,
  type FeatureNotInPlan,
  InjectedTestMessage,
  InvalidTestMessage,
  type QuotaExceeded,
  TestMessagesPerDayReached
} from "@burnbox/domain"
import { buildTestMessage, checkTestMessageBody, type TestMessageBody } from "@burnbox/domain/mail/index"
import { Context, Effect, Layer } from "effect"
import { Aliases } from "../aliases/Aliases.ts"
import { Mailstore } from "../messages/Mailstore.ts"
import { Entitlements } from "../plans/Entitlements.ts"
import { RateLimiter } from "../platform/RateLimiter.ts"
import { now } from "../platform/Time.ts"

export type { TestMessageBody }

export class TestMail extends Context.Service<TestMail, {
  readonly inject: (accountId: number, body: TestMessageBody) => Effect.Effect<
    typeof InjectedTestMessage.Type,
    FeatureNotInPlan | InvalidTestMessage | AliasNotFound | AliasPaused | AliasBurned | TestMessagesPerDayReached | QuotaExceeded
  >
}>()("burnbox/TestMail") {
  static readonly layer = Layer.effect(TestMail, Effect.gen(function*() {
    const entitlements = yield* Entitlements
    const aliases = yield* Aliases
    const mailstore = yield* Mailstore
    const limiter = yield* RateLimiter

    const inject = Effect.fn("TestMail.inject")(function*(accountId: number, body: TestMessageBody) {
      const plan = yield* entitlements.require(accountId, "testMail")
      const checked = checkTestMessageBody(body)
      if ("refused" in checked) return yield* Effect.fail(new InvalidTestMessage({ fields: checked.refused }))
      const { aliasId } = checked
      const address = yield* aliases.injectableAddress(accountId, aliasId)
      const limit = plan.testMessagesPerDay
      const decision = yield* limiter.hit(`test-mail:${accountId}`, [{ limit, seconds: 86_400 }])
      if (!decision.allowed) return yield* Effect.fail(new TestMessagesPerDayReached({ limit, retryAfter: decision.retryAfter }))
      const raw = body.kind === "raw" ? body.bytes : buildTestMessage(body.request, { to: address, date: yield* now })
      const [accepted] = yield* mailstore.accept({
        deliveries: [{ aliasId, accountId, recipient: address }],
        raw,
        source: "test",
        envelopeFrom: null,
        clientAddress: null,
        clientHelo: null
      })
      return {
        id: accepted!.id,
        aliasId,
        alias: address,
        source: "test" as const,
        processingStatus: "stub" as const,
        receivedAt: accepted!.receivedAt.toISOString(),
        expiresAt: accepted!.expiresAt.toISOString()
      }
    })

    return TestMail.of({ inject })
  }))
}
