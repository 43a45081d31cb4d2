/**
 * Signing up and signing in (decisions.md, "Authentication endpoints"): each answers the account
 * and a new browser session's secret. Sign-in failures are throttled per email and per client
 * address (SignInThrottle): past either allowance every sign-in is refused until the window frees,
 * so a guessed password costs an attacker the wait as well.
 */
import { type EmailTaken, InvalidCredentials, SignInThrottle, SignInThrottled } from "@burnbox/domain"
import { Context, Effect, Layer, type Redacted } from "effect"
import { type AccountRow, Accounts, emailKey } from "../accounts/Accounts.ts"
import { RateLimiter } from "../platform/RateLimiter.ts"
import { Sessions } from "./Sessions.ts"

export interface SignedIn {
  readonly account: AccountRow
  /** The new session's secret: the browser's cookie. */
  readonly session: Redacted.Redacted<string>
}

export class SignIns extends Context.Service<SignIns, {
  readonly signUp: (email: string, password: string) => Effect.Effect<SignedIn, EmailTaken>
  /** `clientAddress` is the caller's address as the server sees it. */
  readonly signIn: (email: string, password: string, clientAddress: string) => Effect.Effect<SignedIn, InvalidCredentials | SignInThrottled>
}>()("burnbox/SignIns") {
  static readonly layer = Layer.effect(SignIns, Effect.gen(function*() {
    const accounts = yield* Accounts
    const sessions = yield* Sessions
    const limiter = yield* RateLimiter

    const signedIn = (account: AccountRow) => Effect.map(sessions.create(account.id), (session): SignedIn => ({ account, session }))

    const signUp = Effect.fn("SignIns.signUp")(function*(email: string, password: string) {
      return yield* signedIn(yield* accounts.create({ email, password }))
    })

    const signIn = Effect.fn("SignIns.signIn")(function*(email: string, password: string, clientAddress: string) {
      const throttles = [
        { key: `login:email:${emailKey(email)}`, windows: SignInThrottle.perEmail },
        { key: `login:addr:${clientAddress}`, windows: SignInThrottle.perAddress }
      ]
      for (const { key, windows } of throttles) {
        const decision = yield* limiter.peek(key, windows)
        if (!decision.allowed) return yield* Effect.fail(new SignInThrottled({ retryAfter: decision.retryAfter }))
      }
      const account = yield* accounts.authenticate(email, password)
      if (account === undefined) {
        for (const { key, windows } of throttles) yield* limiter.hit(key, windows)
        return yield* Effect.fail(new InvalidCredentials())
      }
      return yield* signedIn(account)
    })

    return SignIns.of({ signUp, signIn })
  }))
}
