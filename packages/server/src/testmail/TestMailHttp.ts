import { BurnboxApi, CurrentPrincipal, type TestMessageInput } from "@burnbox/domain"
import { BurnboxConfig, TestMail, type TestMessageBody } from "@burnbox/store"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { addResponseHeaders } from "../platform/Authentication.ts"
import { withProblems } from "../platform/ProblemMapping.ts"

const isJsonInput = (payload: unknown): payload is TestMessageInput =>
  typeof payload === "object" && payload !== null && !(payload instanceof Uint8Array) && "subject" in payload

/** The request as the use case takes it: the JSON input, or the raw message with the query's alias. */
const bodyOf = (payload: TestMessageInput | Uint8Array, aliasId: number | undefined): TestMessageBody =>
  isJsonInput(payload) ? { kind: "json", request: payload } : { kind: "raw", bytes: payload as Uint8Array, aliasId }

/** POST /test/messages (spec 2.19, 4.8): through the same store and pipeline as SMTP, never over SMTP. */
export const TestMailHttp = HttpApiBuilder.group(BurnboxApi, "testMail", Effect.fn(function*(handlers) {
  const testMail = yield* TestMail
  const config = yield* BurnboxConfig

  return handlers.handle("inject", ({ payload, query }) =>
    withProblems(Effect.gen(function*() {
      const principal = yield* CurrentPrincipal
      const injected = yield* testMail.inject(principal.accountId, bodyOf(payload, query.aliasId))
      yield* addResponseHeaders({ location: `${config.baseUrl}/messages/${injected.id}` })
      return injected
    })))
}))
