import { SessionCookie } from "@burnbox/domain"
import { SessionLifetimeMs } from "@burnbox/store/auth/Sessions"
import { Effect, Redacted } from "effect"
import { HttpEffect, HttpServerResponse } from "effect/http"

/** HttpOnly, SameSite=Lax, Secure when the site is served over https (decisions.md). */
export const setSessionCookie = (secret: Redacted.Redacted<string>, secure: boolean) =>
  HttpEffect.appendPreResponseHandler((_request, response) =>
    HttpServerResponse.setCookie(response, SessionCookie, Redacted.value(secret), {
      httpOnly: true,
      sameSite: "lax",
      secure,
      path: "/",
      maxAge: `${SessionLifetimeMs / 1000} seconds`
    }).pipe(Effect.orDie)
  )

export const clearSessionCookie = (secure: boolean) =>
  HttpEffect.appendPreResponseHandler((_request, response) =>
    HttpServerResponse.expireCookie(response, SessionCookie, { httpOnly: true, sameSite: "lax", secure, path: "/" }).pipe(Effect.orDie)
  )
