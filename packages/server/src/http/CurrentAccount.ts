import { CurrentPrincipal } from "@burnbox/domain"
import { Accounts } from "@burnbox/store"
import { Effect } from "effect"

/** The caller's account row; an account deleted under a live credential is a 401 by then. */
export const currentAccount = Effect.gen(function*() {
  const principal = yield* CurrentPrincipal
  const accounts = yield* Accounts
  const account = yield* accounts.get(principal.accountId)
  if (account === undefined) return yield* Effect.die(new Error("account of a live credential is gone"))
  return account
})
