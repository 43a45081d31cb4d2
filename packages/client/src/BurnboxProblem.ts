/**
 * Every failure of the client, for both faces: a Problem (spec 7) the server answered, with its
 * HTTP status, `code`, message and per-field reasons, or one the client met itself (status 0):
 * `timeout` (nothing arrived in time), `network_error` (no answer), `unexpected_response` (an
 * answer that is not the contract's).
 */
import { Effect, Schema } from "effect"
import { HttpClientError } from "effect/http"
import { type ApiError, FieldReasons, ProblemBody } from "@burnbox/domain/platform/Problem"

export class BurnboxProblem extends Schema.TaggedError<BurnboxProblem>()("BurnboxProblem", {
  /** The HTTP status of the answer; 0 when the client raised the problem itself. */
  status: Schema.Int,
  /** Which rule refused: `not_found`, `validation_failed`, `invalid_token`, ..., `timeout`. */
  code: Schema.String,
  message: Schema.String,
  /** Field name -> reason code (`required`, `invalid_type`, `https_required`...), on 422 answers. */
  fields: Schema.optionalKey(FieldReasons)
}) {
  /** The server's explanation (the Problem body's `message`). */
  get detail(): string {
    return this.message
  }

  static timeout(message: string): BurnboxProblem {
    return new BurnboxProblem({ status: 0, code: "timeout", message })
  }

  static notFound(what: string): BurnboxProblem {
    return new BurnboxProblem({ status: 404, code: "not_found", message: `${what} was not found.` })
  }
}

export const isBurnboxProblem = (u: unknown): u is BurnboxProblem => u instanceof BurnboxProblem

/** The status each Problem class of the contract answers with (`httpApiStatus`). */
const statusOf: Record<ApiError["_tag"], number> = {
  Unauthorized: 401,
  Forbidden: 403,
  NotFound: 404,
  Conflict: 409,
  Gone: 410,
  PayloadTooLarge: 413,
  UnsupportedMediaType: 415,
  ValidationFailed: 422,
  RateLimited: 429,
  ServiceUnavailable: 503
}

const isApiError = (u: unknown): u is ApiError =>
  typeof u === "object" && u !== null && "_tag" in u && typeof u._tag === "string" && u._tag in statusOf

const fromBody = (status: number, body: ProblemBody): BurnboxProblem =>
  new BurnboxProblem(body.error.fields === undefined
    ? { status, code: body.error.code, message: body.error.message }
    : { status, code: body.error.code, message: body.error.message, fields: body.error.fields })

const decodeProblemBody = Schema.decodeUnknownEffect(ProblemBody)

/**
 * Turns whatever a derived-client call failed with into a BurnboxProblem: the contract's Problem
 * classes keep their code and fields; an answer with an undeclared status is still read as a
 * Problem body when it is one.
 */
export const toProblem = (error: unknown): Effect.Effect<never, BurnboxProblem> => {
  if (error instanceof BurnboxProblem) return Effect.fail(error)
  if (isApiError(error)) {
    return Effect.fail(fromBody(statusOf[error._tag], { error }))
  }
  if (HttpClientError.isHttpClientError(error)) {
    const response = error.response
    if (response === undefined) {
      return Effect.fail(new BurnboxProblem({ status: 0, code: "network_error", message: error.message }))
    }
    return response.json.pipe(
      Effect.flatMap(decodeProblemBody),
      Effect.map((body) => fromBody(response.status, body)),
      Effect.orElseSucceed(() =>
        new BurnboxProblem({ status: response.status, code: "unexpected_response", message: error.message })
      ),
      Effect.flatMap(Effect.fail)
    )
  }
  const message = error instanceof Error ? error.message : String(error)
  return Effect.fail(new BurnboxProblem({ status: 0, code: "unexpected_response", message }))
}

/** Every failure of `effect` as a BurnboxProblem. */
export const problems = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, BurnboxProblem, R> =>
  Effect.catch(effect, toProblem)
