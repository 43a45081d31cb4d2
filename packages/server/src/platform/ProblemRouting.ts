/**
 * What no endpoint answers still answers in the Problem shape: an unknown path (404), a known
 * path with the wrong method (405 with Allow), path parameters the router cannot read (422), an
 * oversized body (413), and any defect (500, logged with its cause, never shown to the client).
 */
import { BurnboxApi, problemBody, problemResponse } from "@burnbox/domain"
import { isRefusedText } from "@burnbox/store"
import { ByteSize, Cause, Effect, Option } from "effect"
import { HttpIncomingMessage, HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiError } from "effect/http-api"

interface Route {
  readonly method: string
  /** The path, each parameter a group. */
  readonly pattern: RegExp
  /** The parameters' names, in the order of the groups. */
  readonly params: ReadonlyArray<string>
}

const routes: ReadonlyArray<Route> = Object.values(BurnboxApi.groups).flatMap((group) =>
  Object.values(group.endpoints).map((endpoint) => ({
    method: endpoint.method,
    pattern: new RegExp(`^${endpoint.path.replace(/:[A-Za-z]+/g, "([^/]+)")}/?$`),
    params: [...endpoint.path.matchAll(/:([A-Za-z]+)/g)].map((match) => match[1]!)
  }))
)

/** The methods the API answers on a path, or none when the path is unknown. */
export const allowedMethods = (path: string): ReadonlyArray<string> =>
  [...new Set(routes.filter((route) => route.pattern.test(path)).map((route) => route.method))]

/** The longest path parameter the router reads (find-my-way's `maxParamLength`). */
const MaxParamLength = 100

const decodes = (text: string): boolean => {
  try {
    decodeURIComponent(text)
    return true
  } catch {
    return false
  }
}

/**
 * Why the router could not read the path parameters of `method`'s own route at `path`, by
 * parameter: not percent-encoding that decodes to text (`%zz`, a bare `%`, bytes that are not
 * UTF-8) or longer than it reads. The router then finds no route, though the path is one of
 * this method's: the request's parameter is what is wrong, as when its schema refuses it.
 */
export const unreadableParams = (method: string, path: string): Readonly<Record<string, string>> => {
  const reasons: Record<string, string> = {}
  for (const route of routes) {
    const values = route.method === method ? route.pattern.exec(path) : null
    if (values === null) continue
    route.params.forEach((name, i) => {
      const value = values[i + 1]!
      if (!decodes(value)) reasons[name] ??= "invalid_encoding"
      else if (decodeURIComponent(value).length > MaxParamLength) reasons[name] ??= "too_long"
    })
  }
  return reasons
}

const answer = (status: number, code: string, message: string, headers: Record<string, string> = {}) =>
  problemResponse(status, problemBody({ code, message })).pipe(HttpServerResponse.setHeaders(headers))

const isRouteNotFound = (error: unknown): boolean =>
  typeof error === "object" && error !== null && "reason" in error &&
  typeof (error as { reason: unknown }).reason === "object" &&
  (error as { reason: { _tag?: unknown } }).reason._tag === "RouteNotFound"

const isRequestParseError = (error: unknown): boolean =>
  typeof error === "object" && error !== null && "reason" in error &&
  (error as { reason: { _tag?: unknown } }).reason?._tag === "RequestParseError"

const isBodyTooLarge = (cause: Cause.Cause<unknown>): boolean =>
  Cause.pretty(cause).match(/maxBytes exceeded|BodyTooLarge/) !== null ||
  cause.reasons.some((r) => Cause.isDieReason(r) && HttpApiError.HttpApiPayloadTooLarge.is(r.defect))

/** The largest request body an endpoint reads; test-mail injection takes a whole raw message. */
export const MaxRequestBodyBytes = 1024 * 1024
export const MaxTestMailBodyBytes = 16 * 1024 * 1024

const bodyLimit = (url: string) => (url.startsWith("/api/v1/test/messages") ? MaxTestMailBodyBytes : MaxRequestBodyBytes)

/** The decoder answers an unsupported content type with a plain-text 415; give it the Problem shape. */
const problemFor415 = (response: HttpServerResponse.HttpServerResponse) =>
  response.status === 415 && !String(response.headers["content-type"] ?? "").includes("json")
    ? answer(415, "unsupported_media_type", "This content type is not accepted here; send application/json (or message/rfc822 where offered).")
    : response

export const ProblemRouting = HttpRouter.middleware((effect) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    Effect.provideService(effect, HttpIncomingMessage.MaxBodySize, ByteSize.bytes(bodyLimit(request.url)))
  ).pipe(Effect.map(problemFor415), Effect.catchCause((cause) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const failure = Option.getOrUndefined(Cause.findErrorOption(cause))
      if (failure !== undefined && isRouteNotFound(failure)) {
        const path = new URL(request.url, "http://x").pathname
        const unreadable = unreadableParams(request.method, path)
        if (Object.keys(unreadable).length > 0) {
          return problemResponse(422, problemBody({ code: "validation_failed", message: "The request is not valid; see fields.", fields: unreadable }))
        }
        const allowed = allowedMethods(path)
        if (allowed.length > 0) {
          return answer(405, "method_not_allowed", `${request.method} is not allowed here; use ${allowed.join(", ")}.`, {
            allow: allowed.join(", ")
          })
        }
        return answer(404, "not_found", `No resource at ${path}.`)
      }
      if (Cause.hasInterruptsOnly(cause)) return yield* Effect.failCause(cause)
      if (isBodyTooLarge(cause)) {
        return answer(413, "payload_too_large", `The request body is larger than ${bodyLimit(request.url)} bytes.`)
      }
      if (failure !== undefined && isRequestParseError(failure)) {
        return problemResponse(422, problemBody({ code: "validation_failed", message: "The request body could not be read.", fields: { body: "unreadable" } }))
      }
      // Text the database cannot hold (a NUL), wherever a handler stored or looked it up: the
      // statement failed, so nothing was written, and the request's text is what is wrong.
      if (cause.reasons.some((r) => Cause.isDieReason(r) && isRefusedText(r.defect))) {
        const field = request.method === "GET" || request.method === "DELETE" ? "query" : "body"
        return problemResponse(422, problemBody({ code: "validation_failed", message: "The request holds text that cannot be stored: a NUL character.", fields: { [field]: "invalid_text" } }))
      }
      yield* Effect.logError("request failed", cause)
      return answer(500, "internal_error", "Something went wrong on our side; it has been logged.")
    })
  )), { global: true })
