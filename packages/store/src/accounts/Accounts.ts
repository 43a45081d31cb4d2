import { hash, verify } from "@node-rs/argon2"
import {
  type Account,
  EmailTaken,
  MailboxDensity,
  PlanCode,
  type PlanEntitlements,
  PlanOverrides,
  ResolvedPlan,
  type SessionAccount,
  toPlanLimits
} from "@burnbox/domain"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema, type Statement } from "effect/sql"
import { lockAccountFor } from "../platform/AccountLocks.ts"
import { IdRow } from "../platform/Rows.ts"
import { now } from "../platform/Time.ts"
import { pgJson } from "../platform/PgText.ts"
import { Entitlements } from "../plans/Entitlements.ts"
import { accountStorageUsedOf } from "../messages/MailCounts.ts"

export interface AccountRow {
  readonly id: number
  readonly email: string
  readonly plan: PlanCode
  readonly isAdmin: boolean
  readonly handle: string | null
  readonly mailboxDensity: MailboxDensity
  readonly pushEnabled: boolean
  readonly pushNudgeDismissed: boolean
  readonly storageUsedBytes: number
  readonly aliasesLifetimeClaimed: number
  readonly activeAliasCount: number
  readonly entitlements: PlanEntitlements
  readonly overrides: PlanOverrides
}

/** An account as `select` reads it: the row, its plan's entitlements and how many aliases are active. */
const AccountRecord = Schema.Struct({
  id: Schema.Int,
  email: Schema.String,
  password_hash: Schema.String,
  plan: PlanCode,
  is_admin: Schema.Boolean,
  handle: Schema.NullOr(Schema.String),
  mailbox_density: MailboxDensity,
  push_enabled: Schema.Boolean,
  push_nudge_dismissed: Schema.Boolean,
  /** Read as float8: a number, exact far beyond any quota. */
  storage_used_bytes: Schema.Number,
  aliases_lifetime_claimed: Schema.Int,
  active_alias_count: Schema.Int,
  plan_entitlements: ResolvedPlan,
  overrides: PlanOverrides
})
type AccountRecord = typeof AccountRecord.Type

const toRow = (record: AccountRecord): AccountRow => ({
  id: record.id,
  email: record.email,
  plan: record.plan,
  isAdmin: record.is_admin,
  handle: record.handle,
  mailboxDensity: record.mailbox_density,
  pushEnabled: record.push_enabled,
  pushNudgeDismissed: record.push_nudge_dismissed,
  storageUsedBytes: record.storage_used_bytes,
  aliasesLifetimeClaimed: record.aliases_lifetime_claimed,
  activeAliasCount: record.active_alias_count,
  overrides: record.overrides,
  entitlements: record.plan_entitlements
})

const NewAccount = Schema.Struct({
  email: Schema.String,
  emailKey: Schema.String,
  passwordHash: Schema.String,
  plan: PlanCode,
  isAdmin: Schema.Boolean,
  createdAt: Schema.Date
})

export const emailKey = (email: string): string => email.trim().toLowerCase()

const argon2Options = { algorithm: 2 /* Argon2id */, memoryCost: 19_456, timeCost: 2, parallelism: 1 }
/** Verified when the email is unknown, so a miss costs as much as a wrong password. */
const dummyHash = hash("burnbox-dummy-password", argon2Options)

export const toAccount = (row: AccountRow): Account => ({
  id: row.id,
  email: row.email,
  storageUsedBytes: row.storageUsedBytes,
  storageQuotaBytes: row.entitlements.storageQuotaBytes,
  aliasesLifetimeClaimed: row.aliasesLifetimeClaimed,
  activeAliasCount: row.activeAliasCount,
  mailboxDensity: row.mailboxDensity,
  plan: toPlanLimits(row.entitlements)
})

export const toSessionAccount = (row: AccountRow): SessionAccount => ({
  ...toAccount(row),
  isAdmin: row.isAdmin,
  handle: row.handle
})

export class Accounts extends Context.Service<Accounts, {
  readonly create: (input: { email: string; password: string; plan?: PlanCode; isAdmin?: boolean }) => Effect.Effect<AccountRow, EmailTaken>
  readonly get: (id: number) => Effect.Effect<AccountRow | undefined>
  readonly findByEmail: (email: string) => Effect.Effect<AccountRow | undefined>
  /** The account when the password matches; constant work whether or not the email exists. */
  readonly authenticate: (email: string, password: string) => Effect.Effect<AccountRow | undefined>
  /**
   * The one use case of a plan change (an operator's `admin account plan`, billing, tests): the
   * account's plan becomes `plan`, and every feature's registered effect (Entitlements.onPlanChange)
   * runs in the same transaction.
   */
  readonly changePlan: (id: number, plan: PlanCode) => Effect.Effect<AccountRow>
  /** The same use case for the account's overrides (`admin account override`): they become `overrides`. */
  readonly changeOverrides: (id: number, overrides: PlanOverrides) => Effect.Effect<AccountRow>
  readonly setDensity: (id: number, density: MailboxDensity) => Effect.Effect<void>
  /** Whether any account exists yet (the start banner tells how to create the first). */
  readonly anyExists: Effect.Effect<boolean>
}>()("burnbox/Accounts") {
  static readonly layer = Layer.effect(Accounts, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const entitlements = yield* Entitlements

    const select = (where: Statement.Fragment) =>
      sql`
        SELECT a.id, a.email, a.password_hash, a.plan, a.is_admin, a.handle, a.mailbox_density, a.push_enabled, a.push_nudge_dismissed,
               ${accountStorageUsedOf(sql, "a")} AS storage_used_bytes,
               coalesce((SELECT c.lifetime FROM alias_claim_counts c WHERE c.account_id = a.id), 0) AS aliases_lifetime_claimed,
               ${activeAliasCount(sql)} AS active_alias_count,
               ${entitlements.column("a")} AS plan_entitlements, a.overrides
        FROM accounts a
        WHERE ${where}`
    const byId = SqlSchema.findOneOption({ Request: Schema.Int, Result: AccountRecord, execute: (id) => select(sql`a.id = ${id}`) })
    const byEmailKey = SqlSchema.findOneOption({
      Request: Schema.String,
      Result: AccountRecord,
      execute: (key) => select(sql`a.email_key = ${key}`)
    })
    const insert = SqlSchema.findOneOption({
      Request: NewAccount,
      Result: IdRow,
      execute: (account) =>
        sql`
        INSERT INTO accounts (email, email_key, password_hash, plan, is_admin, created_at)
        VALUES (${account.email}, ${account.emailKey}, ${account.passwordHash}, ${account.plan}, ${account.isAdmin}, ${account.createdAt})
        ON CONFLICT (email_key) DO NOTHING
        RETURNING id`
    })

    const get = (id: number) => byId(id).pipe(Effect.map((record) => Option.isSome(record) ? toRow(record.value) : undefined), Effect.orDie)
    const findRecord = (email: string) => byEmailKey(emailKey(email)).pipe(Effect.map(Option.getOrUndefined), Effect.orDie)
    const mustGet = (id: number) => get(id).pipe(Effect.flatMap((row) => row ? Effect.succeed(row) : Effect.die(new Error(`account ${id} vanished`))))

    const create = Effect.fn("Accounts.create")(function*(input: { email: string; password: string; plan?: PlanCode; isAdmin?: boolean }) {
      const passwordHash = yield* Effect.promise(() => hash(input.password, argon2Options))
      const createdAt = yield* now
      const inserted = yield* insert({
        email: input.email.trim(),
        emailKey: emailKey(input.email),
        passwordHash,
        plan: input.plan ?? "free",
        isAdmin: input.isAdmin ?? false,
        createdAt
      }).pipe(Effect.orDie)
      if (Option.isNone(inserted)) return yield* Effect.fail(new EmailTaken())
      return yield* mustGet(inserted.value.id)
    })

    const authenticate = Effect.fn("Accounts.authenticate")(function*(email: string, password: string) {
      const record = yield* findRecord(email)
      const ok = yield* Effect.promise(async () => verify(record?.password_hash ?? await dummyHash, password).catch(() => false))
      return record !== undefined && ok ? toRow(record) : undefined
    })

    /** Changes the plan row or overrides of an account with `update`, then applies the change's effects; one transaction. */
    const changeWith = (id: number, update: Statement.Statement<unknown>) =>
      sql.withTransaction(Effect.gen(function*() {
        // Lock order (platform/AccountLocks.ts): the effects that count aliases take the alias
        // counts lock, which comes before the account row.
        yield* lockAccountFor(sql, "aliasCounts", id).pipe(Effect.orDie)
        const before: PlanEntitlements = yield* entitlements.lock(id)
        yield* update
        const after = yield* entitlements.of(id)
        yield* entitlements.applyChange({ accountId: id, before, after })
      })).pipe(Effect.orDie, Effect.andThen(mustGet(id)))

    const changePlan = Effect.fn("Accounts.changePlan")((id: number, plan: PlanCode) =>
      changeWith(id, sql`UPDATE accounts SET plan = ${plan} WHERE id = ${id}`))
    const changeOverrides = Effect.fn("Accounts.changeOverrides")((id: number, overrides: PlanOverrides) =>
      changeWith(id, sql`UPDATE accounts SET overrides = ${pgJson(overrides)}::jsonb WHERE id = ${id}`))

    return Accounts.of({
      anyExists: sql<{ readonly any: boolean }>`SELECT EXISTS (SELECT 1 FROM accounts) AS any`.pipe(
        Effect.orDie,
        Effect.map((rows) => rows[0]?.any === true)
      ),
      create,
      get,
      findByEmail: (email) => findRecord(email).pipe(Effect.map((record) => record && toRow(record))),
      authenticate,
      changePlan,
      changeOverrides,
      setDensity: (id, density) => sql`UPDATE accounts SET mailbox_density = ${density} WHERE id = ${id}`.pipe(Effect.orDie, Effect.asVoid)
    })
  }))
}

/** Aliases receiving mail now (paused ones do not count toward activeAliasCap). */
const activeAliasCount = (sql: SqlClient.SqlClient) =>
  sql`(SELECT count(*)::int FROM aliases WHERE account_id = a.id AND status = 'active')`
