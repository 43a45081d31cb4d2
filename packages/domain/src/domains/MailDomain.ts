import { Schema } from "effect"
import { Id } from "../platform/Common.ts"

export const DomainState = Schema.Literals(["active", "retired"])
export const DomainTier = Schema.Literals(["public", "premium_only"])
export type DomainTier = typeof DomainTier.Type

/** Spec 2.6: a receiving domain as one account sees it. */
export const MailDomain = Schema.Struct({
  id: Id,
  name: Schema.String,
  state: DomainState,
  tier: DomainTier,
  claimable: Schema.Boolean,
  upgradeRequired: Schema.Boolean
}).annotate({ identifier: "Domain" })
export type MailDomain = typeof MailDomain.Type

/** Whether an account may claim on a domain, and whether an upgrade would let it (spec 2.6). */
export const domainAccess = (
  domain: { readonly state: "active" | "retired"; readonly tier: DomainTier },
  earlyAccessDomains: boolean
): { claimable: boolean; upgradeRequired: boolean } => {
  const entitled = domain.tier === "public" || earlyAccessDomains
  return { claimable: domain.state === "active" && entitled, upgradeRequired: domain.state === "active" && !entitled }
}
