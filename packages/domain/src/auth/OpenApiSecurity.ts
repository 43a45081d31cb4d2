/**
 * How the OpenAPI document says who may call what (spec 5, decisions.md "Authentication"): the
 * bearer token, the browser session's cookie and its CSRF header as `components.securitySchemes`,
 * and each operation's `security` read from its `Access` annotation, so interactive docs can
 * authorize and generated clients send the right credentials.
 */
import { Context, Option } from "effect"
import { HttpApi, type HttpApiGroup, OpenApi } from "effect/http-api"
import { Access, Authentication, SessionCookie } from "./Access.ts"

export const SecuritySchemes = {
  bearer: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "bbx_pat_...",
    description: "An API token (`Authorization: Bearer bbx_pat_...`); each operation names the scope it needs in `x-burnbox-scope`."
  },
  session: {
    type: "apiKey",
    in: "cookie",
    name: SessionCookie,
    description: "The browser session cookie set by POST /auth/signup and /auth/login."
  },
  csrf: {
    type: "apiKey",
    in: "header",
    name: "X-CSRF-Token",
    description: "With a session, every state-changing call sends the `csrfToken` of GET /bootstrap in this header."
  }
} as const

type Requirement = Record<string, Array<string>>

const isReadOnly = (method: string) => method === "GET" || method === "HEAD"

/** A bearer token with the scope, or a session (with its CSRF header when the call changes state); session-only operations take the session alone. */
export const securityOf = (scope: string, method: string): Array<Requirement> => {
  const session: Requirement = isReadOnly(method) ? { session: [] } : { session: [], csrf: [] }
  return scope === "session" ? [session] : [{ bearer: [] }, session]
}

/** The OpenAPI path of an endpoint's route (`/aliases/:id` is `/aliases/{id}`). */
const openApiPath = (path: string) => path.replace(/:(\w+)/g, "{$1}")

/**
 * `api` with its OpenAPI document carrying the security schemes, each operation's requirement
 * (none for the public ones: sign-up, sign-in), and `servers`.
 */
export const withOpenApiSecurity = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>,
  servers: ReadonlyArray<{ readonly url: string; readonly description?: string }>
): HttpApi.HttpApi<Id, Groups> => {
  const operations = new Map<string, { readonly security: Array<Requirement>; readonly scope: string | undefined }>()
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, middleware, mergedAnnotations }) => {
      const access = Option.filter(Context.getOption(mergedAnnotations, Access), () => [...middleware].some((service) => service.key === Authentication.key))
      operations.set(`${endpoint.method.toLowerCase()} ${openApiPath(endpoint.path)}`, {
        security: Option.match(access, { onNone: () => [], onSome: ({ scope }) => securityOf(scope, endpoint.method) }),
        scope: Option.match(access, { onNone: () => undefined, onSome: ({ scope }) => scope })
      })
    }
  })
  const transform = (spec: Record<string, any>): Record<string, any> => {
    const paths: Record<string, Record<string, Record<string, unknown>>> = spec["paths"] ?? {}
    for (const [path, methods] of Object.entries(paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        const found = operations.get(`${method} ${path}`)
        if (found === undefined) continue
        operation["security"] = found.security
        if (found.scope !== undefined) operation["x-burnbox-scope"] = found.scope
      }
    }
    return { ...spec, components: { ...spec["components"], securitySchemes: { ...spec["components"]?.securitySchemes, ...SecuritySchemes } } }
  }
  return api.annotateMerge(OpenApi.annotations({ transform, servers }))
}
