import { BurnboxApi, CurrentPrincipal } from "@burnbox/domain"
import { BurnboxConfig, MessageActions, Messages, MessageWaits } from "@burnbox/store"
import { Duration, Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { withProblems } from "../platform/ProblemMapping.ts"
import { conditionalJson } from "../platform/Conditional.ts"

/**
 * The HTML view is a document of its own: no script, no plugins, no navigation, no forms, in
 * a sandbox with an opaque origin. Images only inline (data:, cid:), or from https: once the
 * reader asked for remote images.
 */
export const htmlViewPolicy = (remoteImages: boolean) =>
  [
    "default-src 'none'",
    `img-src data: cid:${remoteImages ? " https:" : ""}`,
    "style-src 'unsafe-inline'",
    "font-src data:",
    "form-action 'none'",
    "frame-ancestors 'self'",
    "base-uri 'none'",
    "sandbox"
  ].join("; ")

/** A preview is an image shown by itself in a sandbox. */
const previewPolicy = "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; sandbox"

/** Headers every served mail body carries, so no browser sniffs it into something runnable. */
const bodyHeaders = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "private, no-cache"
}

/** RFC 6266: an ASCII fallback name and the exact UTF-8 name. */
const contentDisposition = (kind: "attachment" | "inline", filename: string) => {
  const fallback = filename.replace(/[^\x20-\x7e]|["\\;]/g, "_")
  const encoded = encodeURIComponent(filename).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
  return `${kind}; filename="${fallback}"; filename*=UTF-8''${encoded}`
}

export const MessagesHttp = HttpApiBuilder.group(BurnboxApi, "messages", Effect.fn(function*(handlers) {
  const messages = yield* Messages
  const actions = yield* MessageActions
  const config = yield* BurnboxConfig
  const waits = yield* MessageWaits
  return handlers
    .handle("list", ({ query: { wait, ...page } }) =>
      withProblems(Effect.flatMap(CurrentPrincipal, (p) =>
        wait === undefined ? messages.list(p.accountId, page) : waits.list(p.accountId, page, Duration.seconds(wait)))))
    .handle("get", ({ params, query: { wait } }) =>
      withProblems(Effect.flatMap(CurrentPrincipal, (p) =>
        wait === undefined
          ? messages.detail(p.accountId, params.id, config.baseUrl)
          : waits.detail(p.accountId, params.id, config.baseUrl, Duration.seconds(wait)))).pipe(Effect.flatMap(conditionalJson)))
    .handle("raw", ({ params }) => withProblems(Effect.flatMap(CurrentPrincipal, (p) => messages.raw(p.accountId, params.id))))
    .handle("updateState", ({ params, payload }) =>
      withProblems(Effect.flatMap(CurrentPrincipal, (p) => actions.updateState(p.accountId, params.id, payload, p.kind))))
    .handle("bulk", ({ payload }) => withProblems(Effect.flatMap(CurrentPrincipal, (p) => actions.bulk(p.accountId, payload))))
    .handle("emptyTrash", ({ query }) => withProblems(Effect.flatMap(CurrentPrincipal, (p) => actions.emptyTrash(p.accountId, query.alias))))
    .handle("remove", ({ params, query }) =>
      withProblems(Effect.flatMap(CurrentPrincipal, (p) => actions.remove(p.accountId, params.id, query.permanent === "1" || query.permanent === "true"))))
    .handle("restore", ({ params }) => withProblems(Effect.flatMap(CurrentPrincipal, (p) => actions.restore(p.accountId, params.id))))
    .handle("html", ({ params, query }) =>
      withProblems(Effect.flatMap(CurrentPrincipal, (p) => actions.html(p.accountId, params.id, query.remote === "1"))).pipe(
        Effect.map((body) =>
          HttpServerResponse.text(body.html, {
            contentType: "text/html; charset=utf-8",
            headers: { ...bodyHeaders, "content-security-policy": htmlViewPolicy(body.remoteImagesAllowed) }
          })
        )
      ))
    .handle("remoteImagePreference", ({ params, payload }) =>
      withProblems(Effect.flatMap(CurrentPrincipal, (p) => actions.setRemoteImagePreference(p.accountId, params.id, payload.alwaysLoad))))
    .handle("attachment", ({ params, query }) =>
      withProblems(Effect.flatMap(CurrentPrincipal, (p) =>
        actions.attachment(p.accountId, params.messageId, params.attachmentId, query.confirm === "1"))).pipe(
        // Always a download, never rendered in our origin; a dangerous file only as opaque bytes.
        Effect.map((file) =>
          HttpServerResponse.uint8Array(file.content, {
            contentType: file.dangerous ? "application/octet-stream" : file.mimeType,
            headers: {
              ...bodyHeaders,
              "content-disposition": contentDisposition("attachment", file.filename),
              "content-security-policy": "default-src 'none'; sandbox"
            }
          })
        )
      ))
    .handle("attachmentPreview", ({ params }) =>
      withProblems(Effect.flatMap(CurrentPrincipal, (p) => actions.attachmentPreview(p.accountId, params.messageId, params.attachmentId))).pipe(
        Effect.map((file) =>
          HttpServerResponse.uint8Array(file.content, {
            contentType: file.mimeType,
            headers: {
              ...bodyHeaders,
              "content-disposition": contentDisposition("inline", file.filename),
              "content-security-policy": previewPolicy
            }
          })
        )
      ))
}))
