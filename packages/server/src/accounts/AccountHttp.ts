import { BurnboxApi, CurrentPrincipal, SessionCookie, storageUsage } from "@burnbox/domain"
import { type AccountRow, AccountSnapshots, Accounts, Aliases, BurnboxConfig, Domains, Keyring, Push, Tags, toAccount, toMailDomain, toSessionAccount } from "@burnbox/store"
import { Effect, Redacted } from "effect"
import { HttpServerRequest } from "effect/http"
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
        return {
          user: toSessionAccount(account),
          ...common,
          csrfToken: keyring.csrfToken(Redacted.make(cookie)),
          mercure: { hubUrl: `${config.siteUrl}/.well-known/mercure`, topic: `${config.siteUrl}/accounts/${account.id}` },
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
