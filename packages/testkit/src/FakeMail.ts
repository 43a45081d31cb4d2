/**
 * Fake mail for tests: a verification mail as a shop sends one (a code, a link, a text part and
 * an HTML alternative, attachments), as raw RFC 5322 bytes to send over SMTP or as the JSON body
 * of POST /test/messages. The bytes come from domain's `buildTestMessage`, the builder the server
 * uses for injected test mail, so a fake mail sent over SMTP and the same one injected through
 * the API are the same message; the same options give the same bytes.
 *
 * ```ts
 * const raw = fakeMail({ to: alias.address, code: "482913", link: "https://shop.example.com/verify?t=abc", html: true })
 * await sendMail(h, alias.address, raw)
 * await injectMail(h, who, alias.id, fakeMailRequest({ code: "482913" }))
 * ```
 */
import { buildTestMessage, parseMailbox, type TestMessageRequest, validateTestMessage } from "@burnbox/domain/mail/index"

export interface FakeAttachment {
  readonly filename: string
  /** Default `application/octet-stream`. */
  readonly contentType?: string
  /** A string is taken as UTF-8. */
  readonly content: string | Uint8Array
}

export interface FakeMailContent {
  /** Default `Example Shop <no-reply@shop.example.com>`. */
  readonly from?: string
  /** Default: "<code> is your verification code", else "Confirm your email address" with a link, else "Hello". */
  readonly subject?: string
  /** A one-time code, written in the text and the HTML as services do. */
  readonly code?: string
  /** A verification link, written in the text and as the HTML's button and fallback URL. */
  readonly link?: string
  /** The text part; default written around `code` and `link`; `null`: no text part (HTML only). */
  readonly text?: string | null
  /** `true`: an HTML alternative written around `code` and `link`; a string: that HTML. Default none. */
  readonly html?: boolean | string
  readonly attachments?: ReadonlyArray<FakeAttachment>
}

export interface FakeMailOptions extends FakeMailContent {
  /** The recipient, written in the To header. */
  readonly to: string
  /** The Date header; default 2025-01-01T00:00:00Z, so that the bytes do not depend on when the test runs. */
  readonly date?: Date
}

export const FakeMailDate = new Date("2025-01-01T00:00:00Z")

const escapeHtml = (value: string) =>
  value.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" })[c]!)

const defaultSubject = (content: FakeMailContent) =>
  content.code !== undefined ? `${content.code} is your verification code` : content.link !== undefined ? "Confirm your email address" : "Hello"

const defaultText = ({ code, link }: FakeMailContent) =>
  [
    "Hello,",
    ...(code === undefined ? [] : [`Your verification code is ${code}. It expires in 10 minutes.`]),
    ...(link === undefined ? [] : [`${code === undefined ? "Confirm" : "Or confirm"} your email address by opening this link:\n${link}`]),
    ...(code === undefined && link === undefined ? ["Thanks for shopping with us."] : ["If you did not ask for this, you can ignore this email."]),
    "Example Shop"
  ].join("\n\n")

/** A centred single-column layout, as most transactional templates have. */
const defaultHtml = ({ code, link }: FakeMailContent) => {
  const rows = [
    `<p>Hello,</p>`,
    ...(code === undefined
      ? []
      : [`<p>Your verification code is:</p><p style="font-size:28px;letter-spacing:4px"><strong>${escapeHtml(code)}</strong></p><p>It expires in 10 minutes.</p>`]),
    ...(link === undefined
      ? []
      : [
        `<p><a href="${escapeHtml(link)}" style="background:#2563eb;color:#fff;padding:12px 24px;text-decoration:none">Confirm email address</a></p>`,
        `<p style="font-size:12px">Or paste this link into your browser: ${escapeHtml(link)}</p>`
      ]),
    code === undefined && link === undefined ? `<p>Thanks for shopping with us.</p>` : `<p>If you did not ask for this, you can ignore this email.</p>`
  ]
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Example Shop</title></head>
<body style="margin:0;background:#f4f4f5"><table role="presentation" width="100%" cellpadding="0" cellspacing="0"><tr><td align="center">
<table role="presentation" width="600" cellpadding="0" cellspacing="0" style="max-width:600px;background:#fff">
<tr><td style="padding:32px;font-family:Helvetica,Arial,sans-serif">${rows.join("\n")}</td></tr>
<tr><td style="padding:16px;font-size:12px;color:#71717a">Example Shop, 1 Market Street, Springfield</td></tr>
</table></td></tr></table></body></html>`
}

/** The JSON body of POST /test/messages (without `aliasId`) for this fake mail; throws when the API would refuse it. */
export const fakeMailRequest = (content: FakeMailContent = {}): TestMessageRequest => {
  const text = content.text === undefined ? defaultText(content) : content.text
  const html = content.html === true ? defaultHtml(content) : typeof content.html === "string" ? content.html : null
  const request: TestMessageRequest = {
    from: content.from ?? "Example Shop <no-reply@shop.example.com>",
    subject: content.subject ?? defaultSubject(content),
    text,
    html,
    ...(content.attachments === undefined ? {} : {
      attachments: content.attachments.map((a) => ({
        filename: a.filename,
        contentType: a.contentType ?? "application/octet-stream",
        contentBase64: Buffer.from(typeof a.content === "string" ? Buffer.from(a.content, "utf8") : a.content).toString("base64")
      }))
    })
  }
  const refused = parseMailbox(request.from) === undefined ? { from: "invalid_mailbox" } : validateTestMessage(request)
  if (refused !== undefined) throw new Error(`fake mail the API would refuse: ${JSON.stringify(refused)}`)
  return request
}

/** The raw bytes of this fake mail to `to`, as sent over SMTP. */
export const fakeMail = (options: FakeMailOptions): Uint8Array =>
  buildTestMessage(fakeMailRequest(options), { to: options.to, date: options.date ?? FakeMailDate })
