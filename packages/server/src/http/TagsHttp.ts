import { BurnboxApi, Conflict, CurrentPrincipal, NotFound } from "@burnbox/domain"
import { Tags } from "@burnbox/store"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"

const nameTaken = () => Effect.fail(new Conflict({ code: "tag_name_taken", message: "You already have a tag with this name." }))
const notFound = () => Effect.fail(NotFound.of("Tag"))

export const TagsHttp = HttpApiBuilder.group(BurnboxApi, "tags", Effect.fn(function*(handlers) {
  const tags = yield* Tags
  return handlers
    .handle("list", () => Effect.flatMap(CurrentPrincipal, (p) => tags.list(p.accountId)).pipe(Effect.map((items) => ({ items }))))
    .handle("create", ({ payload }) =>
      Effect.flatMap(CurrentPrincipal, (p) => tags.create(p.accountId, payload)).pipe(Effect.catchTag("TagNameTaken", nameTaken)))
    .handle("update", ({ params, payload }) =>
      Effect.flatMap(CurrentPrincipal, (p) => tags.update(p.accountId, params.id, payload)).pipe(
        Effect.catchTags({ TagNameTaken: nameTaken, TagNotFound: notFound })
      ))
    .handle("remove", ({ params }) =>
      Effect.flatMap(CurrentPrincipal, (p) => tags.remove(p.accountId, params.id)).pipe(Effect.catchTag("TagNotFound", notFound)))
}))
