/**
 * @burnbox/domain: the contract and the pure rules; no I/O, so no layer to wire.
 *
 * One folder per feature, holding its schemas (`Alias.ts`, `Message.ts`...), its errors
 * (`errors.ts`), its pure policy and, where the feature has endpoints, its `HttpApiGroup`
 * (`Api.ts`): accounts, auth, tokens, tags, domains, aliases, messages, testmail, webhooks,
 * notices, plans, push, sharing. Beside them: `mail/` (MIME parsing, OTP and links, sanitizing), `search/`
 * (the query syntax), `net/` (the webhook URL and address policy), `platform/` (shared schemas
 * and the Problem errors). `Api.ts` composes `BurnboxApi` from the groups; `errors.ts` gathers
 * every domain error. Subpaths (`@burnbox/domain/mail/index`...) export what is not re-exported here.
 */
export * from "./auth/Access.ts"
export * from "./auth/SignIn.ts"
export * from "./accounts/Account.ts"
export * from "./aliases/Alias.ts"
export * from "./Api.ts"
export * from "./auth/Api.ts"
export * from "./auth/OpenApiSecurity.ts"
export * from "./tokens/Api.ts"
export * from "./accounts/Api.ts"
export * from "./tags/Api.ts"
export * from "./aliases/Api.ts"
export * from "./sharing/Api.ts"
export * from "./sharing/Share.ts"
export * from "./messages/Api.ts"
export * from "./exports/Api.ts"
export * from "./exports/Export.ts"
export * from "./testmail/Api.ts"
export * from "./webhooks/Api.ts"
export * from "./notices/Api.ts"
export * from "./desks/Api.ts"
export * from "./desks/DeskMail.ts"
export * from "./tokens/ApiToken.ts"
export * from "./accounts/Bootstrap.ts"
export * from "./platform/Common.ts"
export * from "./domains/MailDomain.ts"
export * from "./plans/Plan.ts"
export * from "./platform/Problem.ts"
export * from "./errors.ts"
export * from "./push/Push.ts"
export * from "./push/Api.ts"
export * from "./tags/Tag.ts"
export * from "./webhooks/Events.ts"
export * from "./messages/Message.ts"
export * from "./notices/Notice.ts"
export * from "./webhooks/Webhook.ts"
export * from "./rules/Api.ts"
export * from "./rules/Rule.ts"
