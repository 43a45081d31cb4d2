/**
 * The Effect face of @burnbox/client: the HttpApiClient derived from the contract (`raw`), so a
 * change in `BurnboxApi` is a type error here, plus the conveniences a test suite or the CLI
 * needs: claim an alias in one call, burn it, wait for mail, inject test mail, manage webhooks.
 * Every failure is a BurnboxProblem.
 */
import { Clock, Context, Effect, Layer, Redacted, Result, Schema } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { BurnboxApi } from "@burnbox/domain/Api"
import type * as Aliases from "@burnbox/domain/aliases/Alias"
import * as Messages from "@burnbox/domain/messages/Message"
import type * as Webhooks from "@burnbox/domain/webhooks/Webhook"
import { BurnboxProblem, problems } from "./BurnboxProblem.ts"
import { type ExportsShape, makeExports } from "./exports.ts"

/** The client derived from the contract: one method per endpoint, grouped as the API is. */
export type RawClient = HttpApiClient.ForApi<typeof BurnboxApi>

export type Alias = typeof Aliases.Alias.Type
export type AliasStyle = typeof Aliases.AliasStyle.Type
export type MessageDetail = typeof Messages.MessageDetail.Type
export type MessagePage = typeof Messages.MessagePage.Type
export type MessageSummary = typeof Messages.MessageSummary.Type
export type TestMessageInput = typeof Messages.TestMessageInput.Type
export type InjectedTestMessage = typeof Messages.InjectedTestMessage.Type
export type CreateWebhook = typeof Webhooks.CreateWebhook.Type
export type WebhookList = typeof Webhooks.WebhookList.Type
export type WebhookWithSecret = typeof Webhooks.WebhookWithSecret.Type

const ListQuery = Schema.Struct(Messages.ListMessagesQuery)
/** GET /messages' query, decoded values (`alias: 12`, `wait: 30`, `sort: "oldest"`). */
export type ListMessagesQuery = typeof ListQuery.Type

export interface ClientOptions {
  /** The API's base URL (`https://burnbox.example/api/v1`, as BURNBOX_URL), or the site URL without `/api/v1`. */
  readonly baseUrl: string | URL
  /** A bearer API token (`bbx_...`); without one only public endpoints answer. */
  readonly token?: string | Redacted.Redacted<string> | undefined
}

/** An alias as the conveniences accept it: the resource, its id, or its address. */
export type AliasRef = number | string | { readonly id: number }

export interface CreateAliasOptions {
  /** A domain name; the first claimable domain when omitted. */
  readonly domain?: string | undefined
  readonly style?: AliasStyle | undefined
  readonly label?: string | undefined
}

export interface WaitOptions {
  readonly alias: AliasRef
  /**
   * Seconds to wait in all (default 30); longer waits are asked in 120-second requests. Transient
   * trouble (no answer, 429, 502-504) is tried again within this time, backing off up to 4 s.
   */
  readonly timeout?: number | undefined
  /** Only mail received at or after this instant; the first message is then the earliest since it. */
  readonly since?: Date | string | undefined
  /**
   * Which message is "first" when several match: by default the earliest at or after `since`
   * when it is given (`oldest`), otherwise the newest.
   */
  readonly sort?: "newest" | "oldest" | undefined
}

/** A test message: the JSON form, or raw `message/rfc822` bytes for an alias. */
export type InjectInput = TestMessageInput | { readonly aliasId: number; readonly raw: Uint8Array }

export interface BurnboxClientShape {
  readonly raw: RawClient
  readonly aliases: {
    /** Reserves candidates and claims the first in one call. */
    readonly create: (options?: CreateAliasOptions) => Effect.Effect<Alias, BurnboxProblem>
    readonly burn: (alias: AliasRef) => Effect.Effect<void, BurnboxProblem>
    readonly find: (address: string) => Effect.Effect<Alias | undefined, BurnboxProblem>
  }
  readonly messages: {
    /** The first matching message's detail once it is processed; fails with code `timeout`. */
    readonly wait: (options: WaitOptions) => Effect.Effect<MessageDetail, BurnboxProblem>
    readonly get: (id: number, options?: { readonly wait?: number | undefined }) => Effect.Effect<MessageDetail, BurnboxProblem>
    readonly list: (query?: ListMessagesQuery) => Effect.Effect<MessagePage, BurnboxProblem>
  }
  readonly testMessages: {
    readonly inject: (input: InjectInput) => Effect.Effect<InjectedTestMessage, BurnboxProblem>
  }
  readonly exports: ExportsShape
  readonly webhooks: {
    readonly list: () => Effect.Effect<WebhookList, BurnboxProblem>
    readonly create: (input: CreateWebhook) => Effect.Effect<WebhookWithSecret, BurnboxProblem>
    readonly delete: (id: number) => Effect.Effect<void, BurnboxProblem>
  }
}

/** The longest `wait` the API takes in one request (decisions.md, "Waiting for mail"). */
const MaxWaitSeconds = 120
/** Between polls of a server that answers at once instead of holding the request. */
const PollIntervalMs = 250
const DefaultTimeoutSeconds = 30
/** How long `aliases.create` trusts the domain list it read. */
const DomainsFreshMs = 60_000

/** Seconds left before `deadline` as the API's `wait` takes them, or undefined when under one. */
const waitSeconds = (deadline: number, now: number) => {
  const seconds = Math.min(MaxWaitSeconds, Math.floor((deadline - now) / 1000))
  return seconds >= 1 ? seconds : undefined
}

/** The origin the contract's `/api/v1` prefix is appended to. */
export const apiOrigin = (baseUrl: string | URL): string =>
  String(baseUrl).replace(/\/+$/, "").replace(/\/api\/v1$/, "")

/** The longest pause between tries of a wait after a transient problem. */
const MaxBackoffMs = 4_000

/**
 * A problem a wait outlasts: no answer at all (the server restarting, a dropped connection), the
 * token's request limit (429), or the service briefly unavailable (502, 503, 504).
 */
const isTransient = (problem: BurnboxProblem) =>
  problem.status === 0 ? problem.code === "network_error" : [429, 502, 503, 504].includes(problem.status)

/**
 * `attempt`, tried again after a transient problem until `deadline` (pausing PollIntervalMs, then
 * twice as long each time, up to MaxBackoffMs); any other problem, or a transient one with no time
 * left for another try, is the wait's.
 */
const retryingUntil = <A>(deadline: number, attempt: Effect.Effect<A, BurnboxProblem>) =>
  Effect.gen(function*() {
    let pause = PollIntervalMs
    for (;;) {
      const result = yield* Effect.result(attempt)
      if (Result.isSuccess(result)) return result.success
      const now = yield* Clock.currentTimeMillis
      if (!isTransient(result.failure) || now + pause >= deadline) return yield* Effect.fail(result.failure)
      yield* Effect.sleep(pause)
      pause = Math.min(pause * 2, MaxBackoffMs)
    }
  })

const isPending = (message: { readonly processingStatus: string }) =>
  message.processingStatus === "stub" || message.processingStatus === "processing"

/** A refusal of a reservation that a stale domain list may explain: the domain is gone, retired, or no longer open to the plan. */
const staleDomain = (problem: BurnboxProblem) => problem.status === 404 || problem.status === 403 || problem.code === "domain_retired"

/** Builds the client on the HttpClient in context (fetch in `layer`). */
export const make = Effect.fnUntraced(function*(options: ClientOptions) {
  const token = options.token === undefined
    ? undefined
    : Redacted.isRedacted(options.token) ? options.token : Redacted.make(options.token)
  const authorize = token === undefined ? undefined : HttpClient.mapRequest(HttpClientRequest.bearerToken(token))
  const raw: RawClient = yield* HttpApiClient.make(BurnboxApi, { baseUrl: apiOrigin(options.baseUrl), transformClient: authorize })
  const http = yield* HttpClient.HttpClient

  const find = Effect.fn("BurnboxClient.aliases.find")(function*(address: string) {
    const { items } = yield* problems(raw.aliases.list({ query: { includeBurned: "true" } }))
    const wanted = address.trim().toLowerCase()
    // A burned address is never claimed again, but prefer a live alias should one share it.
    const matches = items.filter((alias) => alias.address.toLowerCase() === wanted)
    return matches.find((alias) => alias.status !== "burned") ?? matches[0]
  })

  const aliasId = Effect.fn("BurnboxClient.aliasId")(function*(alias: AliasRef) {
    if (typeof alias === "number") return alias
    if (typeof alias === "object") return alias.id
    if (/^\d+$/.test(alias)) return Number(alias)
    const found = yield* find(alias)
    if (found === undefined) return yield* BurnboxProblem.notFound(`The alias ${alias}`)
    return found.id
  })

  /**
   * The account's domains as `create` last read them: a fleet of jobs sharing one client claims
   * many aliases a minute, and the list changes only when an operator adds or retires a domain.
   * Read again after DomainsFreshMs, and at once when a reservation is refused for its domain.
   */
  let domainsRead: { readonly at: number; readonly items: ReadonlyArray<{ readonly id: number; readonly name: string; readonly claimable: boolean }> } | undefined
  const domainsFor = (fresh: boolean) =>
    Effect.gen(function*() {
      const at = yield* Clock.currentTimeMillis
      if (!fresh && domainsRead !== undefined && at - domainsRead.at < DomainsFreshMs) return domainsRead.items
      const { items } = yield* problems(raw.account.domains())
      domainsRead = { at, items }
      return items
    })

  const reserveOn = Effect.fn("BurnboxClient.aliases.reserve")(function*(createOptions: CreateAliasOptions, fresh: boolean) {
    const domains = yield* domainsFor(fresh)
    const wanted = createOptions.domain?.trim().toLowerCase()
    const domain = wanted === undefined
      ? domains.find((candidate) => candidate.claimable)
      : domains.find((candidate) => candidate.name.toLowerCase() === wanted)
    if (domain === undefined) {
      return yield* BurnboxProblem.notFound(wanted === undefined ? "A claimable domain" : `The domain ${wanted}`)
    }
    return yield* problems(raw.aliases.reserve({ payload: { domainId: domain.id, style: createOptions.style ?? "words" } }))
  })

  const create = Effect.fn("BurnboxClient.aliases.create")(function*(createOptions: CreateAliasOptions = {}) {
    const reservation = yield* reserveOn(createOptions, false).pipe(
      Effect.catchIf(staleDomain, () => reserveOn(createOptions, true))
    )
    const candidate = reservation.candidates[0]
    if (candidate === undefined) {
      return yield* new BurnboxProblem({ status: 0, code: "unexpected_response", message: "The reservation held no candidate." })
    }
    const alias = yield* problems(raw.aliases.claim({
      payload: {
        aliasId: candidate.id,
        reservationToken: reservation.reservationToken,
        ...(createOptions.label === undefined ? {} : { label: createOptions.label })
      }
    }))
    // The claim ends the reservation: its other four candidates are back in the pool already.
    return alias
  })

  const burn = Effect.fn("BurnboxClient.aliases.burn")(function*(alias: AliasRef) {
    const id = yield* aliasId(alias)
    yield* problems(raw.aliases.burn({ params: { id } }))
  })

  const list = (query: ListMessagesQuery = {}) => problems(raw.messages.list({ query })).pipe(Effect.withSpan("BurnboxClient.messages.list"))

  const get = Effect.fn("BurnboxClient.messages.get")(function*(id: number, getOptions: { readonly wait?: number | undefined } = {}) {
    const wait = getOptions.wait === undefined ? undefined : Math.min(MaxWaitSeconds, Math.max(1, Math.ceil(getOptions.wait)))
    return yield* problems(raw.messages.get({ params: { id }, query: wait === undefined ? {} : { wait } }))
  })

  const wait = Effect.fn("BurnboxClient.messages.wait")(function*(waitOptions: WaitOptions) {
    const timeout = waitOptions.timeout ?? DefaultTimeoutSeconds
    const alias = yield* aliasId(waitOptions.alias)
    const sinceTime = waitOptions.since === undefined ? undefined : new Date(waitOptions.since).getTime()
    if (sinceTime !== undefined && Number.isNaN(sinceTime)) {
      return yield* new BurnboxProblem({
        status: 0,
        code: "validation_failed",
        message: "`since` is not a date.",
        fields: { since: "invalid_date_time" }
      })
    }
    const since = sinceTime === undefined ? undefined : new Date(sinceTime).toISOString()
    const deadline = (yield* Clock.currentTimeMillis) + timeout * 1000
    // "The first message since an instant" is the earliest one received at or after it.
    const sort = waitOptions.sort ?? (since === undefined ? undefined : "oldest")
    const query: ListMessagesQuery = {
      alias,
      limit: 1,
      ...(since === undefined ? {} : { dateFrom: since }),
      ...(sort === undefined ? {} : { sort })
    }
    // Poll the list until a message matches. A server that honours `wait` holds each request
    // until mail arrives (up to 120 s); one that answers at once is asked again after a pause.
    let first: MessageSummary | undefined
    while (true) {
      const page = yield* retryingUntil(
        deadline,
        Effect.flatMap(Clock.currentTimeMillis, (started) => {
          const seconds = waitSeconds(deadline, started)
          return list(seconds === undefined ? query : { ...query, wait: seconds })
        })
      )
      first = page.items[0]
      if (first !== undefined) break
      const now = yield* Clock.currentTimeMillis
      if (now >= deadline) {
        return yield* BurnboxProblem.timeout(`No message arrived for alias ${alias} within ${timeout} s.`)
      }
      yield* Effect.sleep(Math.min(PollIntervalMs, deadline - now))
    }
    // Then read it once the pipeline is done with it (parsed: codes, links, body).
    const id = first.id
    const read = retryingUntil(deadline, Effect.flatMap(Clock.currentTimeMillis, (now) => get(id, { wait: waitSeconds(deadline, now) })))
    let detail = yield* read
    while (isPending(detail)) {
      const now = yield* Clock.currentTimeMillis
      if (now >= deadline) {
        return yield* BurnboxProblem.timeout(`Message ${detail.id} arrived but was still being processed after ${timeout} s.`)
      }
      yield* Effect.sleep(Math.min(PollIntervalMs, deadline - now))
      detail = yield* read
    }
    return detail
  })

  const inject = Effect.fn("BurnboxClient.testMessages.inject")(function*(input: InjectInput) {
    return yield* problems("raw" in input
      ? raw.testMail.inject({ query: { aliasId: input.aliasId }, payload: input.raw })
      : raw.testMail.inject({ query: {}, payload: input }))
  })

  return {
    raw,
    aliases: { create, burn, find },
    messages: { wait, get, list },
    testMessages: { inject },
    exports: makeExports(raw, authorize === undefined ? http : authorize(http), apiOrigin(options.baseUrl)),
    webhooks: {
      list: () => problems(raw.webhooks.list()).pipe(Effect.withSpan("BurnboxClient.webhooks.list")),
      create: (input: CreateWebhook) => problems(raw.webhooks.create({ payload: input })).pipe(Effect.withSpan("BurnboxClient.webhooks.create")),
      delete: (id: number) => problems(raw.webhooks.remove({ params: { id } })).pipe(Effect.asVoid, Effect.withSpan("BurnboxClient.webhooks.delete"))
    }
  } satisfies BurnboxClientShape
})

export class BurnboxClient extends Context.Service<BurnboxClient, BurnboxClientShape>()("@burnbox/client/BurnboxClient") {
  /** The client over the HttpClient the caller provides. */
  static readonly layerNoDeps = (options: ClientOptions): Layer.Layer<BurnboxClient, never, HttpClient.HttpClient> =>
    Layer.effect(BurnboxClient, make(options))

  /** The client over fetch (browsers, Node 20+, edge runtimes). */
  static readonly layer = (options: ClientOptions): Layer.Layer<BurnboxClient> =>
    BurnboxClient.layerNoDeps(options).pipe(Layer.provide(FetchHttpClient.layer))
}
