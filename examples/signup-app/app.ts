/**
 * A tiny sign-up app for burnbox's end-to-end recipe (README, "Testing a sign-up"): a form that
 * takes an email address, mails a 6-digit code to it over SMTP, and a page that checks the code.
 * Plain node:http and nodemailer; codes live in memory.
 *
 *   SMTP_HOST=127.0.0.1 SMTP_PORT=2525 PORT=3000 ./pnpmw exec node examples/signup-app/app.ts
 *
 * (the workspace's Node 24, which runs TypeScript as it is)
 */
import { randomInt } from "node:crypto"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import nodemailer from "nodemailer"

export interface SignupAppOptions {
  /** Where verification mail goes: burnbox's SMTP ingest, or any mail server. */
  readonly smtp: { readonly host: string; readonly port: number }
  readonly port?: number
  readonly host?: string
}

export interface SignupApp {
  readonly url: string
  readonly close: () => Promise<void>
}

const page = (title: string, body: string) =>
  `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title></head><body><h1>${title}</h1>${body}</body></html>`

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

const signupForm = `<form method="post" action="/signup"><label>Email <input name="email" type="email" required></label> <button>Sign up</button></form>`

const codeForm = (email: string) =>
  `<form method="post" action="/verify"><input type="hidden" name="email" value="${escape(email)}"><label>Code <input name="code" inputmode="numeric" required></label> <button>Verify</button></form>`

export const startSignupApp = async (options: SignupAppOptions): Promise<SignupApp> => {
  const mailer = nodemailer.createTransport({ host: options.smtp.host, port: options.smtp.port, secure: false, ignoreTLS: true })
  const pending = new Map<string, string>()
  let url = ""

  const server = createServer(async (request, response) => {
    const answer = (status: number, html: string) => {
      response.writeHead(status, { "content-type": "text/html; charset=utf-8" })
      response.end(html)
    }
    try {
      const target = new URL(request.url ?? "/", url)
      let form = target.searchParams
      if (request.method === "POST") {
        let body = ""
        for await (const chunk of request) body += chunk
        form = new URLSearchParams(body)
      }
      const email = (form.get("email") ?? "").trim().toLowerCase()
      if (request.method === "GET" && target.pathname === "/") return answer(200, page("Sign up", signupForm))
      if (request.method === "POST" && target.pathname === "/signup") {
        if (!/^[^@\s]+@[^@\s]+$/.test(email)) return answer(400, page("Sign up", `<p>Give an email address.</p>${signupForm}`))
        const code = String(randomInt(0, 1_000_000)).padStart(6, "0")
        pending.set(email, code)
        const link = `${url}/verify?${new URLSearchParams({ email, code })}`
        await mailer.sendMail({
          from: "Sign-up app <no-reply@signup-app.example>",
          to: email,
          subject: "Confirm your email address",
          text: `Your verification code is ${code}.\n\nOr confirm by opening this link:\n${link}\n`,
          html: `<p>Your verification code is <b>${code}</b>.</p><p><a href="${escape(link)}">Confirm your email address</a></p>`
        })
        return answer(200, page("Check your mail", `<p>We sent a code to ${escape(email)}.</p>${codeForm(email)}`))
      }
      if (target.pathname === "/verify" && (request.method === "POST" || form.has("code"))) {
        const code = (form.get("code") ?? "").trim()
        if (pending.get(email) !== code) return answer(400, page("Wrong code", codeForm(email)))
        pending.delete(email)
        return answer(200, page("Email verified", `<p>${escape(email)} is verified.</p>`))
      }
      return answer(404, page("Not found", ""))
    } catch (error) {
      return answer(500, page("Error", `<pre>${escape(String(error))}</pre>`))
    }
  })
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, options.host ?? "127.0.0.1", resolve))
  const address = server.address() as AddressInfo
  url = `http://${address.address}:${address.port}`
  return {
    url,
    close: () => {
      mailer.close()
      return new Promise((resolve) => server.close(() => resolve()))
    }
  }
}

if (import.meta.main) {
  const app = await startSignupApp({
    smtp: { host: process.env["SMTP_HOST"] ?? "127.0.0.1", port: Number(process.env["SMTP_PORT"] ?? 2525) },
    port: Number(process.env["PORT"] ?? 3000)
  })
  process.stdout.write(`sign-up app on ${app.url}\n`)
}
