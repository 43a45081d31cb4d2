/**
 * The whole contract: one group per feature, each declared in its feature's folder
 * (`<feature>/Api.ts`, next to its schemas and errors), composed here in the order the OpenAPI
 * document lists them, with what applies to every endpoint.
 */
import { HttpApi, OpenApi } from "effect/http-api"
import { AccountGroup } from "./accounts/Api.ts"
import { AliasesGroup } from "./aliases/Api.ts"
import { ValidationErrors } from "./auth/Access.ts"
import { AuthGroup } from "./auth/Api.ts"
import { DesksGroup } from "./desks/Api.ts"
import { ExportsGroup } from "./exports/Api.ts"
import { MessagesGroup } from "./messages/Api.ts"
import { PushGroup } from "./push/Api.ts"
import { SharingGroup } from "./sharing/Api.ts"
import { NoticesGroup } from "./notices/Api.ts"
import { RulesGroup } from "./rules/Api.ts"
import { TagsGroup } from "./tags/Api.ts"
import { TestMailGroup } from "./testmail/Api.ts"
import { TokensGroup } from "./tokens/Api.ts"
import { WebhooksGroup } from "./webhooks/Api.ts"

/** The whole contract, served under {base_url} = {site_url}/api/v1. */
export class BurnboxApi extends HttpApi.make("burnbox")
  .add(AuthGroup)
  .add(TokensGroup)
  .add(AccountGroup)
  .add(TagsGroup)
  .add(AliasesGroup)
  .add(SharingGroup)
  .add(MessagesGroup)
  .add(ExportsGroup)
  .add(TestMailGroup)
  .add(WebhooksGroup)
  .add(NoticesGroup)
  .add(DesksGroup)
  .add(RulesGroup)
  .add(PushGroup)
  .middleware(ValidationErrors)
  .prefix("/api/v1")
  .annotate(HttpApi.PayloadParseOptions, { onExcessProperty: "error", errors: "all" })
  .annotate(HttpApi.QueryParseOptions, { errors: "all" })
  .annotateMerge(OpenApi.annotations({
    title: "burnbox API",
    version: "2026-08-31",
    description: "Receive-only disposable email with an automation API."
  }))
{}
