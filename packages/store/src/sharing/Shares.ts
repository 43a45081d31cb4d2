/**
 * Shares: how a mailbox is shared (decisions.md, "Sharing a mailbox"). The owner invites an
 * existing account by email with a role; the invited account accepts or declines; only an
 * accepted share reaches the mailbox (MailboxAccess reads `shares`). A handle is given to each
 * side the first time it takes part, and is all the other side ever sees.
 *
 * Rules: the owner's plan must include `sharing` (premium or pro: FeatureNotInPlan); at most
 * `MaxGuestsPerMailbox` live (pending or accepted) guests; one live share per guest; a mailbox
 * the caller does not own and an email no account has are answered alike (ShareTargetNotFound).
 */
import {
  AlreadyShared,
  type FeatureNotInPlan,
  planIncludes,
  type RevokedShareGrant,
  GuestLimitReached,
  InvitationNotFound,
  makeHandle,
  MaxGuestsPerMailbox,
  type Share,
  type ShareInvitation,
  ShareNotFound,
  ShareRole,
  ShareTargetNotFound
} from "@burnbox/domain"
import { aliasWords, cryptoRandom } from "@burnbox/domain/aliases/index"
import { Context, Effect, Layer, Schema } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { emailKey } from "../accounts/Accounts.ts"
import { Entitlements } from "../plans/Entitlements.ts"
import { IdRow, IsoFromDate, rowsDecoder } from "../platform/Rows.ts"
import { now } from "../platform/Time.ts"
import { liveGuestShare } from "./MailboxAccess.ts"

/** A live share as its owner lists it. */
const ShareRow = Schema.Struct({
  id: Schema.Int,
  guestHandle: Schema.String,
  role: ShareRole,
  status: Schema.Literals(["pending", "active", "suspended"]),
  createdAt: IsoFromDate,
  acceptedAt: Schema.NullOr(IsoFromDate)
})
const shareRows = rowsDecoder(ShareRow)

const InvitationRow = Schema.Struct({
  id: Schema.Int,
  aliasAddress: Schema.String,
  ownerHandle: Schema.String,
  role: ShareRole,
  createdAt: IsoFromDate
})
const invitationRows = rowsDecoder(InvitationRow)
const idRows = rowsDecoder(IdRow)
const handleRows = rowsDecoder(Schema.Struct({ handle: Schema.NullOr(Schema.String) }))

/** The statuses of a share that still stands: offered, or accepted. */
export const liveShare = (row: string) => `${row}.status IN ('pending', 'active')`

/**
 * A burn ends every share of the alias (the guest is told `share_ended`, not how), in the burn's
 * transaction: a statement for the caller's SQL client.
 */
export const endSharesOfBurned = (sql: SqlClient.SqlClient, aliasId: number, at: Date) =>
  sql`
    UPDATE shares SET status = 'ended', ended_at = ${at}, ended_by = 'burn'
    WHERE alias_id = ${aliasId} AND status IN ('pending', 'active')`.pipe(Effect.asVoid)

export class Shares extends Context.Service<Shares, {
  /** POST /aliases/{id}/shares: the owner invites the account with `email`. */
  readonly invite: (ownerId: number, aliasId: number, input: { readonly email: string; readonly role: ShareRole }) =>
    Effect.Effect<Share, ShareTargetNotFound | FeatureNotInPlan | AlreadyShared | GuestLimitReached>
  /** GET /aliases/{id}/shares: the live shares of the owner's mailbox. */
  readonly list: (ownerId: number, aliasId: number) => Effect.Effect<ReadonlyArray<Share>, ShareTargetNotFound>
  /** PATCH /aliases/{id}/shares/{shareId}: the owner changes a guest's role. */
  readonly changeRole: (ownerId: number, aliasId: number, shareId: number, role: ShareRole) => Effect.Effect<Share, ShareNotFound>
  /** DELETE /aliases/{id}/shares/{shareId}: the owner ends a share (the guest is told `share_ended`). */
  readonly end: (ownerId: number, aliasId: number, shareId: number) => Effect.Effect<void, ShareNotFound>
  /** GET /shares/invitations: the pending invitations to the caller. */
  readonly invitations: (guestId: number) => Effect.Effect<ReadonlyArray<ShareInvitation>>
  /** POST /shares/invitations/{id}/accept: the share reaches the mailbox from now on. */
  readonly accept: (guestId: number, invitationId: number) => Effect.Effect<void, InvitationNotFound>
  /** POST /shares/invitations/{id}/decline. */
  readonly decline: (guestId: number, invitationId: number) => Effect.Effect<void, InvitationNotFound>
  /**
   * DELETE /aliases/{id}/share: the guest leaves a mailbox it has a share of (active, or held by
   * the owner's plan); its own marks and tags on the mailbox's mail are deleted. No share is
   * answered as a stranger (ShareTargetNotFound).
   */
  readonly leave: (guestId: number, aliasId: number) => Effect.Effect<void, ShareTargetNotFound>
  /** GET /share-grants/revoked: the guest's stopped access (spec 2.17). */
  readonly revoked: (guestId: number) => Effect.Effect<ReadonlyArray<RevokedShareGrant>>
  /** The account's handle, given now if it has none (inside the caller's transaction when there is one). */
  readonly handleOf: (accountId: number) => Effect.Effect<string>
}>()("burnbox/Shares") {
  static readonly layer = Layer.effect(Shares, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const entitlements = yield* Entitlements

    /** Draws handles until one was never given out; records it, so it is never given again. */
    const newHandle = Effect.gen(function*() {
      const at = yield* now
      for (let attempt = 0; attempt < 50; attempt++) {
        const handle = makeHandle(
          aliasWords[cryptoRandom.nextInt(aliasWords.length)]!,
          aliasWords[cryptoRandom.nextInt(aliasWords.length)]!,
          cryptoRandom.nextInt(10_000)
        )
        const issued = yield* sql`
          INSERT INTO issued_handles (handle, issued_at) VALUES (${handle}, ${at})
          ON CONFLICT (handle) DO NOTHING RETURNING 1 AS id`.pipe(Effect.orDie)
        if (issued.length > 0) return handle
      }
      return yield* Effect.die(new Error("no free handle after 50 draws"))
    })

    const handleOf = Effect.fn("Shares.handleOf")(function*(accountId: number) {
      return yield* sql.withTransaction(Effect.gen(function*() {
        const [row] = yield* sql`SELECT handle FROM accounts WHERE id = ${accountId} FOR NO KEY UPDATE`.pipe(Effect.flatMap(handleRows))
        if (row === undefined) return yield* Effect.die(new Error(`account ${accountId} is gone`))
        if (row.handle !== null) return row.handle
        const handle = yield* newHandle
        yield* sql`UPDATE accounts SET handle = ${handle} WHERE id = ${accountId}`
        return handle
      })).pipe(Effect.orDie)
    })

    /** The owner's mailbox `aliasId` (not burned), locked so concurrent invitations count each other. */
    const ownedMailbox = (ownerId: number, aliasId: number) =>
      sql`SELECT id FROM aliases WHERE id = ${aliasId} AND account_id = ${ownerId} AND status IN ('active', 'paused')
          FOR NO KEY UPDATE`.pipe(
        Effect.flatMap(idRows),
        Effect.orDie,
        Effect.flatMap((rows) => rows.length > 0 ? Effect.void : Effect.fail(new ShareTargetNotFound({ aliasId })))
      )

    const selectShares = (where: Statement.Fragment) =>
      sql`
        SELECT s.id, g.handle AS "guestHandle", s.role,
               CASE WHEN s.suspended_at IS NOT NULL THEN 'suspended' ELSE s.status END AS status,
               s.created_at AS "createdAt", s.accepted_at AS "acceptedAt"
        FROM shares s JOIN accounts g ON g.id = s.guest_id
        WHERE ${where} AND ${sql.literal(liveShare("s"))}
        ORDER BY s.id`.pipe(Effect.flatMap(shareRows), Effect.orDie)

    const invite = Effect.fn("Shares.invite")(function*(ownerId: number, aliasId: number, input: { readonly email: string; readonly role: ShareRole }) {
      const at = yield* now
      return yield* sql.withTransaction(Effect.gen(function*() {
        yield* ownedMailbox(ownerId, aliasId)
        // The plan before the guest: a free owner must not learn which emails have accounts.
        yield* entitlements.require(ownerId, "sharing")
        const [guest] = yield* sql`SELECT id FROM accounts WHERE email_key = ${emailKey(input.email)}`.pipe(Effect.flatMap(idRows))
        if (guest === undefined) return yield* Effect.fail(new ShareTargetNotFound({ aliasId }))
        if (guest.id === ownerId) return yield* Effect.fail(new AlreadyShared({ aliasId }))
        const live = yield* sql`
          SELECT guest_id AS id FROM shares s WHERE s.alias_id = ${aliasId} AND ${sql.literal(liveShare("s"))}`.pipe(Effect.flatMap(idRows))
        if (live.some((row) => row.id === guest.id)) return yield* Effect.fail(new AlreadyShared({ aliasId }))
        if (live.length >= MaxGuestsPerMailbox) return yield* Effect.fail(new GuestLimitReached({ limit: MaxGuestsPerMailbox }))
        yield* handleOf(ownerId)
        yield* handleOf(guest.id)
        const [share] = yield* sql`
          INSERT INTO shares (alias_id, owner_id, guest_id, role, created_at)
          VALUES (${aliasId}, ${ownerId}, ${guest.id}, ${input.role}, ${at}) RETURNING id`.pipe(Effect.flatMap(idRows))
        const [answer] = yield* selectShares(sql`s.id = ${share!.id}`)
        return answer!
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    const list = Effect.fn("Shares.list")(function*(ownerId: number, aliasId: number) {
      const owned = yield* sql`SELECT id FROM aliases WHERE id = ${aliasId} AND account_id = ${ownerId} AND status <> 'reserved'`.pipe(
        Effect.flatMap(idRows),
        Effect.orDie
      )
      if (owned.length === 0) return yield* Effect.fail(new ShareTargetNotFound({ aliasId }))
      return yield* selectShares(sql`s.alias_id = ${aliasId} AND s.owner_id = ${ownerId}`)
    })

    const changeRole = Effect.fn("Shares.changeRole")(function*(ownerId: number, aliasId: number, shareId: number, role: ShareRole) {
      const changed = yield* sql`
        UPDATE shares s SET role = ${role}
        WHERE s.id = ${shareId} AND s.alias_id = ${aliasId} AND s.owner_id = ${ownerId} AND ${sql.literal(liveShare("s"))}
        RETURNING s.id`.pipe(Effect.flatMap(idRows), Effect.orDie)
      if (changed.length === 0) return yield* Effect.fail(new ShareNotFound({ shareId }))
      const [answer] = yield* selectShares(sql`s.id = ${shareId}`)
      return answer!
    })

    const end = Effect.fn("Shares.end")(function*(ownerId: number, aliasId: number, shareId: number) {
      const at = yield* now
      const ended = yield* sql`
        UPDATE shares s SET status = 'ended', ended_at = ${at}, ended_by = 'owner'
        WHERE s.id = ${shareId} AND s.alias_id = ${aliasId} AND s.owner_id = ${ownerId} AND ${sql.literal(liveShare("s"))}
        RETURNING s.id`.pipe(Effect.flatMap(idRows), Effect.orDie)
      if (ended.length === 0) return yield* Effect.fail(new ShareNotFound({ shareId }))
    })

    const invitations = Effect.fn("Shares.invitations")(function*(guestId: number) {
      return yield* sql`
        SELECT s.id, al.local_part || '@' || d.name AS "aliasAddress", o.handle AS "ownerHandle", s.role, s.created_at AS "createdAt"
        FROM shares s
        JOIN aliases al ON al.id = s.alias_id
        JOIN domains d ON d.id = al.domain_id
        JOIN accounts o ON o.id = s.owner_id
        WHERE s.guest_id = ${guestId} AND s.status = 'pending' AND s.suspended_at IS NULL
        ORDER BY s.id`.pipe(Effect.flatMap(invitationRows), Effect.orDie)
    })

    /** Moves the caller's pending, unsuspended invitation `id` on; InvitationNotFound when there is none. */
    const answerInvitation = (guestId: number, invitationId: number, set: Statement.Fragment) =>
      sql`
        UPDATE shares SET ${set}
        WHERE id = ${invitationId} AND guest_id = ${guestId} AND status = 'pending' AND suspended_at IS NULL
        RETURNING id`.pipe(
        Effect.flatMap(idRows),
        Effect.orDie,
        Effect.flatMap((rows) => rows.length > 0 ? Effect.void : Effect.fail(new InvitationNotFound({ invitationId })))
      )

    const accept = Effect.fn("Shares.accept")(function*(guestId: number, invitationId: number) {
      const at = yield* now
      yield* answerInvitation(guestId, invitationId, sql`status = 'active', accepted_at = ${at}`)
    })

    const decline = Effect.fn("Shares.decline")(function*(guestId: number, invitationId: number) {
      const at = yield* now
      yield* answerInvitation(guestId, invitationId, sql`status = 'declined', ended_at = ${at}`)
    })

    const leave = Effect.fn("Shares.leave")(function*(guestId: number, aliasId: number) {
      const at = yield* now
      return yield* sql.withTransaction(Effect.gen(function*() {
        const left = yield* sql`
          UPDATE shares SET status = 'left', ended_at = ${at}
          WHERE alias_id = ${aliasId} AND guest_id = ${guestId} AND status = 'active'
          RETURNING id`.pipe(Effect.flatMap(idRows))
        if (left.length === 0) return yield* Effect.fail(new ShareTargetNotFound({ aliasId }))
        // The guest's own state on the mailbox goes with it: its marks and its tags on the mail.
        yield* sql`
          DELETE FROM message_states s USING messages m
          WHERE s.account_id = ${guestId} AND m.id = s.message_id AND m.alias_id = ${aliasId} AND m.account_id <> ${guestId}`
        yield* sql`
          DELETE FROM message_tags t USING messages m
          WHERE t.account_id = ${guestId} AND m.id = t.message_id AND m.alias_id = ${aliasId} AND m.account_id <> ${guestId}`
        yield* sql`
          UPDATE share_grants SET revoked_at = ${at}, revoked_by = 'guest'
          WHERE share_id IN ${sql.in(left.map((r) => r.id))} AND revoked_at IS NULL`
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    const stoppedRows = rowsDecoder(Schema.Struct({
      alias_id: Schema.Int,
      status: Schema.Literals(["active", "ended", "left"]),
      stopped_at: Schema.NullOr(IsoFromDate)
    }))
    const revoked = Effect.fn("Shares.revoked")(function*(guestId: number) {
      // A whole share that stopped: suspended by the owner's plan (may resume), ended (by the owner
      // or a burn: not told which), or left. A stopped share of a mailbox the guest reaches again
      // (invited anew) is history, not an outage, and is not reported.
      const rows = yield* sql`
        SELECT s.alias_id, s.status, CASE WHEN s.status = 'active' THEN s.suspended_at ELSE s.ended_at END AS stopped_at
        FROM shares s
        WHERE s.guest_id = ${guestId} AND s.accepted_at IS NOT NULL
          AND (s.status IN ('ended', 'left') OR (s.status = 'active' AND s.suspended_at IS NOT NULL))
          AND NOT EXISTS (SELECT 1 FROM shares l WHERE l.guest_id = s.guest_id AND l.alias_id = s.alias_id AND l.id > s.id AND l.accepted_at IS NOT NULL)
          AND NOT EXISTS (SELECT 1 FROM shares l WHERE l.guest_id = s.guest_id AND l.alias_id = s.alias_id AND l.id <> s.id
                          AND ${sql.literal(liveGuestShare("l"))})
        ORDER BY s.id`.pipe(Effect.flatMap(stoppedRows), Effect.orDie)
      return rows.map((row): RevokedShareGrant => {
        const suspended = row.status === "active"
        return {
          aliasId: row.alias_id,
          aliasAddress: null,
          ownerHandle: null,
          reason: suspended ? "share_suspended" : row.status === "left" ? "guest_left" : "share_ended",
          reversible: suspended,
          kind: "share",
          webhookId: null,
          apiTokenId: null,
          endpointHost: null,
          endedAt: row.stopped_at,
          revokedAt: suspended ? null : row.stopped_at,
          revokedBy: null
        }
      })
    })

    /**
     * The plan effect (decisions.md): an owner without sharing in its plan (free) holds every live
     * share of its mailboxes (suspended: the guest reaches nothing, is told `share_suspended`);
     * with sharing (an upgrade) they resume. Decided from `after`, so it is idempotent.
     */
    const followPlan = (ownerId: number, sharing: boolean) =>
      Effect.gen(function*() {
        const at = yield* now
        yield* sharing
          ? sql`UPDATE shares SET suspended_at = NULL
                WHERE owner_id = ${ownerId} AND status IN ('pending', 'active') AND suspended_at IS NOT NULL`
          : sql`UPDATE shares SET suspended_at = ${at}
                WHERE owner_id = ${ownerId} AND status IN ('pending', 'active') AND suspended_at IS NULL`
      }).pipe(Effect.orDie)
    yield* entitlements.onPlanChange({ feature: "sharing", apply: ({ accountId, after }) => followPlan(accountId, planIncludes(after, "sharing")) })

    return Shares.of({ invite, list, changeRole, end, invitations, accept, decline, leave, revoked, handleOf })
  }))
}
