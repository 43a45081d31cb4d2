import { Account, SessionBootstrap } from "@burnbox/domain"
import { expectProblem, expectShape, type Harness, startHarness } from "@burnbox/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let h: Harness
beforeAll(async () => {
  h = await startHarness()
})
afterAll(() => h.close())

const signupBody = (email: string, password = "correct horse battery") => ({ method: "POST", body: { email, password } })

describe("signup", () => {
  it("creates an account, answers 201 Account and sets an HttpOnly SameSite=Lax session cookie", async () => {
    const answer = await h.request("/auth/signup", signupBody("new.person@example.com"))
    expect(answer.status).toBe(201)
    const account = expectShape(Account, answer.body)
    expect(account.email).toBe("new.person@example.com")
    expect(account.plan.code).toBe("free")
    const cookie = answer.headers.get("set-cookie") ?? ""
    expect(cookie).toMatch(/^service_session=[A-Za-z0-9_-]{20,};/)
    expect(cookie).toMatch(/HttpOnly/i)
    expect(cookie).toMatch(/SameSite=Lax/i)
    expect(cookie).not.toMatch(/Secure/i)
  })

  it("refuses a second account for the same email, compared case-insensitively, with 409 email_taken", async () => {
    await h.request("/auth/signup", signupBody("Taken@Example.com"))
    expectProblem(await h.request("/auth/signup", signupBody("taken@example.COM")), 409, "email_taken")
  })

  it("names every bad field with a reason code", async () => {
    const answer = await h.request("/auth/signup", { method: "POST", body: { email: "not-an-email", password: "short", extra: true } })
    expectProblem(answer, 422, "validation_failed")
    expect(answer.body.error.fields).toEqual({ email: "invalid_email", password: "too_short", extra: "unknown_field" })
  })

  it("refuses a password over 256 characters and a missing email", async () => {
    const answer = await h.request("/auth/signup", { method: "POST", body: { password: "x".repeat(257) } })
    expectProblem(answer, 422, "validation_failed")
    expect(answer.body.error.fields).toEqual({ email: "required", password: "too_long" })
  })

  it("answers malformed JSON with 422 naming the body", async () => {
    const answer = await h.request("/auth/signup", { method: "POST", rawBody: '{"email":', headers: { "content-type": "application/json" } })
    expectProblem(answer, 422, "validation_failed")
    expect(answer.body.error.fields).toEqual({ body: "invalid_json" })
  })

  it("answers an oversized body with 413 in the Problem shape", async () => {
    const answer = await h.request("/auth/signup", { method: "POST", rawBody: "x".repeat(2 * 1024 * 1024), headers: { "content-type": "application/json" } })
    expectProblem(answer, 413, "payload_too_large")
  })
})

describe("login and logout", () => {
  it("signs in with the right password (email case-insensitive) and answers the Account", async () => {
    await h.request("/auth/signup", signupBody("login.me@example.com"))
    const answer = await h.request("/auth/login", signupBody("LOGIN.me@example.com"))
    expect(answer.status).toBe(200)
    expect(expectShape(Account, answer.body).email).toBe("login.me@example.com")
    expect(answer.headers.get("set-cookie")).toMatch(/^service_session=/)
  })

  it("answers a wrong password and an unknown email alike: 401 invalid_credentials, no cookie", async () => {
    await h.request("/auth/signup", signupBody("wrong.pass@example.com"))
    const wrong = await h.request("/auth/login", signupBody("wrong.pass@example.com", "not the password"))
    const unknown = await h.request("/auth/login", signupBody("nobody.here@example.com"))
    expectProblem(wrong, 401, "invalid_credentials")
    expectProblem(unknown, 401, "invalid_credentials")
    expect(wrong.headers.get("set-cookie")).toBeNull()
  })

  it("slows repeated failed logins for one email down to 429 with Retry-After, until the window passes", async () => {
    await h.request("/auth/signup", signupBody("brute@example.com"))
    for (let i = 0; i < 10; i++) {
      expectProblem(await h.request("/auth/login", signupBody("brute@example.com", `guess-${i}-xxxx`)), 401, "invalid_credentials")
    }
    const slowed = await h.request("/auth/login", signupBody("brute@example.com"))
    expectProblem(slowed, 429, "too_many_login_attempts")
    expect(Number(slowed.headers.get("retry-after"))).toBeGreaterThan(0)
    h.clock.advance("16 minutes")
    expect((await h.request("/auth/login", signupBody("brute@example.com"))).status).toBe(200)
  })

  it("logout needs the CSRF header, then ends the session and clears the cookie", async () => {
    const session = await h.signup()
    expectProblem(await h.request("/auth/logout", { method: "POST", session, withoutCsrf: true }), 403, "invalid_csrf_token")
    const out = await h.request("/auth/logout", { method: "POST", session })
    expect(out.status).toBe(204)
    expect(out.text).toBe("")
    expect(out.headers.get("set-cookie")).toMatch(/service_session=;|Max-Age=0|Expires=Thu, 01 Jan 1970/i)
    expectProblem(await h.request("/me", { session }), 401, "authentication_required")
  })
})

describe("cookie-session bootstrap", () => {
  it("carries csrfToken, mercure, push and isAdmin/handle on the user, and nothing else", async () => {
    const session = await h.signup()
    const answer = await h.request("/bootstrap", { session })
    expect(answer.status).toBe(200)
    const bootstrap = expectShape(SessionBootstrap, answer.body)
    expect(bootstrap.csrfToken).toBe(session.csrf)
    expect(bootstrap.user.isAdmin).toBe(false)
    expect(bootstrap.user.handle).toBeNull()
    const site = h.baseUrl.replace("/api/v1", "")
    expect(bootstrap.mercure).toEqual({ hubUrl: `${site}/.well-known/mercure`, topic: `${site}/accounts/${session.accountId}` })
    // The VAPID public key: an uncompressed P-256 point (65 bytes), base64url.
    expect(bootstrap.push).toEqual({ enabled: false, nudgeDismissed: false, publicKey: expect.stringMatching(/^B[A-Za-z0-9_-]{86}$/), subscriptions: [] })
    expect(bootstrap.domains.map((d) => [d.name, d.claimable, d.upgradeRequired])).toEqual([
      ["burnbox.test", true, false],
      ["vip.test", false, true]
    ])
  })
})
