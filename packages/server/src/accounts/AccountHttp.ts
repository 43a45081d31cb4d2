import { BurnboxApi, CurrentPrincipal, SessionCookie, storageUsage } from "@burnbox/domain"
import {
  type AccountRow,
  AccountSnapshots,
  Accounts,
  Aliases,
  BurnboxConfig,
  Domains,
  Keyring,
  Push,
  subscriberJwt,
  Tags,
  toAccount,
  toMailDomain,
  toSessionAccount
} from "@burnbox/store"
import { SessionLifetimeMs } from "@burnbox/store/auth/Sessions"
import { Effect, Option, Redacted } from "effect"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { currentAccount } from "../platform/CurrentAccount.ts"

/** GET /storage's answer for an account. */
export const accountStorage = (account: AccountRow) => storageUsage(account.storageUsedBytes, account.entitlements.storageQuotaBytes)

/** What GET /me and GET /storage answer for the caller's account: their handlers' mapping, which the hot read path uses too. */
export const AccountReads = { me: toAccount, storage: accountStorage } as const

export const AccountHttp = HttpApiBuilder.group(BurnboxApi, "account", Effect.fn(function*(handlers) {
  const accounts = yield* Accounts
  const snapshots = yield* AccountSnapshots
  const domains = yield* Domains
  const tags = yield* Tags
  const aliases = yield* Aliases
  const keyring = yield* Keyring
  const config = yield* BurnboxConfig
  const push = yield* Push
  const externalHub = config.externalHub
  const hubUrl = Option.match(externalHub, { onNone: () => `${config.siteUrl}/.well-known/mercure`, onSome: (hub) => hub.url })

  const domainList = (account: AccountRow) =>
    domains.list.pipe(Effect.map((rows) => rows.map((row) => toMailDomain(row, account.entitlements.earlyAccessDomains))))

  return handlers
    .handle("bootstrap", () =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const account = yield* currentAccount(accounts)
        const [domainItems, tagItems, aliasItems] = yield* Effect.all(
          [domainList(account), tags.list(account.id), aliases.list(account.id, false)],
          { concurrency: 3 }
        )
        const common = { aliases: aliasItems, domains: domainItems, tags: tagItems }
        if (principal.kind === "bearer") return { user: toAccount(account), ...common }
        const request = yield* HttpServerRequest.HttpServerRequest
        const cookie = request.cookies[SessionCookie] ?? ""
        const topic = `${config.siteUrl}/accounts/${account.id}`
        if (Option.isSome(externalHub)) {
          // The external hub authorizes the browser by this cookie: its own topic only, for a session's lifetime.
          const token = subscriberJwt(externalHub.value.key, topic, Math.floor((Date.now() + SessionLifetimeMs) / 1000))
          yield* HttpEffect.appendPreResponseHandler((_request, response) =>
            HttpServerResponse.setCookie(response, "mercureAuthorization", token, {
              httpOnly: true,
              sameSite: "strict",
              secure: hubUrl.startsWith("https://"),
              path: new URL(hubUrl).pathname
            }).pipe(Effect.orDie))
        }
        return {
          user: toSessionAccount(account),
          ...common,
          csrfToken: keyring.csrfToken(Redacted.make(cookie)),
          mercure: { hubUrl, topic },
          push: yield* push.settings(account.id)
        }
      }))
    .handle("me", () => Effect.map(currentAccount(snapshots), AccountReads.me))
    .handle("storage", () => Effect.map(currentAccount(snapshots), AccountReads.storage))
    .handle("domains", () => Effect.map(Effect.flatMap(currentAccount(accounts), domainList), (items) => ({ items })))
    .handle("density", ({ payload }) =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        yield* accounts.setDensity(principal.accountId, payload.density)
        return { density: payload.density }
      }))
    .handle("pushSettings", () => Effect.flatMap(CurrentPrincipal, (principal) => push.settings(principal.accountId)))
}))
