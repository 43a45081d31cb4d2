/** The signed-in session's shared state: the bootstrap, refreshed after changes that move its counts. */
import type { SessionBootstrap } from "@burnbox/domain/accounts/Bootstrap"
import { signal } from "./signal.ts"
import { client, raw, setCsrfToken } from "./api.ts"

export type Session = typeof SessionBootstrap.Type

export const session = signal<Session | null | undefined>(undefined)

/** Loads the cookie-session bootstrap; null when nobody is signed in. */
export const loadSession = async (): Promise<Session | null> => {
  try {
    // Not `call`: nobody signed in is an answer here, not a lost session.
    const boot = await client.run(raw.account.bootstrap())
    if (!("csrfToken" in boot)) return null
    setCsrfToken(boot.csrfToken)
    session.set(boot)
    return boot
  } catch {
    setCsrfToken(undefined)
    session.set(null)
    return null
  }
}

export const refreshSession = () => void loadSession()
