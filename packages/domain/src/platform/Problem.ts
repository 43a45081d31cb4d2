/**
 * Every error answer of the API has the Problem shape of spec 7:
 * `{ error: { code, message, fields? } }`. Each status has one error class here; the
 * `code` says which rule refused the request. The classes are both the wire schema (for
 * the HttpApi contract and the OpenAPI document) and Respondable, so an error that escapes
 * an endpoint's declared list still answers in the same shape and never as a 500.
 */
import { Effect, Schema, SchemaTransformation } from "effect"
import { HttpServerResponse, HttpServerRespondable } from "effect/http"
import { HttpApiSchema } from "effect/http-api"

/** Field name -> reason code, for 422 answers. */
export const FieldReasons = Schema.Record(Schema.String, Schema.String)
export type FieldReasons = typeof FieldReasons.Type

export const ProblemBody = Schema.Struct({
  error: Schema.Struct({
    code: Schema.String,
    message: Schema.String,
    fields: Schema.optionalKey(FieldReasons)
  })
}).annotate({ identifier: "Problem" })
export type ProblemBody = typeof ProblemBody.Type

const problemFields = {
  code: Schema.String,
  message: Schema.String,
  fields: Schema.optionalKey(FieldReasons)
}

export const problemBody = (e: { readonly code: string; readonly message: string; readonly fields?: FieldReasons }): ProblemBody => ({
  error: e.fields === undefined ? { code: e.code, message: e.message } : { code: e.code, message: e.message, fields: e.fields }
})

export const problemResponse = (status: number, body: ProblemBody) =>
  HttpServerResponse.jsonUnsafe(body, { status })

/** Makes every instance of an error class answer as its Problem body with its status. */
const respondAs = (cls: { prototype: object }, status: number) => {
  Object.assign(cls.prototype, {
    [HttpServerRespondable.symbol](this: { code: string; message: string; fields?: FieldReasons }) {
      return Effect.succeed(problemResponse(status, problemBody(this)))
    }
  })
}

export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", problemFields, { httpApiStatus: 401 }) {
  static invalidToken(message = "The bearer token is malformed, expired, revoked or unknown.") {
    return new Unauthorized({ code: "invalid_token", message })
  }
  static authenticationRequired(message = "Sign in first: this request carries no valid session.") {
    return new Unauthorized({ code: "authentication_required", message })
  }
  static invalidCredentials() {
    return new Unauthorized({ code: "invalid_credentials", message: "The email or password is wrong." })
  }
}
respondAs(Unauthorized, 401)

export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", problemFields, { httpApiStatus: 403 }) {
  static insufficientScope(scope: string) {
    return new Forbidden({ code: "insufficient_scope", message: `This token lacks the "${scope}" scope.` })
  }
  static sessionRequired() {
    return new Forbidden({ code: "session_required", message: "This operation is for browser sessions only; bearer tokens are refused." })
  }
  static csrf() {
    return new Forbidden({ code: "invalid_csrf_token", message: "Send the bootstrap's csrfToken as the X-CSRF-Token header." })
  }
  static plan(entitlement: string) {
    return new Forbidden({ code: "plan_required", message: `Your plan does not include ${entitlement}.` })
  }
  static tokenSuspended() {
    return new Forbidden({ code: "token_suspended", message: "This token is suspended until the account regains Pro access." })
  }
}
respondAs(Forbidden, 403)

export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", problemFields, { httpApiStatus: 404 }) {
  static of(what: string) {
    return new NotFound({ code: "not_found", message: `${what} was not found.` })
  }
}
respondAs(NotFound, 404)

export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()("MethodNotAllowed", problemFields, { httpApiStatus: 405 }) {}
respondAs(MethodNotAllowed, 405)

export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", problemFields, { httpApiStatus: 409 }) {}
respondAs(Conflict, 409)

export class Gone extends Schema.TaggedError<Gone>()("Gone", problemFields, { httpApiStatus: 410 }) {}
respondAs(Gone, 410)

export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", problemFields, { httpApiStatus: 413 }) {}
respondAs(PayloadTooLarge, 413)

export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()("UnsupportedMediaType", problemFields, { httpApiStatus: 415 }) {}
respondAs(UnsupportedMediaType, 415)

export class ValidationFailed extends Schema.TaggedError<ValidationFailed>()("ValidationFailed", problemFields, { httpApiStatus: 422 }) {
  static withFields(fields: FieldReasons, message = "The request is not valid; see fields.") {
    return new ValidationFailed({ code: "validation_failed", message, fields })
  }
}
respondAs(ValidationFailed, 422)

/** `retryAfter` (seconds) becomes the Retry-After header; it is not part of the body. */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  ...problemFields,
  retryAfter: Schema.optionalKey(Schema.Int)
}, { httpApiStatus: 429 }) {}
respondAs(RateLimited, 429)

export class ServiceUnavailable extends Schema.TaggedError<ServiceUnavailable>()("ServiceUnavailable", problemFields, { httpApiStatus: 503 }) {}
respondAs(ServiceUnavailable, 503)

/** The wire form of an error class: its Problem body, decoded back into the class by clients. */
const asProblem = <C extends Schema.Top & (new(props: { code: string; message: string; fields?: FieldReasons }) => C["Type"])>(
  cls: C,
  status: number
) =>
  ProblemBody.pipe(
    Schema.decodeTo(
      Schema.toType(cls),
      SchemaTransformation.transform({
        decode: (body: ProblemBody) => new cls(body.error),
        encode: (e: any) => problemBody(e)
      })
    ),
    HttpApiSchema.status(status)
  )

/** The Problem-encoded error schemas endpoints declare. */
export const Errors = {
  Unauthorized: asProblem(Unauthorized, 401),
  Forbidden: asProblem(Forbidden, 403),
  NotFound: asProblem(NotFound, 404),
  Conflict: asProblem(Conflict, 409),
  Gone: asProblem(Gone, 410),
  PayloadTooLarge: asProblem(PayloadTooLarge, 413),
  UnsupportedMediaType: asProblem(UnsupportedMediaType, 415),
  ValidationFailed: asProblem(ValidationFailed, 422),
  RateLimited: asProblem(RateLimited, 429),
  ServiceUnavailable: asProblem(ServiceUnavailable, 503)
}

export type ApiError =
  | Unauthorized
  | Forbidden
  | NotFound
  | Conflict
  | Gone
  | PayloadTooLarge
  | UnsupportedMediaType
  | ValidationFailed
  | RateLimited
  | ServiceUnavailable
