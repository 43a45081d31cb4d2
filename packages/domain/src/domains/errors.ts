/** The rules of the mail domains aliases live on (spec 2.6, 4.3). */
import { Schema } from "effect"

/** No domain has this id. */
export class DomainNotFound extends Schema.TaggedError<DomainNotFound>()("DomainNotFound", {
  domainId: Schema.Int
}) {}

/** A retired domain keeps its aliases but takes no new ones. */
export class DomainRetired extends Schema.TaggedError<DomainRetired>()("DomainRetired", {
  domainId: Schema.Int
}) {}

export type MailDomainError = DomainNotFound | DomainRetired
