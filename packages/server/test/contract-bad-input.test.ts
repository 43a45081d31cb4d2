/**
 * Bad input on every operation of the served contract (spec 4, 7): the OpenAPI document the
 * server serves names the operations, their path and query parameters and their body schemas;
 * each operation gets a fixed set of malformed requests built from them (no randomness). Every
 * answer must come within 10 s (no request hangs), below 500, and, when it is a 4xx, in the Problem shape
 * with a status the document declares for the operation (or 404 for a path that names nothing,
 * 413 for an oversized body, 415 for a content type the operation does not read). At the end the
 * service still answers and the injected message reads back unchanged, detail and raw bytes.
 *
 * Every operation is reached, none is skipped: bearer-token operations with a token holding every
 * scope, Session-only ones (a bearer token cannot reach them) with a browser session and its CSRF
 * header, sign-up and login with no credentials. Operations that take no input at all (GET /me,
 * /bootstrap, /storage, /domains, /tags, /tokens, /webhooks, /notices, /push/settings) get only
 * the query parameters no operation declares, which every operation gets. Operations that
 * destroy what they name (DELETE, burn, logout) get spare fixtures of their own, so a request
 * that is odd but valid (a body on a bodyless DELETE) cannot take away what the other operations
 * need. `messages-bad-input.test.ts` checks the exact answers of the messages group; this file
 * checks the shape of every answer of every operation.
 */
import { BurnboxApi, Scopes } from "@burnbox/domain"
import { requiredAccess } from "@burnbox/server/platform/Authentication"
import { type Answer, claimAlias, deliver, expectProblem, type Harness, type Relay, type Session, startHarness, startRelay } from "@burnbox/testkit"
import { Effect, Option, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

/** The part of JSON Schema the served document uses. */
interface JsonSchema {
  readonly $ref?: string
  readonly type?: string
  readonly enum?: ReadonlyArray<unknown>
  readonly anyOf?: ReadonlyArray<JsonSchema>
  readonly allOf?: ReadonlyArray<JsonSchema>
  readonly properties?: Readonly<Record<string, JsonSchema>>
  readonly required?: ReadonlyArray<string>
  readonly maxLength?: number
}

interface OpenApiParameter {
  readonly name: string
  readonly in: "path" | "query" | "header" | "cookie"
  readonly schema: JsonSchema
}

interface OpenApiOperation {
  readonly operationId: string
  readonly parameters?: ReadonlyArray<OpenApiParameter>
  readonly requestBody?: { readonly content: Readonly<Record<string, { readonly schema: JsonSchema }>> }
  readonly responses: Readonly<Record<string, unknown>>
}

interface OpenApiDocument {
  readonly paths: Readonly<Record<string, Readonly<Record<string, OpenApiOperation>>>>
  readonly components: { readonly schemas: Readonly<Record<string, JsonSchema>> }
}

/** One operation of the document, with who may call it. */
interface Operation {
  readonly method: string
  /** The document's path, `/api/v1/messages/{id}`. */
  readonly template: string
  /** The same without the `/api/v1` prefix, as the tables below name it. */
  readonly route: string
  readonly spec: OpenApiOperation
  /** The scope a bearer token needs, `session` (browser session only), or none (sign-up, login). */
  readonly access: string | undefined
}

/** One malformed request. `path` is the whole path with its query, from the origin. */
interface Variant {
  readonly label: string
  readonly path: string
  readonly rawBody?: string | Uint8Array
  readonly headers?: Record<string, string>
}

/**
 * How long an answer may take: generous, far past what a busy machine costs a correct service,
 * far short of a request that hangs (what this catches).
 */
const AnswerWithinMs = 10_000
const huge = "99999999999999999999"
const maxBodyBytes = 1024 * 1024
const maxTestMailBodyBytes = 16 * 1024 * 1024

let h: Harness
let doc: OpenApiDocument
let owner: Session
/** Signed in only to be signed out by the logout variants. */
let leaver: Session
let token: string
/** The ids the requests name; `spare` ones for the operations that destroy what they name. */
let ids: {
  readonly alias: number
  readonly spareAlias: number
  readonly kept: number
  readonly spareMessage: number
  readonly attachment: number
  readonly tag: number
  readonly spareTag: number
  readonly spareToken: number
  readonly webhook: number
  readonly spareWebhook: number
  readonly delivery: number
  readonly rule: number
  readonly spareRule: number
}
/** The injected message as it read before the bad input: its detail and raw bytes. */
let keptBefore: { readonly detail: unknown; readonly raw: string }
let relay: Relay

const dns: Record<string, ReadonlyArray<string>> = { "hooks.example.com": ["93.184.216.34"] }

beforeAll(async () => {
  // A relay for the desk's sends: what it accepts is not looked at, only that every answer is a declared 4xx or success.
  relay = await startRelay()
  h = await startHarness(
    { outboundSmtpUrl: Option.some(Redacted.make(relay.url)) },
    undefined,
    { seed: 4242, targetResolver: (host) => Effect.succeed(dns[host] ?? []) }
  )
  owner = await h.signup({ plan: "pro" })
  leaver = await h.signup({ plan: "pro" })
  // About 1,850 requests in one minute of the harness clock: lift the per-token limit.
  await h.query(`UPDATE accounts SET overrides = '{"requestsPerMinute": 1000000, "requestsPerDay": 100000000}' WHERE id = $1`, [owner.accountId])
  token = await h.createToken(owner, Scopes, "fuzz")
  await h.createToken(owner, ["read"], "spare")
  const tokens = await h.request<{ items: Array<{ id: number; name: string }> }>("/tokens", { session: owner })
  const spareToken = tokens.body.items.find((t) => t.name === "spare")!.id

  const who = { token }
  const keptAlias = (await claimAlias(h, who)).id
  const alias = (await claimAlias(h, who)).id
  const spareAlias = (await claimAlias(h, who)).id
  // A protected desk (as `burnbox admin desk grant` makes it), so the desk operations read their input.
  await h.query("INSERT INTO desks (alias_id, account_id, granted_at) VALUES ($1, $2, now())", [alias, owner.accountId])
  const [kept] = await deliver(h, who, keptAlias, 1, {
    subject: "kept as it is",
    text: "your code is 482913",
    html: "<p>code <b>482913</b> <img src=\"https://example.com/a.png\"></p>",
    attachments: [{ filename: "note.txt", contentType: "text/plain", contentBase64: Buffer.from("note").toString("base64") }]
  })
  const [spareMessage] = await deliver(h, who, keptAlias, 1, { subject: "spare" })
  const detail = await h.request(`/messages/${kept}`, who)
  const attachment = detail.body.attachments[0].id as number

  const tag = async (name: string) => {
    const answer = await h.request<{ id: number }>("/tags", { method: "POST", session: owner, body: { name } })
    expect(answer.status, answer.text).toBe(201)
    return answer.body.id
  }
  const webhook = async (name: string) => {
    const answer = await h.request("/webhooks", { method: "POST", ...who, body: { name, url: "https://hooks.example.com/in", subscription: { mode: "all" } } })
    expect(answer.status, answer.text).toBe(201)
    return answer.body.webhook.id as number
  }
  const rule = async (name: string) => {
    const answer = await h.request("/rules", { method: "POST", ...who, body: { name, match: { subject: "never sent" }, actions: [{ type: "star" }] } })
    expect(answer.status, answer.text).toBe(201)
    return answer.body.id as number
  }
  const hook = await webhook("fuzz")
  const queued = await h.request(`/webhooks/${hook}/test`, { method: "POST", ...who })
  expect(queued.status, queued.text).toBe(202)
  ids = {
    alias,
    spareAlias,
    kept: kept!,
    spareMessage: spareMessage!,
    attachment,
    tag: await tag("fuzz"),
    spareTag: await tag("spare"),
    spareToken,
    webhook: hook,
    spareWebhook: await webhook("spare"),
    delivery: queued.body.delivery.id,
    rule: await rule("fuzz"),
    spareRule: await rule("spare")
  }
  keptBefore = await readKept()
  doc = (await h.request<OpenApiDocument>("/api/v1/openapi.json")).body
}, 60_000)
afterAll(async () => {
  await h?.close()
  await relay?.stop()
})

const readKept = async () => {
  const detail = await h.request(`/messages/${ids.kept}`, { token })
  const raw = await h.request(`/messages/${ids.kept}/raw`, { token })
  expect(detail.status, detail.text).toBe(200)
  expect(raw.status, raw.text).toBe(200)
  return { detail: detail.body, raw: raw.text }
}

// --- The operations ---------------------------------------------------------------------------

const methods = ["get", "put", "post", "delete", "patch"] as const

/** The access each endpoint of the API declares, keyed `METHOD /api/v1/path/{param}`. */
const declaredAccess = (): ReadonlyMap<string, string | undefined> =>
  new Map(Object.values(BurnboxApi.groups).flatMap((group) =>
    Object.values(group.endpoints).map((endpoint) => [
      `${endpoint.method} ${endpoint.path.replace(/:([A-Za-z]+)/g, "{$1}")}`,
      requiredAccess(endpoint, group)?.scope
    ] as const)
  ))

const operations = (): ReadonlyArray<Operation> => {
  const access = declaredAccess()
  return Object.entries(doc.paths).flatMap(([template, item]) =>
    methods.filter((method) => item[method] !== undefined).map((method): Operation => {
      const key = `${method.toUpperCase()} ${template}`
      if (!access.has(key)) throw new Error(`${key} is served but not declared by BurnboxApi`)
      return { method: method.toUpperCase(), template, route: template.replace(/^\/api\/v1/, ""), spec: item[method]!, access: access.get(key) }
    })
  )
}

/** Operations that destroy what their path names: they get the spare fixtures. */
const destroys = (op: Operation) => op.method === "DELETE" || op.route.endsWith("/burn") || op.route === "/auth/logout"

/** The id each path parameter takes when it is not the one being made bad. */
const validParam = (op: Operation, name: string): string => {
  const spare = destroys(op)
  const resource = op.route.split("/")[1]
  if (name === "messageId") return String(ids.kept)
  if (name === "attachmentId") return String(ids.attachment)
  // No share, invitation or export exists in this file: any id answers 404.
  if (name === "shareId" || resource === "shares" || resource === "exports") return "1"
  if (op.route.startsWith("/webhooks/deliveries/")) return String(ids.delivery)
  // No push subscription exists in this file: any id answers 404; a mailbox's preference takes the alias.
  if (op.route.startsWith("/push/subscriptions/")) return "1"
  if (op.route.startsWith("/push/aliases/")) return String(ids.alias)
  switch (resource) {
    case "tokens":
      return String(ids.spareToken)
    case "tags":
      return String(spare ? ids.spareTag : ids.tag)
    case "aliases":
      return String(spare ? ids.spareAlias : ids.alias)
    case "messages":
      return String(spare ? ids.spareMessage : ids.kept)
    case "webhooks":
      return String(spare ? ids.spareWebhook : ids.webhook)
    case "desk-mail":
      return String(ids.alias)
    case "rules":
      return String(spare ? ids.spareRule : ids.rule)
  }
  throw new Error(`no fixture for {${name}} of ${op.method} ${op.route}`)
}

const pathParams = (op: Operation) => (op.spec.parameters ?? []).filter((p) => p.in === "path").map((p) => p.name)
const queryParams = (op: Operation) => (op.spec.parameters ?? []).filter((p) => p.in === "query").map((p) => p.name)

const fillPath = (op: Operation, bad: Readonly<Record<string, string>> = {}) =>
  op.template.replace(/\{([A-Za-z]+)\}/g, (_, name: string) => bad[name] ?? validParam(op, name))

/**
 * A valid JSON body of each operation that reads one: the malformed bodies are made from it, one
 * change at a time. Valid, not harmless: most are refused later (an unknown reservation, a wrong
 * password), the others change only fixtures that nothing else checks.
 */
const validBodies = (): Readonly<Record<string, unknown>> => ({
  "POST /auth/signup": { email: "fuzz.signup@example.com", password: "correct horse battery" },
  "POST /auth/login": { email: "nobody@example.com", password: "not the password" },
  "POST /tokens": { name: "fuzz", scopes: ["read"] },
  "PUT /mailbox/density": { density: "default" },
  "POST /tags": { name: "fuzz new", color: "#AABBCC" },
  "PATCH /tags/{id}": { name: "fuzz", color: null },
  "POST /aliases": { aliasId: 1, reservationToken: "not-a-reservation", label: null, note: null, selfDestructAt: null },
  "POST /aliases/candidates": { domainId: 1, style: "numeric" },
  "DELETE /aliases/candidates": { reservationToken: "not-a-reservation" },
  "POST /aliases/candidates/release": { reservationToken: "not-a-reservation" },
  "PATCH /aliases/{id}": { label: "fuzz", note: null },
  "PUT /aliases/{id}/timer": { selfDestructAt: "2099-01-01T00:00:00Z" },
  "POST /aliases/{id}/shares": { email: "nobody@example.com", role: "viewer" },
  "PATCH /aliases/{id}/shares/{shareId}": { role: "viewer" },
  "PATCH /messages/{id}": { isRead: false },
  "POST /messages/bulk": { ids: [ids.kept], action: "mark_unread" },
  "PUT /messages/{id}/remote-images/preference": { alwaysLoad: false },
  "POST /test/messages": { aliasId: ids.alias, from: "Fuzz <fuzz@example.com>", subject: "fuzz", text: "hello" },
  "POST /exports": { aliasId: ids.alias },
  "POST /webhooks": { name: "fuzz", url: "https://hooks.example.com/fuzz", subscription: { mode: "label", label: "fuzz" } },
  "PATCH /webhooks/{id}": { name: "fuzz", subscription: { mode: "label", label: "fuzz" } },
  "POST /desk-mail/{aliasId}": { to: "fuzz@example.com", subject: "fuzz", body: "hello", message_id: null },
  "POST /rules": { name: "fuzz", match: { subject: "fuzz" }, actions: [{ type: "star" }] },
  "PATCH /rules/{id}": { name: "fuzz", actions: [{ type: "mark_read" }] },
  "PUT /push/settings": { enabled: false },
  "POST /push/subscriptions": {
    endpoint: "https://push.example.com/fuzz",
    keys: { p256dh: "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM", auth: "tBHItJI5svbpez7KI4CCXg" }
  },
  "PUT /push/aliases/{id}": { enabled: false }
})

/** A small valid raw message, for operations that also read `message/rfc822`. */
const rawMessage = "From: Fuzz <fuzz@example.com>\r\nTo: someone@burnbox.test\r\nSubject: raw fuzz\r\n\r\nhello\r\n"

// --- Schemas ---------------------------------------------------------------------------------

const resolve = (schema: JsonSchema): JsonSchema =>
  schema.$ref === undefined ? schema : resolve(doc.components.schemas[schema.$ref.replace("#/components/schemas/", "")]!)

/** The JSON types a schema admits (`integer` counted as `number`). */
const typesOf = (schema: JsonSchema): ReadonlySet<string> => {
  const s = resolve(schema)
  const types = new Set<string>()
  if (s.type !== undefined) types.add(s.type === "integer" ? "number" : s.type)
  for (const member of [...(s.anyOf ?? []), ...(s.allOf ?? [])]) for (const t of typesOf(member)) types.add(t)
  return types
}

/** The object a body schema describes (the object member of `object | null`). */
const objectOf = (schema: JsonSchema): JsonSchema | undefined => {
  const s = resolve(schema)
  if (s.properties !== undefined) return s
  for (const member of s.anyOf ?? []) {
    const found = objectOf(member)
    if (found !== undefined) return found
  }
  return undefined
}

const maxLengthOf = (schema: JsonSchema): number | undefined => {
  const s = resolve(schema)
  return s.maxLength ?? [...(s.anyOf ?? []), ...(s.allOf ?? [])].map(maxLengthOf).find((m) => m !== undefined)
}

/** A value of a JSON type the schema does not admit. */
const wrongTypeFor = (schema: JsonSchema): unknown => {
  const types = typesOf(schema)
  const candidates: ReadonlyArray<readonly [string, unknown]> = [
    ["number", 12345],
    ["string", "wrong type"],
    ["boolean", true],
    ["array", [1, "two"]],
    ["object", { nested: "object" }]
  ]
  return (candidates.find(([type]) => !types.has(type)) ?? candidates[0]!)[1]
}

type Path = ReadonlyArray<string | number>

/** The string values of a JSON value, at any depth, with where they are. */
const stringLeaves = (value: unknown, at: Path = []): ReadonlyArray<Path> =>
  typeof value === "string"
    ? [at]
    : Array.isArray(value)
    ? value.flatMap((item, i) => stringLeaves(item, [...at, i]))
    : typeof value === "object" && value !== null
    ? Object.entries(value).flatMap(([key, item]) => stringLeaves(item, [...at, key]))
    : []

const setAt = (value: unknown, at: Path, replacement: unknown): unknown => {
  if (at.length === 0) return replacement
  const [head, ...rest] = at
  const copy: any = Array.isArray(value) ? [...value] : { ...(value as object) }
  copy[head!] = setAt(copy[head!], rest, replacement)
  return copy
}

/**
 * The valid string at `at` with `odd` put after its first character, so that it still passes what
 * a pattern checks (an email keeps its `@`) and reaches further; `a<odd>b` where there is none.
 */
const within = (value: unknown, at: Path, odd: string): string => {
  const valid = at.reduce<any>((node, key) => node?.[key], value)
  return typeof valid === "string" && valid.length > 0 ? `${valid.slice(0, 1)}${odd}${valid.slice(1)}` : `a${odd}b`
}

const without = (value: object, key: string) => Object.fromEntries(Object.entries(value).filter(([k]) => k !== key))

// --- The variants ----------------------------------------------------------------------------

const json = (label: string, path: string, body: unknown, contentType = "application/json"): Variant => ({
  label,
  path,
  rawBody: JSON.stringify(body),
  headers: { "content-type": contentType }
})
const raw = (label: string, path: string, rawBody: string | Uint8Array, contentType?: string): Variant => ({
  label,
  path,
  rawBody,
  ...(contentType === undefined ? {} : { headers: { "content-type": contentType } })
})

/** Path ids that name nothing: not digits, zero, negative, past any id, odd bytes and encodings. */
const badPathValues: ReadonlyArray<readonly [label: string, value: string]> = [
  ["letters", "abc"],
  ["zero", "0"],
  ["negative", "-1"],
  ["huge", huge],
  ["10 KB of digits", "1".repeat(10 * 1024)],
  ["past int4", "2147483648"],
  ["fraction", "1.5"],
  ["exponent", "1e3"],
  ["inner space", "1%202"],
  ["space", "%20"],
  ["unicode", "%C3%A9"],
  ["emoji", "%F0%9F%94%A5"],
  ["NUL", "%00"],
  ["lone surrogate (CESU bytes)", "%ED%A0%80"],
  ["bare percent", "%"],
  ["bad percent escape", "%zz"],
  ["encoded slash", "1%2F2"]
]

const pathVariants = (op: Operation): ReadonlyArray<Variant> =>
  pathParams(op).flatMap((name) =>
    badPathValues.map(([label, value]) => ({ label: `path ${name}: ${label}`, path: fillPath(op, { [name]: value }) }))
  )

/** Bad values of a query parameter: wrong types, empty, overlong, NUL, odd bytes and encodings. */
const badQueryValues: ReadonlyArray<readonly [label: string, value: string]> = [
  ["letters", "abc"],
  ["zero", "0"],
  ["negative", "-1"],
  ["fraction", "1.5"],
  ["huge", huge],
  ["boolean word", "TRUE"],
  ["empty", ""],
  ["10 KB", "x".repeat(10 * 1024)],
  ["NUL", "%00"],
  ["inner NUL", "a%00b"],
  ["lone surrogate (CESU bytes)", "%ED%A0%80"],
  ["bare percent", "%"],
  ["emoji", "%F0%9F%94%A5"]
]

/** The body the query variants go with: the operation's raw body when it reads one (its query matters for it). */
const bodyForQuery = (op: Operation): Pick<Variant, "rawBody" | "headers"> => {
  const content = op.spec.requestBody?.content ?? {}
  if (content["message/rfc822"] !== undefined) return { rawBody: rawMessage, headers: { "content-type": "message/rfc822" } }
  const body = validBodies()[`${op.method} ${op.route}`]
  return content["application/json"] !== undefined ? { rawBody: JSON.stringify(body), headers: { "content-type": "application/json" } } : {}
}

const queryVariants = (op: Operation): ReadonlyArray<Variant> => {
  const base = fillPath(op)
  const body = bodyForQuery(op)
  /** The query the operation needs for the body it is sent with (a raw message needs its alias). */
  const needed = (name: string) => (body.headers?.["content-type"] === "message/rfc822" && name !== "aliasId" ? `aliasId=${ids.alias}&` : "")
  return queryParams(op).flatMap((name) => [
    ...badQueryValues.map(([label, value]) => ({ label: `query ${name}: ${label}`, path: `${base}?${needed(name)}${name}=${value}`, ...body })),
    { label: `query ${name}: repeated`, path: `${base}?${needed(name)}${name}=1&${name}=1`, ...body }
  ])
}

/** Query parameters no operation declares: ignored or refused, never a failure. */
const strayQueries: ReadonlyArray<readonly [label: string, query: string]> = [
  ["unknown parameter with NUL", "unknown=%00"],
  ["unknown parameter of 10 KB", `unknown=${"x".repeat(10 * 1024)}`],
  ["bad percent escapes", "%zz=%zz&%=%"],
  ["__proto__", "__proto__=1&constructor=x"]
]

const strayQueryVariants = (op: Operation): ReadonlyArray<Variant> => {
  const body = bodyForQuery(op)
  const needed = body.headers?.["content-type"] === "message/rfc822" ? `aliasId=${ids.alias}&` : ""
  return strayQueries.map(([label, query]) => ({ label: `query: ${label}`, path: `${fillPath(op)}?${needed}${query}`, ...body }))
}

/** Text that is not JSON, or not JSON this service reads. */
const notJson: ReadonlyArray<readonly [label: string, text: string]> = [
  ["invalid JSON", "{"],
  ["truncated JSON", "{\"a\":"],
  ["single quotes", "{'a': 1}"],
  ["empty body", ""],
  ["only whitespace", " \n\t "],
  ["NaN", "NaN"],
  ["deep nesting", `${"[".repeat(100_000)}${"]".repeat(100_000)}`],
  ["lone surrogate escape as the body", "\"\\ud800\""]
]

const jsonBodyVariants = (op: Operation): ReadonlyArray<Variant> => {
  const schema = op.spec.requestBody?.content["application/json"]?.schema
  if (schema === undefined) return []
  const key = `${op.method} ${op.route}`
  const valid = validBodies()[key]
  if (valid === undefined) throw new Error(`${key} reads a JSON body: add a valid one to validBodies`)
  const path = fillPath(op)
  const object = objectOf(schema)
  const properties = Object.entries(object?.properties ?? {})
  const validText = JSON.stringify(valid)
  const limit = op.route === "/test/messages" ? maxTestMailBodyBytes : maxBodyBytes

  /** Where a string can go: every string of the valid body, and every string property it leaves out. */
  const stringPlaces: ReadonlyArray<readonly [Path, number | undefined]> = [
    ...stringLeaves(valid).map((at) => [at, at.length === 1 ? maxLengthOf(object!.properties![at[0] as string]!) : undefined] as const),
    ...properties
      .filter(([name, s]) => typesOf(s).has("string") && !(typeof valid === "object" && valid !== null && name in valid))
      .map(([name, s]) => [[name], maxLengthOf(s)] as const)
  ]
  const named = (at: Path) => at.join(".")
  const invalidUtf8 = (at: Path) => {
    const [before, after] = JSON.stringify(setAt(valid, at, "\u0001")).split("\\u0001") as [string, string]
    return Buffer.concat([Buffer.from(before), Buffer.from([0x61, 0xed, 0xa0, 0x80, 0xff, 0x62]), Buffer.from(after)])
  }

  return [
    ...notJson.map(([label, text]) => raw(`body: ${label}`, path, text, "application/json")),
    raw("body: valid JSON then garbage", path, `${validText}x`, "application/json"),
    raw("body: byte order mark", path, `\uFEFF${validText}`, "application/json"),
    // JSON of the wrong type
    ...([["array", [valid]], ["string", "body"], ["number", 1], ["null", null], ["boolean", true]] as const).map(([label, body]) =>
      json(`body: JSON ${label}`, path, body)
    ),
    // Fields missing, of the wrong type, unknown
    json("body: empty object", path, {}),
    ...(object?.required ?? []).map((name) => json(`body: without ${name}`, path, without(valid as object, name))),
    json("body: every field of the wrong type", path, Object.fromEntries(properties.map(([name, s]) => [name, wrongTypeFor(s)]))),
    ...properties.map(([name, s]) => json(`body: ${name} of the wrong type`, path, { ...(valid as object), [name]: wrongTypeFor(s) })),
    json("body: unknown field", path, { ...(valid as object), unknownField: 1 }),
    raw("body: __proto__ field", path, `{"__proto__":{"isAdmin":true},${validText.slice(1)}`, "application/json"),
    // Strings: overlong, NUL, lone surrogate, bytes that are not UTF-8
    ...stringPlaces.flatMap(([at, maxLength]) => [
      json(`body: ${named(at)} overlong`, path, setAt(valid, at, "x".repeat(Math.max(10 * 1024, (maxLength ?? 0) + 1)))),
      json(`body: ${named(at)} with NUL`, path, setAt(valid, at, within(valid, at, "\u0000"))),
      json(`body: ${named(at)} only NUL`, path, setAt(valid, at, "\u0000")),
      json(`body: ${named(at)} with a lone high surrogate`, path, setAt(valid, at, within(valid, at, "\uD800"))),
      json(`body: ${named(at)} with a lone low surrogate`, path, setAt(valid, at, within(valid, at, "\uDC00"))),
      raw(`body: ${named(at)} not UTF-8`, path, invalidUtf8(at), "application/json")
    ]),
    // Content types
    raw("content type: text/plain", path, validText, "text/plain"),
    raw("content type: missing", path, new TextEncoder().encode(validText)),
    raw("content type: form", path, "a=1&b=2", "application/x-www-form-urlencoded"),
    raw("content type: multipart", path, "--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--x--\r\n", "multipart/form-data; boundary=x"),
    raw("content type: multipart without boundary", path, "--x--\r\n", "multipart/form-data"),
    raw("content type: JSON in UTF-16", path, validText, "application/json; charset=utf-16"),
    raw("content type: garbage", path, validText, ";;;/"),
    raw("body: larger than the limit", path, `{"pad":"${"x".repeat(limit)}"}`, "application/json")
  ]
}

const rawBodyVariants = (op: Operation): ReadonlyArray<Variant> => {
  if (op.spec.requestBody?.content["message/rfc822"] === undefined) return []
  const path = `${fillPath(op)}?aliasId=${ids.alias}`
  const type = "message/rfc822"
  return [
    raw("raw: empty", path, "", type),
    raw("raw: without aliasId", fillPath(op), rawMessage, type),
    raw("raw: NUL bytes", path, rawMessage.replace("hello", "he\u0000llo\u0000"), type),
    raw("raw: every byte value", path, Uint8Array.from({ length: 256 }, (_, i) => i), type),
    raw("raw: not UTF-8", path, Buffer.concat([Buffer.from(rawMessage.slice(0, 40)), Buffer.from([0xed, 0xa0, 0x80, 0xff]), Buffer.from(rawMessage.slice(40))]), type),
    raw("raw: no header/body separator", path, "Subject: x", type),
    raw("raw: 10 KB header line", path, `X-Long: ${"x".repeat(10 * 1024)}\r\n${rawMessage}`, type),
    raw("raw: JSON sent as a message", path, JSON.stringify({ aliasId: ids.alias }), type),
    raw("raw: type with parameters", path, rawMessage, "message/rfc822; charset=\"x\"")
  ]
}

/** Bodies on operations that read none: never read, never a reason to fail. */
const unreadBodyVariants = (op: Operation): ReadonlyArray<Variant> =>
  op.spec.requestBody !== undefined || op.method === "GET"
    ? []
    : [
      raw("unread body: invalid JSON", fillPath(op), "{", "application/json"),
      raw("unread body: binary", fillPath(op), Uint8Array.from([0, 0xff, 0xed, 0xa0, 0x80]), "application/octet-stream")
    ]

const variantsOf = (op: Operation): ReadonlyArray<Variant> => [
  ...pathVariants(op),
  ...queryVariants(op),
  ...strayQueryVariants(op),
  ...jsonBodyVariants(op),
  ...rawBodyVariants(op),
  ...unreadBodyVariants(op)
]

// --- Checking an answer ----------------------------------------------------------------------

/** Statuses any operation may answer beside the ones it declares. */
const generalStatuses = (op: Operation) => new Set([413, 415, ...(pathParams(op).length > 0 ? [404] : [])])

/** What is wrong with an answer, or undefined. */
const judge = (op: Operation, answer: Answer): string | undefined => {
  if (answer.status >= 500) return `status ${answer.status}`
  const declared = new Set(Object.keys(op.spec.responses).map(Number))
  if (!declared.has(answer.status) && !(answer.status >= 400 && generalStatuses(op).has(answer.status))) {
    return `status ${answer.status}, not one the operation declares (${[...declared].join(", ")})`
  }
  if (answer.status < 400) return undefined
  const error = answer.body?.error
  if (typeof error?.code !== "string" || typeof error?.message !== "string") return `status ${answer.status} without a Problem body`
  if (!(answer.headers.get("content-type") ?? "").includes("json")) return `Problem served as ${answer.headers.get("content-type")}`
  if (error.fields !== undefined && (typeof error.fields !== "object" || Object.values(error.fields).some((reason) => typeof reason !== "string"))) {
    return "fields is not a map of reason codes"
  }
  try {
    expectProblem(answer, answer.status, error.code)
  } catch (e) {
    return `not the Problem shape: ${(e as Error).message.split("\n")[0]}`
  }
  return undefined
}

const credentials = (op: Operation) =>
  op.access === undefined ? {} : op.access !== "session" ? { token } : { session: op.route === "/auth/logout" ? leaver : owner }

describe("every operation of the served contract, with malformed input", () => {
  it("reads the operations from the served document, each with its access", () => {
    const all = operations()
    expect(all.length).toBeGreaterThan(40)
    // Every operation is reached: with a token, a session, or (sign-up, login) nothing.
    expect(all.filter((op) => op.access === undefined).map((op) => `${op.method} ${op.route}`)).toEqual(["POST /auth/signup", "POST /auth/login"])
    // Every body is known: a new operation with a body fails here until it has a valid one.
    for (const op of all) jsonBodyVariants(op)
  })

  it("answers each below 500, within seconds, a 4xx in the Problem shape with a declared status", async () => {
    const failures: Array<string> = []
    let sent = 0
    for (const op of operations()) {
      for (const variant of variantsOf(op)) {
        const started = Date.now()
        const label = `${op.method} ${op.route} [${variant.label}]`
        let answer: Answer
        try {
          answer = await h.request(variant.path, {
            method: op.method,
            ...credentials(op),
            ...(variant.rawBody === undefined ? {} : { rawBody: variant.rawBody }),
            headers: variant.headers ?? {},
            signal: AbortSignal.timeout(AnswerWithinMs)
          })
        } catch (error) {
          failures.push(`${label}: no answer within ${AnswerWithinMs} ms, or the connection failed (${(error as Error).name}: ${(error as Error).message})`)
          continue
        }
        sent++
        const took = Date.now() - started
        const wrong = judge(op, answer)
        if (wrong !== undefined) failures.push(`${label}: ${wrong}: ${answer.text.slice(0, 200)}`)
        else if (took > AnswerWithinMs) failures.push(`${label}: answered after ${took} ms`)
      }
    }
    expect(failures).toEqual([])
    expect(sent).toBeGreaterThan(1000)
  }, 120_000)

  it("still answers every read of what the accepted odd input stored, and the injected message reads back unchanged, detail and raw bytes", async () => {
    // What an odd but valid request stored (a name with a lone surrogate, a 10 KB label) must not
    // break the reads that show it: every GET without path parameters answers 200.
    const reads = operations().filter((op) => op.method === "GET" && pathParams(op).length === 0)
    expect(reads.length).toBeGreaterThan(10)
    for (const op of reads) {
      const answer = await h.request(op.template, { ...credentials(op), signal: AbortSignal.timeout(AnswerWithinMs) })
      expect({ read: op.route, status: answer.status }, answer.text.slice(0, 300)).toEqual({ read: op.route, status: 200 })
    }
    expect(await readKept()).toEqual(keptBefore)
  })
})

describe("what this test found", () => {
  it("a path parameter the router cannot read (bad percent-encoding, overlong) is a 422 naming it, not a 405 for its own method", async () => {
    const cases: ReadonlyArray<readonly [method: string, path: string, fields: Record<string, string>]> = [
      ["GET", "/messages/%zz", { id: "invalid_encoding" }],
      ["GET", "/messages/%", { id: "invalid_encoding" }],
      ["DELETE", "/messages/%ED%A0%80", { id: "invalid_encoding" }],
      ["GET", `/messages/${ids.kept}/attachments/%E0%80`, { attachmentId: "invalid_encoding" }],
      ["GET", "/messages/%zz/attachments/%", { messageId: "invalid_encoding", attachmentId: "invalid_encoding" }],
      ["GET", `/messages/${"1".repeat(101)}`, { id: "too_long" }],
      ["POST", "/webhooks/%zz/test", { id: "invalid_encoding" }]
    ]
    for (const [method, path, fields] of cases) {
      const answer = await h.request(path, { method, token })
      expectProblem(answer, 422, "validation_failed")
      expect({ method, path, fields: answer.body.error.fields }).toEqual({ method, path, fields })
    }
    // A path the router cannot read under a method it does not have there is still a 405.
    const wrongMethod = await h.request("/messages/%zz", { method: "PUT", token })
    expectProblem(wrongMethod, 405, "method_not_allowed")
    expect(wrongMethod.headers.get("allow")).toBe("GET, PATCH, DELETE")
    // The longest id the router reads is still read, and names no message.
    expectProblem(await h.request(`/messages/${"2147483648".padStart(100, "0")}`, { token }), 404, "not_found")
  })

  it("a lone surrogate in text that travels to the database as JSON is read as in a text column (U+FFFD), not a 500", async () => {
    // Login: the throttle's key holds the email; its window is read back through a jsonb parameter.
    const email = "lone\uD800surrogate@example.com"
    for (let i = 0; i < 10; i++) {
      expectProblem(await h.request("/auth/login", { method: "POST", body: { email, password: "not the password" } }), 401, "invalid_credentials")
    }
    // The failures were counted under the key the next login reads: the eleventh is throttled.
    expectProblem(await h.request("/auth/login", { method: "POST", body: { email, password: "not the password" } }), 429, "too_many_login_attempts")

    // Webhook subscriptions are stored as jsonb.
    const created = await h.request("/webhooks", {
      method: "POST",
      token,
      body: { name: "surrogate", url: "https://hooks.example.com/s", subscription: { mode: "label", label: "a\uD800b" } }
    })
    expect(created.status, created.text).toBe(201)
    expect(created.body.webhook.subscription).toEqual({ mode: "label", label: "a\uFFFDb" })
    const updated = await h.request(`/webhooks/${created.body.webhook.id}`, {
      method: "PATCH",
      token,
      body: { subscription: { mode: "label", label: "\uDC00c" } }
    })
    expect(updated.status, updated.text).toBe(200)
    expect(updated.body.subscription).toEqual({ mode: "label", label: "\uFFFDc" })
    // A NUL is still refused, as in text.
    const nul = await h.request(`/webhooks/${created.body.webhook.id}`, { method: "PATCH", token, body: { subscription: { mode: "label", label: "a\u0000b" } } })
    expectProblem(nul, 422, "validation_failed")
  })
})
