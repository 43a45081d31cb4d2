import { Schema } from "effect"
import { Account, SessionAccount } from "./Account.ts"
import { Alias } from "../aliases/Alias.ts"
import { MailDomain } from "../domains/MailDomain.ts"
import { PushSettings } from "../push/Push.ts"
import { TagWithCount } from "../tags/Tag.ts"

/** Spec 2.4, bearer form: exactly user, aliases, domains, tags. */
export const BearerBootstrap = Schema.Struct({
  user: Account,
  aliases: Schema.Array(Alias),
  domains: Schema.Array(MailDomain),
  tags: Schema.Array(TagWithCount)
}).annotate({ identifier: "BearerBootstrap" })

/** Spec 2.4, cookie-session form: adds csrfToken, mercure and push; the user adds isAdmin and handle. */
export const SessionBootstrap = Schema.Struct({
  user: SessionAccount,
  aliases: Schema.Array(Alias),
  domains: Schema.Array(MailDomain),
  tags: Schema.Array(TagWithCount),
  csrfToken: Schema.String,
  mercure: Schema.Struct({ hubUrl: Schema.String, topic: Schema.String }),
  push: PushSettings
}).annotate({ identifier: "SessionBootstrap" })

export const Bootstrap = Schema.Union([SessionBootstrap, BearerBootstrap])
