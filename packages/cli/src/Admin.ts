/** `burnbox admin ...`: operator commands, each printing one JSON document on stdout. */
import { isValidPassword, parseOverrides, PasswordLength, type PlanCode, Scopes, type Scope, toPlanLimits } from "@burnbox/domain"
import { Accounts, Aliases, CompactionBatch, Desks, Domains, ServiceKeys, StorageCompaction, Tokens, toMailDomain } from "@burnbox/store"
import { Effect, Redacted } from "effect"
import { type Args, CliError, flag, required } from "./Args.ts"

const planCodes: ReadonlyArray<PlanCode> = ["free", "premium", "pro"]

const plan = (args: Args, name = "plan"): PlanCode | undefined => {
  const value = flag(args, name)
  if (value === undefined) return undefined
  if (!planCodes.includes(value as PlanCode)) throw new CliError("invalid_plan", `--${name} takes free, premium or pro`)
  return value as PlanCode
}

const findAccount = Effect.fnUntraced(function*(email: string) {
  const accounts = yield* Accounts
  const account = yield* accounts.findByEmail(email)
  if (account === undefined) throw new CliError("account_not_found", `no account with email ${email}`)
  return account
})

export const admin = (args: Args) =>
  Effect.gen(function*() {
    const [group, action, ...rest] = args.positional
    const key = `${group ?? ""} ${action ?? ""}`.trim()
    switch (key) {
      case "account create": {
        const accounts = yield* Accounts
        const email = required(args, "email")
        const password = required(args, "password")
        if (!isValidPassword(password)) throw new CliError("invalid_password", `--password takes ${PasswordLength.min} to ${PasswordLength.max} characters`)
        const account = yield* accounts.create({ email, password, plan: plan(args) ?? "free", isAdmin: args.flags.has("admin") }).pipe(
          Effect.catchTag("EmailTaken", () => Effect.die(new CliError("email_taken", `an account with email ${email} exists already`)))
        )
        return { id: account.id, email: account.email, plan: account.plan }
      }
      case "account plan": {
        const accounts = yield* Accounts
        const account = yield* findAccount(required(args, "email"))
        const next = plan(args)
        if (next === undefined) throw new CliError("missing_flag", "--plan is required")
        // The one plan-change use case: every feature's downgrade or upgrade effect runs with it.
        const updated = yield* accounts.changePlan(account.id, next)
        return { id: updated.id, email: updated.email, plan: updated.plan }
      }
      case "account override": {
        const accounts = yield* Accounts
        const account = yield* findAccount(required(args, "email"))
        let overrides = account.overrides
        if (args.flags.has("clear")) overrides = {}
        const set = flag(args, "set")
        if (set !== undefined) {
          const parsed = parseOverrides(set)
          if (!parsed.ok) throw new CliError("invalid_override", parsed.error)
          overrides = { ...overrides, ...parsed.overrides }
        }
        if (set === undefined && !args.flags.has("clear")) throw new CliError("missing_flag", "--set key=value[,...] or --clear is required")
        const updated = yield* accounts.changeOverrides(account.id, overrides)
        return {
          id: updated.id,
          email: updated.email,
          plan: toPlanLimits(updated.entitlements),
          requestsPerMinute: updated.entitlements.requestsPerMinute,
          requestsPerDay: updated.entitlements.requestsPerDay
        }
      }
      case "token create": {
        const tokens = yield* Tokens
        const account = yield* findAccount(required(args, "email"))
        const scopes = required(args, "scopes").split(",").map((s) => s.trim()).filter((s) => s.length > 0)
        const unknown = scopes.filter((s) => !(Scopes as ReadonlyArray<string>).includes(s))
        if (scopes.length === 0 || unknown.length > 0 || new Set(scopes).size !== scopes.length) {
          throw new CliError("invalid_scopes", `--scopes takes distinct values of ${Scopes.join(", ")}${unknown.length > 0 ? `; unknown: ${unknown.join(", ")}` : ""}`)
        }
        const name = flag(args, "name") ?? "admin token"
        if (name.length < 1 || name.length > 80) throw new CliError("invalid_name", "--name takes 1 to 80 characters")
        // Operators may issue tokens on any plan; the ten-active rule still holds.
        const created = yield* tokens.issue(account.id, { name, scopes: scopes as Array<Scope> }).pipe(
          Effect.catchTag("TokenLimitReached", (e) => Effect.die(new CliError("token_limit_reached", `at most ${e.limit} tokens may be active`)))
        )
        return { id: created.token.id, secret: Redacted.value(created.secret) }
      }
      case "domain add": {
        const domains = yield* Domains
        const name = rest[0] ?? flag(args, "name")
        if (name === undefined || !/^[a-z0-9.-]+\.[a-z]{2,}$/i.test(name)) throw new CliError("invalid_domain", "give a domain name, e.g. burnbox admin domain add mail.example.com")
        const tier = flag(args, "tier") ?? "public"
        if (tier !== "public" && tier !== "premium_only") throw new CliError("invalid_tier", "--tier takes public or premium_only")
        const row = yield* domains.add(name, tier)
        return toMailDomain(row, true)
      }
      case "domain retire": {
        const domains = yield* Domains
        const name = rest[0] ?? flag(args, "name")
        if (name === undefined) throw new CliError("invalid_domain", "give the domain name to retire")
        const row = yield* domains.retire(name)
        if (row === undefined) throw new CliError("domain_not_found", `no domain named ${name}`)
        return toMailDomain(row, true)
      }
      case "desk grant":
      case "desk revoke": {
        // decisions.md "Protected operator desks": prints the Alias, whose canSend then tells.
        const desks = yield* Desks
        const aliases = yield* Aliases
        const address = required(args, "alias")
        const desk = action === "grant" ? yield* desks.grant(address) : yield* desks.revoke(address)
        if (desk === undefined) {
          throw new CliError("alias_not_found", action === "grant" ? `no claimed, active alias ${address}` : `no claimed alias ${address}`)
        }
        const owned = yield* aliases.list(desk.accountId, true)
        const alias = owned.find((a) => a.id === desk.aliasId)
        if (alias === undefined) throw new CliError("alias_not_found", `no claimed alias ${address}`)
        return alias
      }
      case "keys rotate": {
        // The old key stays published (and signing) as previous for seven days.
        const keys = yield* ServiceKeys
        return yield* keys.rotate
      }
      case "storage status":
        return yield* (yield* StorageCompaction).status
      case "storage compact": {
        // Converts mail stored before migration 0028 while the service runs (issue #36 item 7):
        // resumable; --batches N stops after N batches (a later run goes on where it stopped).
        const count = (name: string) => {
          const value = flag(args, name)
          if (value === undefined) return undefined
          if (!/^[1-9][0-9]{0,6}$/.test(value)) throw new CliError("invalid_number", `--${name} takes a whole number from 1`)
          return Number(value)
        }
        const maxBatches = count("batches")
        return yield* (yield* StorageCompaction).run({ batchSize: count("batch") ?? CompactionBatch, ...(maxBatches === undefined ? {} : { maxBatches }) })
      }
      default:
        throw new CliError("unknown_command", `unknown admin command "${key}"; see burnbox help`)
    }
  })
