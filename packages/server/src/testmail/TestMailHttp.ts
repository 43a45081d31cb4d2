import { BurnboxApi, CurrentPrincipal, Forbidden, RateLimited, type TestMessageInput, TestMessageLimits, ValidationFailed } from "@burnbox/domain"
import { buildTestMessage, validateTestMessage } from "@burnbox/domain/mail/index"
import { Accounts, Aliases, BurnboxConfig, Mailstore, RateLimiter } from "@burnbox/store"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { addResponseHeaders } from "../platform/Authentication.ts"
import { withProblems } from "../platform/ProblemMapping.ts"
import { currentAccount } from "../platform/CurrentAccount.ts"
import { now } from "@burnbox/store/platform/Time"

const isJsonInput = (payload: unknown): payload is TestMessageInput =>
  typeof payload === "object" && payload !== null && !(payload instanceof Uint8Array) && "subject" in payload

/** POST /test/messages (spec 2.19, 4.8): through the same store and pipeline as SMTP, never over SMTP. */
export const TestMailHttp = HttpApiBuilder.group(BurnboxApi, "testMail", Effect.fn(function*(handlers) {
  const accounts = yield* Accounts
  const aliases = yield* Aliases
  const mailstore = yield* Mailstore
  const limiter = yield* RateLimiter
  const config = yield* BurnboxConfig

  return handlers.handle("inject", ({ payload, query }) =>
    withProblems(Effect.gen(function*() {
      const principal = yield* CurrentPrincipal
      const account = yield* currentAccount(accounts).pipe(Effect.provideService(CurrentPrincipal, principal))
      const limit = account.entitlements.testMessagesPerDay
      if (limit <= 0) return yield* Effect.fail(Forbidden.plan("test-mail injection (Pro)"))
      const body: { raw?: Uint8Array; json?: TestMessageInput } = isJsonInput(payload) ? { json: payload } : { raw: payload as Uint8Array }
      const aliasId = body.json?.aliasId ?? query.aliasId
      if (aliasId === undefined) return yield* Effect.fail(ValidationFailed.withFields({ aliasId: "required" }))
      if (body.raw !== undefined) {
        if (body.raw.byteLength === 0) return yield* Effect.fail(ValidationFailed.withFields({ body: "empty" }))
        if (body.raw.byteLength > TestMessageLimits.rawBytes) return yield* Effect.fail(ValidationFailed.withFields({ body: "too_large" }))
      } else if (body.json !== undefined) {
        const fields = validateTestMessage(body.json)
        if (fields !== undefined) return yield* Effect.fail(ValidationFailed.withFields(fields))
      }
      const address = yield* aliases.injectableAddress(account.id, aliasId)
      const decision = yield* limiter.hit(`test-mail:${account.id}`, [{ limit, seconds: 86_400 }])
      if (!decision.allowed) {
        return yield* Effect.fail(new RateLimited({
          code: "test_messages_per_day_reached",
          message: `At most ${limit} test messages a day; retry in ${decision.retryAfter} s.`,
          retryAfter: decision.retryAfter
        }))
      }
      const raw = body.raw ?? buildTestMessage(body.json!, { to: address, date: yield* now })
      const [accepted] = yield* mailstore.accept({
        deliveries: [{ aliasId, accountId: account.id, recipient: address }],
        raw,
        source: "test",
        envelopeFrom: null,
        clientAddress: null,
        clientHelo: null
      })
      yield* addResponseHeaders({ location: `${config.baseUrl}/messages/${accepted!.id}` })
      return {
        id: accepted!.id,
        aliasId,
        alias: address,
        source: "test" as const,
        processingStatus: "stub" as const,
        receivedAt: accepted!.receivedAt.toISOString(),
        expiresAt: accepted!.expiresAt.toISOString()
      }
    })))
}))
