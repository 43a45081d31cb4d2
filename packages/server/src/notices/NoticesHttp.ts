import { BurnboxApi, CurrentPrincipal } from "@burnbox/domain"
import { Notices } from "@burnbox/store"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"

export const NoticesHttp = HttpApiBuilder.group(BurnboxApi, "notices", Effect.fn(function*(handlers) {
  const notices = yield* Notices
  return handlers.handle("list", () => Effect.flatMap(CurrentPrincipal, (p) => notices.list(p.accountId)).pipe(Effect.map((items) => ({ items }))))
}))
