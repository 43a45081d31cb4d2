/**
 * MailboxAccess: who reaches a mailbox, and how (architecture.md, "MailboxAccess"; decisions.md,
 * "Sharing a mailbox"). A mailbox is an alias with its mail. Its owner reaches it as `owner`; with
 * sharing, a guest reaches it as `viewer` (reads it, keeps its own marks and tags) or
 * `collaborator` (may also delete, restore and empty the trash); anyone else not at all.
 *
 * Every message read and action of the store selects its mailboxes through `mailboxes`, so
 * sharing changes this service, not each query. Today only owners reach a mailbox: the
 * condition is the message's own account.
 */
import type { AliasRole } from "@burnbox/domain"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema, type Statement } from "effect/sql"

/** How an account reaches a mailbox. */
export type MailboxRole = typeof AliasRole.Type

/** What a statement selects mailboxes for: reading their mail (and keeping one's own marks on it), or deleting from them (trash, restore, empty the trash). */
export type MailboxUse = "read" | "delete"

/** Whether a role may use a mailbox so. */
export const roleAllows = (role: MailboxRole, use: MailboxUse): boolean => use === "read" || role !== "viewer"

/** The accounts whose mail an account reads, while only owners read a mailbox: its own. */
const ownAccountOnly = (accountId: number): Effect.Effect<ReadonlyArray<number>> => Effect.succeed([accountId])

export class MailboxAccess extends Context.Service<MailboxAccess, {
  /** How `accountId` reaches the mailbox of `aliasId`; none for a stranger (or no such alias). */
  readonly role: (accountId: number, aliasId: number) => Effect.Effect<Option.Option<MailboxRole>>
  /**
   * The condition a row of `messages` (or of the search index, which has the same `account_id`)
   * meets when it is in a mailbox `accountId` may use so. `row` is the row's name in the statement
   * (`m` for `m.account_id`); without it the column is unqualified.
   */
  readonly mailboxes: (accountId: number, use: MailboxUse, row?: string) => Statement.Fragment
  /**
   * The accounts whose mailboxes `accountId` reads (its own, and with sharing the owners of what
   * it was shared): whose mail events can change what it lists (Realtime's events name the owner).
   */
  readonly accountsReadBy: (accountId: number) => Effect.Effect<ReadonlyArray<number>>
}>()("burnbox/MailboxAccess") {
  /** Owners only (sharing is not there yet): a mailbox is reached by the account that owns its alias. */
  static readonly layer = Layer.effect(MailboxAccess, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const owned = SqlSchema.findAll({
      Request: Schema.Struct({ accountId: Schema.Int, aliasId: Schema.Int }),
      // A row is the answer; what it holds is not read.
      Result: Schema.Struct({}),
      execute: ({ accountId, aliasId }) => sql`SELECT 1 FROM aliases WHERE id = ${aliasId} AND account_id = ${accountId}`
    })
    const role = Effect.fn("MailboxAccess.role")(function*(accountId: number, aliasId: number) {
      const rows = yield* owned({ accountId, aliasId })
      return rows.length > 0 ? Option.some<MailboxRole>("owner") : Option.none()
    }, Effect.orDie)

    const mailboxes = (accountId: number, _use: MailboxUse, row?: string) =>
      row === undefined ? sql`account_id = ${accountId}` : sql`${sql.literal(row)}.account_id = ${accountId}`

    return MailboxAccess.of({ role, mailboxes, accountsReadBy: ownAccountOnly })
  }))
}
