/** Sign up and sign in: one form, the errors the API gives in words (wrong password, taken email, rate limited). */
import { isBurnboxProblem } from "@burnbox/client"
import { useState } from "preact/hooks"
import { call, describe, raw } from "./api.ts"
import { go } from "./route.ts"
import { loadSession } from "./state.ts"

const explain = (mode: "signin" | "signup", error: unknown): string => {
  if (isBurnboxProblem(error)) {
    if (error.status === 401) return "Wrong email or password."
    if (error.status === 409) return "An account with this email already exists. Sign in instead."
    if (error.status === 429) return `Too many attempts: ${error.message}`
    if (error.status === 422 && mode === "signup") return `Check the form: ${describe(error)}`
  }
  return describe(error)
}

export const AuthForm = (props: { readonly mode: "signin" | "signup"; readonly overlay?: boolean; readonly onDone?: () => void }) => {
  const [email, setEmail] = useState("")
  const [password, setPassword] = useState("")
  const [error, setError] = useState<string | undefined>()
  const [busy, setBusy] = useState(false)
  const submit = async (event: Event) => {
    event.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      const payload = { email, password }
      if (props.mode === "signup") await call(raw.auth.signup({ payload }))
      else await call(raw.auth.login({ payload }))
      await loadSession()
      if (props.onDone !== undefined) props.onDone()
      else go("#/inbox")
    } catch (e) {
      setError(explain(props.mode, e))
    } finally {
      setBusy(false)
    }
  }
  const title = props.mode === "signup" ? "Create your account" : props.overlay === true ? "Your session ended: sign in again" : "Sign in"
  return (
    <main class={props.overlay === true ? "auth overlay" : "auth"}>
      <form class="card" onSubmit={submit} aria-labelledby="auth-title">
        <h1 id="auth-title">{title}</h1>
        <label>
          Email
          <input type="email" name="email" autocomplete="username" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
        </label>
        <label>
          Password
          <input
            type="password"
            name="password"
            autocomplete={props.mode === "signup" ? "new-password" : "current-password"}
            required
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
          />
        </label>
        {error !== undefined && <p role="alert" class="error">{error}</p>}
        <button type="submit" class="primary" disabled={busy}>{props.mode === "signup" ? "Sign up" : "Sign in"}</button>
        {props.overlay !== true && (
          props.mode === "signup"
            ? <p>Already have an account? <a href="#/signin">Sign in</a></p>
            : <p>New here? <a href="#/signup">Create an account</a></p>
        )}
      </form>
    </main>
  )
}
