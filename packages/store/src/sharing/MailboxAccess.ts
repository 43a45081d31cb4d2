/**
 * MailboxAccess: who reaches a mailbox, and how (architecture.md, "MailboxAccess"; decisions.md,
 * "Sharing a mailbox"). A mailbox is an alias with its mail. Its owner reaches it as `owner`; a
 * guest with a live share (accepted, not suspended by the owner's plan, not ended) reaches it as
 * `viewer` (reads it, keeps its own marks and tags) or `collaborator` (may also delete, restore
 * and empty the trash); anyone else not at all, exactly as if it did not exist.
 *
 * Every message read and action of the store selects its mailboxes through `mailboxes`, so
 * sharing lives in this service, not in each query. The condition is read once per request:
 * an account's own mail is `m.account_id = $1` (the owner-only plan of every list, unchanged),
 * and only when the account is a live guest somewhere does `OR m.alias_id IN (...)` follow,
 * with the shared aliases read here (one indexed lookup of `shares`), not a subquery per row.
 */
import { type AliasRole, CurrentPrincipal } from "@burnbox/domain"
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { rowsDecoder } from "../platform/Rows.ts"

/** How an account reaches a mailbox. */
export type MailboxRole = typeof AliasRole.Type

/** What a statement selects mailboxes for: reading their mail (and keeping one's own marks on it), or deleting from them (trash, restore, empty the trash). */
export type MailboxUse = "read" | "delete"

/** Whether a role may use a mailbox so. */
export const roleAllows = (role: MailboxRole, use: MailboxUse): boolean => use === "read" || role !== "viewer"

/** A mailbox another account shared with the reader, live now. */
export interface SharedMailbox {
  readonly aliasId: number
  readonly ownerId: number
  readonly role: "viewer" | "collaborator"
}

/** Which mailboxes a statement reaches: all the account may use so, or its own alone (`excludeShared`). */
export interface MailboxOptions {
  readonly excludeShared?: boolean
}

/** The mailboxes an account reaches, as one request reads them. */
export interface Reach {
  /** The condition on a row of `messages` (or of the search index, which has the same `account_id` and `alias_id`). */
  readonly condition: Statement.Fragment
  /** Whether the condition reaches beyond the account's own mail (it is a live guest somewhere and shared mail is not excluded). */
  readonly shared: boolean
  /** The accounts whose mail the condition reaches: the reader's own, and the owners of the shared mailboxes it reaches. */
  readonly owners: ReadonlyArray<number>
  /** The condition's first part: the account's own mail (`account_id = ...`). */
  readonly own: Statement.Fragment
  /**
   * The shared mailboxes the condition reaches besides, in its `alias_id IN (...)` part: none but
   * a guest's. They are never the reader's own, so a list may read its own mail and each of these
   * apart (each on its own index, in list order) and merge them.
   */
  readonly sharedMailboxes: ReadonlyArray<SharedMailbox>
}

/** A live share: accepted, not ended, not suspended by the owner's plan. */
export const liveGuestShare = (row: string) => `${row}.status = 'active' AND ${row}.suspended_at IS NULL`

/**
 * The bearer token the current request came with, if any: a guest token the owner revoked on a
 * mailbox (a ShareGrant) reaches that mailbox no more, from its next request on.
 */
export const callerToken: Effect.Effect<number | null> = Effect.map(
  Effect.serviceOption(CurrentPrincipal),
  (principal) => Option.isSome(principal) ? principal.value.tokenId : null
)

/** The condition that the share `row` is not closed to `token` by its owner. */
const openTo = (sql: SqlClient.SqlClient, row: string, token: number | null) =>
  token === null
    ? sql`true`
    : sql`NOT EXISTS (SELECT 1 FROM share_grants g WHERE g.alias_id = ${sql.literal(row)}.alias_id AND g.api_token_id = ${token}
                      AND g.revoked_at IS NOT NULL)`

/**
 * How long a process trusts that an account is nobody's guest (reaches no shared mailbox), so that
 * most requests, an owner's, read no `shares` at all. Only that answer is kept: an account with
 * live shares reads them on every request, so a share that stops stops at once. A share that
 * starts (accepted, or resumed by the owner's upgrade) is forgotten at once in the process that
 * made it, and reaches the guest's requests on another process within this time.
 */
export const NotGuestCacheMs = 2_000

const SharedRow = Schema.Struct({ aliasId: Schema.Int, ownerId: Schema.Int, role: Schema.Literals(["viewer", "collaborator"]) })
const sharedRows = rowsDecoder(SharedRow)

/** The condition that the share `row` is live and open to the current request's token (for statements that list shared mailboxes). */
export const reachableShare = (sql: SqlClient.SqlClient, row: string) =>
  Effect.map(callerToken, (token) => sql`${sql.literal(liveGuestShare(row))} AND ${openTo(sql, row, token)}`)

export class MailboxAccess extends Context.Service<MailboxAccess, {
  /** How `accountId` reaches the mailbox of `aliasId`; none for a stranger, a former guest, or no such alias. */
  readonly role: (accountId: number, aliasId: number) => Effect.Effect<Option.Option<MailboxRole>>
  /**
   * The condition a row of `messages` (or of the search index) meets when it is in a mailbox
   * `accountId` may use so. `row` is the row's name in the statement (`m` for `m.account_id`);
   * without it the columns are unqualified.
   */
  readonly mailboxes: (accountId: number, use: MailboxUse, row?: string, options?: MailboxOptions) => Effect.Effect<Statement.Fragment>
  /** `mailboxes`, and whether it reaches shared mail. */
  readonly reach: (accountId: number, use: MailboxUse, row?: string, options?: MailboxOptions) => Effect.Effect<Reach>
  /** The mailboxes others shared with `accountId` that are live now. */
  readonly shared: (accountId: number) => Effect.Effect<ReadonlyArray<SharedMailbox>>
  /**
   * The accounts whose mailboxes `accountId` reads (its own, and the owners of what it was
   * shared): whose mail events can change what it lists (Realtime's events name the owner).
   */
  readonly accountsReadBy: (accountId: number) => Effect.Effect<ReadonlyArray<number>>
  /** A share of these guests started: their next request reads `shares` again (NotGuestCacheMs). */
  readonly forgetGuests: (accountIds: ReadonlyArray<number>) => Effect.Effect<void>
}>()("burnbox/MailboxAccess") {
  static readonly layer = Layer.effect(MailboxAccess, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /**
     * Accounts known to be nobody's guest, until when (ms), by the token their request came with
     * (a token the owner revoked reaches no share, while the same account's session still may).
     */
    const notGuest = new Map<number, Map<number | null, number>>()
    const forgetGuests = (accountIds: ReadonlyArray<number>) => Effect.sync(() => accountIds.forEach((id) => notGuest.delete(id)))

    const shared = Effect.fn("MailboxAccess.shared")(function*(accountId: number) {
      const at = yield* Clock.currentTimeMillis
      const token = yield* callerToken
      const until = notGuest.get(accountId)?.get(token)
      if (until !== undefined && until > at) return []
      const rows = yield* sql`
        SELECT s.alias_id AS "aliasId", s.owner_id AS "ownerId", s.role FROM shares s
        WHERE s.guest_id = ${accountId} AND ${sql.literal(liveGuestShare("s"))} AND ${openTo(sql, "s", token)}
        ORDER BY s.alias_id`.pipe(Effect.flatMap(sharedRows), Effect.orDie)
      if (rows.length === 0) {
        if (notGuest.size > 100_000) notGuest.clear()
        const byToken = notGuest.get(accountId) ?? new Map<number | null, number>()
        byToken.set(token, at + NotGuestCacheMs)
        notGuest.set(accountId, byToken)
      } else notGuest.get(accountId)?.delete(token)
      return rows
    })

    const role = Effect.fn("MailboxAccess.role")(function*(accountId: number, aliasId: number) {
      const token = yield* callerToken
      const rows = yield* sql`
        SELECT 'owner' AS role FROM aliases WHERE id = ${aliasId} AND account_id = ${accountId} AND status <> 'reserved'
        UNION ALL
        SELECT s.role FROM shares s
        WHERE s.alias_id = ${aliasId} AND s.guest_id = ${accountId} AND ${sql.literal(liveGuestShare("s"))} AND ${openTo(sql, "s", token)}`
        .pipe(Effect.flatMap(rowsDecoder(Schema.Struct({ role: Schema.Literals(["owner", "viewer", "collaborator"]) }))), Effect.orDie)
      return Option.fromUndefinedOr(rows[0]?.role)
    })

    const column = (row: string | undefined, name: string) => row === undefined ? sql.literal(name) : sql.literal(`${row}.${name}`)

    const reach = Effect.fn("MailboxAccess.reach")(function*(accountId: number, use: MailboxUse, row?: string, options: MailboxOptions = {}) {
      const own = sql`${column(row, "account_id")} = ${accountId}`
      const ownOnly: Reach = { condition: own, shared: false, owners: [accountId], own, sharedMailboxes: [] }
      if (options.excludeShared === true) return ownOnly
      const reached = (yield* shared(accountId)).filter((s) => roleAllows(s.role, use))
      if (reached.length === 0) return ownOnly
      return {
        condition: sql`(${own} OR ${column(row, "alias_id")} IN ${sql.in(reached.map((s) => s.aliasId))})`,
        shared: true,
        owners: [...new Set([accountId, ...reached.map((s) => s.ownerId)])],
        own,
        sharedMailboxes: reached
      }
    })

    const mailboxes = (accountId: number, use: MailboxUse, row?: string, options?: MailboxOptions) =>
      Effect.map(reach(accountId, use, row, options), (r) => r.condition)

    const accountsReadBy = (accountId: number) =>
      Effect.map(shared(accountId), (reached) => [...new Set([accountId, ...reached.map((m) => m.ownerId)])])

    return MailboxAccess.of({ role, mailboxes, reach, shared, accountsReadBy, forgetGuests })
  }))
}
