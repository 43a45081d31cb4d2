/**
 * Every domain error, by feature. Services fail with these; they name the rule that refused
 * a request and carry its data, and say nothing of HTTP: the server maps each one to its
 * Problem answer in one place (packages/server/src/platform/ProblemMapping.ts).
 */
import type { AccountError } from "./accounts/errors.ts"
import type { AliasError } from "./aliases/errors.ts"
import type { DeskError } from "./desks/errors.ts"
import type { MailDomainError } from "./domains/errors.ts"
import type { ExportError } from "./exports/errors.ts"
import type { MessageError } from "./messages/errors.ts"
import type { PlanError } from "./plans/errors.ts"
import type { RuleError } from "./rules/errors.ts"
import type { PushError } from "./push/errors.ts"
import type { SearchQueryError } from "./search/query.ts"
import type { SharingError } from "./sharing/errors.ts"
import type { TagError } from "./tags/errors.ts"
import type { TestMailError } from "./testmail/errors.ts"
import type { TokenError } from "./tokens/errors.ts"
import type { WebhookError } from "./webhooks/errors.ts"

export * from "./accounts/errors.ts"
export * from "./aliases/errors.ts"
export * from "./desks/errors.ts"
export * from "./domains/errors.ts"
export * from "./exports/errors.ts"
export * from "./messages/errors.ts"
export * from "./plans/errors.ts"
export * from "./rules/errors.ts"
export * from "./push/errors.ts"
export * from "./sharing/errors.ts"
export * from "./tags/errors.ts"
export * from "./testmail/errors.ts"
export * from "./tokens/errors.ts"
export * from "./webhooks/errors.ts"
export { InvalidSearchDate, type SearchQueryError, SearchQueryTooLong, SearchQueryTooManyTerms } from "./search/query.ts"

export type DomainError =
  | AccountError
  | AliasError
  | DeskError
  | MailDomainError
  | ExportError
  | MessageError
  | PlanError
  | RuleError
  | PushError
  | SearchQueryError
  | SharingError
  | TagError
  | TestMailError
  | TokenError
  | WebhookError
