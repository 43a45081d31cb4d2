import { hash, verify } from "@node-rs/argon2"
import {
  type Account,
  EmailTaken,
  type MailboxDensity,
  type PlanCode,
  type PlanEntitlements,
  type PlanOverrides,
  resolveEntitlements,
  type SessionAccount,
  toPlanLimits
} from "@burnbox/domain"
import { Context, Effect, Layer } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { now } from "../platform/Time.ts"

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
  readonly setPlan: (id: number, plan: PlanCode) => Effect.Effect<AccountRow>
  readonly setOverrides: (id: number, overrides: PlanOverrides) => Effect.Effect<AccountRow>
  readonly setDensity: (id: number, density: MailboxDensity) => Effect.Effect<void>
}>()("burnbox/Accounts") {
  static readonly layer = Layer.effect(Accounts, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    interface Raw {
      id: number
      email: string
      password_hash: string
      plan: PlanCode
      is_admin: boolean
      handle: string | null
      mailbox_density: MailboxDensity
      push_enabled: boolean
      push_nudge_dismissed: boolean
      storage_used_bytes: string | number | bigint
      aliases_lifetime_claimed: number
      active_alias_count: number
      entitlements: PlanEntitlements
      overrides: PlanOverrides
    }

    const toRow = (raw: Raw): AccountRow => ({
      id: raw.id,
      email: raw.email,
      plan: raw.plan,
      isAdmin: raw.is_admin,
      handle: raw.handle,
      mailboxDensity: raw.mailbox_density,
      pushEnabled: raw.push_enabled,
      pushNudgeDismissed: raw.push_nudge_dismissed,
      storageUsedBytes: Number(raw.storage_used_bytes),
      aliasesLifetimeClaimed: raw.aliases_lifetime_claimed,
      activeAliasCount: raw.active_alias_count,
      overrides: raw.overrides,
      entitlements: resolveEntitlements(raw.entitlements, raw.overrides)
    })

    const select = (where: Statement.Fragment) =>
      sql<Raw>`
        SELECT a.id, a.email, a.password_hash, a.plan, a.is_admin, a.handle, a.mailbox_density, a.push_enabled, a.push_nudge_dismissed,
               a.storage_used_bytes::float8 AS storage_used_bytes, a.aliases_lifetime_claimed,
               ${activeAliasCount(sql)} AS active_alias_count,
               p.entitlements, a.overrides
        FROM accounts a JOIN plans p ON p.code = a.plan
        WHERE ${where}`.pipe(Effect.orDie)

    const get = (id: number) => select(sql`a.id = ${id}`).pipe(Effect.map((rows) => rows[0] && toRow(rows[0])))
    const findRaw = (email: string) => select(sql`a.email_key = ${emailKey(email)}`).pipe(Effect.map((rows) => rows[0]))
    const mustGet = (id: number) => get(id).pipe(Effect.flatMap((row) => row ? Effect.succeed(row) : Effect.die(new Error(`account ${id} vanished`))))

    const create = Effect.fn("Accounts.create")(function*(input: { email: string; password: string; plan?: PlanCode; isAdmin?: boolean }) {
      const passwordHash = yield* Effect.promise(() => hash(input.password, argon2Options))
      const createdAt = yield* now
      const inserted = yield* sql<{ id: number }>`
        INSERT INTO accounts (email, email_key, password_hash, plan, is_admin, created_at)
        VALUES (${input.email.trim()}, ${emailKey(input.email)}, ${passwordHash}, ${input.plan ?? "free"}, ${input.isAdmin ?? false}, ${createdAt})
        ON CONFLICT (email_key) DO NOTHING
        RETURNING id`.pipe(Effect.orDie)
      const id = inserted[0]?.id
      if (id === undefined) return yield* Effect.fail(new EmailTaken())
      return yield* mustGet(id)
    })

    const authenticate = Effect.fn("Accounts.authenticate")(function*(email: string, password: string) {
      const raw = yield* findRaw(email)
      const ok = yield* Effect.promise(async () => verify(raw?.password_hash ?? await dummyHash, password).catch(() => false))
      return raw !== undefined && ok ? toRow(raw) : undefined
    })

    return Accounts.of({
      create,
      get,
      findByEmail: (email) => findRaw(email).pipe(Effect.map((raw) => raw && toRow(raw))),
      authenticate,
      setPlan: (id, plan) => sql`UPDATE accounts SET plan = ${plan} WHERE id = ${id}`.pipe(Effect.orDie, Effect.andThen(mustGet(id))),
      setOverrides: (id, overrides) =>
        sql`UPDATE accounts SET overrides = ${JSON.stringify(overrides)}::jsonb WHERE id = ${id}`.pipe(Effect.orDie, Effect.andThen(mustGet(id))),
      setDensity: (id, density) => sql`UPDATE accounts SET mailbox_density = ${density} WHERE id = ${id}`.pipe(Effect.orDie, Effect.asVoid)
    })
  }))
}

/** Aliases receiving mail now (paused ones do not count toward activeAliasCap). */
const activeAliasCount = (sql: SqlClient.SqlClient) =>
  sql`(SELECT count(*)::int FROM aliases WHERE account_id = a.id AND status = 'active')`
