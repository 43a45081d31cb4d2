/**
 * Spec 4.1: the account group: the caller's account, storage and bootstrap, and what is read
 * with them (the receiving domains, mailbox density, push settings).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Access, Authentication, requires } from "../auth/Access.ts"
import { MailDomain } from "../domains/MailDomain.ts"
import { Errors as E } from "../platform/Problem.ts"
import { PushSettings } from "../push/Push.ts"
import { Account, DensityInput, MailboxDensity, StorageUsage } from "./Account.ts"
import { Bootstrap } from "./Bootstrap.ts"

export class AccountGroup extends HttpApiGroup.make("account")
  .add(
    HttpApiEndpoint.get("bootstrap", "/bootstrap", { success: Bootstrap }).annotate(Access, requires("read")),
    HttpApiEndpoint.get("me", "/me", { success: Account }).annotate(Access, requires("read")),
    HttpApiEndpoint.get("storage", "/storage", { success: StorageUsage }).annotate(Access, requires("read")),
    HttpApiEndpoint.get("domains", "/domains", { success: Schema.Struct({ items: Schema.Array(MailDomain) }) })
      .annotate(Access, requires("read")),
    HttpApiEndpoint.put("density", "/mailbox/density", {
      payload: DensityInput,
      success: Schema.Struct({ density: MailboxDensity }),
      error: E.ValidationFailed
    }).annotate(Access, requires("session")),
    HttpApiEndpoint.get("pushSettings", "/push/settings", { success: PushSettings }).annotate(Access, requires("session"))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Account" }))
{}
