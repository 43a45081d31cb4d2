import { CurrentPrincipal } from "@burnbox/domain"
import type { AccountRow } from "@burnbox/store"
import { Effect } from "effect"

/** The caller's account row, read through the repository (or the snapshot cache) the handler group holds. */
export const currentAccount = (accounts: { readonly get: (id: number) => Effect.Effect<AccountRow | undefined> }) =>
  Effect.gen(function*() {
    const principal = yield* CurrentPrincipal
    const account = yield* accounts.get(principal.accountId)
    if (account === undefined) return yield* Effect.die(new Error("account of a live credential is gone"))
    return account
  })
