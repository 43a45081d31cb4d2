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
  endpointHostOf,
  type FeatureNotInPlan,
  type ShareGrant,
  ShareGrantNotFound,
  type ShareGrantKindPath,
  subscriptionReaches,
  WebhookSubscription,
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
import { liveGuestShare, MailboxAccess } from "./MailboxAccess.ts"
import { notifyChanges } from "../realtime/Realtime.ts"

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

/** A share that still stands: offered, or accepted (live, or held by the owner's plan). */
export const standingShare = (row: string) => `${row}.status IN ('pending', 'active')`

/**
 * A burn ends every share of the alias (the guest is told `share_ended`, not how), in the burn's
 * own statement (a data-modifying step of it, those `where` keeps: when the alias was burned).
 */
export const endSharesOfBurned = (sql: SqlClient.SqlClient, aliasId: number, at: Date, where: Statement.Fragment = sql`true`) =>
  sql`
    UPDATE shares s SET status = 'ended', ended_at = ${at}, ended_by = 'burn'
    WHERE s.alias_id = ${aliasId} AND ${sql.literal(standingShare("s"))} AND ${where}`

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
  /** GET /aliases/{id}/share-grants: every guest endpoint and guest token reaching the owner's mailbox (spec 2.17). */
  readonly grants: (ownerId: number, aliasId: number) => Effect.Effect<ReadonlyArray<ShareGrant>, ShareTargetNotFound>
  /** POST /aliases/{id}/share-grants/acknowledge: the owner has seen them (isNewToOwner false). */
  readonly acknowledgeGrants: (ownerId: number, aliasId: number) => Effect.Effect<void, ShareTargetNotFound>
  /**
   * DELETE /aliases/{id}/share-grants/{kind}/{subjectId}: ends one grant while the guest keeps the
   * mailbox, for good. A webhook's queued deliveries of this mailbox are abandoned; a token stops
   * reaching the mailbox on its next request (MailboxAccess).
   */
  readonly revokeGrant: (ownerId: number, aliasId: number, kind: ShareGrantKindPath, subjectId: number) =>
    Effect.Effect<void, ShareTargetNotFound | ShareGrantNotFound>
  /** GET /share-grants/revoked: the guest's stopped access (spec 2.17). */
  readonly revoked: (guestId: number) => Effect.Effect<ReadonlyArray<RevokedShareGrant>>
  /** The account's handle, given now if it has none (inside the caller's transaction when there is one). */
  readonly handleOf: (accountId: number) => Effect.Effect<string>
}>()("burnbox/Shares") {
  static readonly layer = Layer.effect(Shares, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const entitlements = yield* Entitlements
    const access = yield* MailboxAccess

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
        WHERE ${where} AND ${sql.literal(standingShare("s"))}
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
          SELECT guest_id AS id FROM shares s WHERE s.alias_id = ${aliasId} AND ${sql.literal(standingShare("s"))}`.pipe(Effect.flatMap(idRows))
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
        WHERE s.id = ${shareId} AND s.alias_id = ${aliasId} AND s.owner_id = ${ownerId} AND ${sql.literal(standingShare("s"))}
        RETURNING s.id`.pipe(Effect.flatMap(idRows), Effect.orDie)
      if (changed.length === 0) return yield* Effect.fail(new ShareNotFound({ shareId }))
      const [answer] = yield* selectShares(sql`s.id = ${shareId}`)
      return answer!
    })

    /** The guests of the shares `where` selects hear that what they reach changed (their Mercure streams end and reconnect). */
    const notifyGuests = (where: Statement.Fragment, type: "share.started" | "share.stopped") =>
      sql<{ guest_id: number; alias_id: number }>`SELECT guest_id, alias_id FROM shares WHERE ${where}`.pipe(
        Effect.orDie,
        Effect.flatMap((rows) => notifyChanges(sql, rows.map((row) => ({ accountId: row.guest_id, type, aliasId: row.alias_id }))))
      )

    const end = Effect.fn("Shares.end")(function*(ownerId: number, aliasId: number, shareId: number) {
      const at = yield* now
      const ended = yield* sql`
        UPDATE shares s SET status = 'ended', ended_at = ${at}, ended_by = 'owner'
        WHERE s.id = ${shareId} AND s.alias_id = ${aliasId} AND s.owner_id = ${ownerId} AND ${sql.literal(standingShare("s"))}
        RETURNING s.id`.pipe(Effect.flatMap(idRows), Effect.orDie)
      if (ended.length === 0) return yield* Effect.fail(new ShareNotFound({ shareId }))
      yield* notifyGuests(sql`id = ${shareId}`, "share.stopped")
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
      yield* access.forgetGuests([guestId])
      yield* notifyGuests(sql`id = ${invitationId}`, "share.started")
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
        yield* notifyChanges(sql, [{ accountId: guestId, type: "share.stopped", aliasId }])
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    const ownerOf = (ownerId: number, aliasId: number) =>
      sql`SELECT id FROM aliases WHERE id = ${aliasId} AND account_id = ${ownerId} AND status <> 'reserved'`.pipe(
        Effect.flatMap(idRows),
        Effect.orDie,
        Effect.flatMap((rows) => rows.length > 0 ? Effect.void : Effect.fail(new ShareTargetNotFound({ aliasId })))
      )

    /** A grant as the owner's oversight reads it: one row per guest endpoint or token of a live guest, with its grant row if any. */
    const grantRows = rowsDecoder(Schema.Struct({
      kind: Schema.Literals(["webhook", "api_token"]),
      subject_id: Schema.Int,
      share_id: Schema.Int,
      guest_id: Schema.Int,
      guest_handle: Schema.NullOr(Schema.String),
      url: Schema.NullOr(Schema.String),
      subscription: Schema.NullOr(WebhookSubscription),
      delivery_status: Schema.NullOr(Schema.Literals(["active", "paused", "disabled"])),
      last_success_at: Schema.NullOr(IsoFromDate),
      last_failure_at: Schema.NullOr(IsoFromDate),
      last_used_at: Schema.NullOr(IsoFromDate),
      created_at: IsoFromDate,
      acknowledged_at: Schema.NullOr(IsoFromDate),
      revoked_at: Schema.NullOr(IsoFromDate),
      revoked_by: Schema.NullOr(Schema.Literals(["owner", "guest", "system"]))
    }))
    const currentGrants = (aliasId: number) =>
      sql`
        SELECT 'webhook' AS kind, w.id AS subject_id, s.id AS share_id, s.guest_id, gh.handle AS guest_handle, w.url, w.subscription,
               w.status AS delivery_status, w.last_success_at, w.last_failure_at, NULL::timestamptz AS last_used_at,
               greatest(w.created_at, s.accepted_at) AS created_at, g.acknowledged_at, g.revoked_at, g.revoked_by
        FROM shares s
        JOIN accounts gh ON gh.id = s.guest_id
        JOIN webhooks w ON w.account_id = s.guest_id AND w.deleted_at IS NULL
        LEFT JOIN share_grants g ON g.alias_id = s.alias_id AND g.webhook_id = w.id
        WHERE s.alias_id = ${aliasId} AND s.status = 'active'
        UNION ALL
        SELECT 'api_token', t.id, s.id, s.guest_id, gh.handle, NULL, NULL, NULL, NULL, NULL, t.last_used_at,
               greatest(t.created_at, s.accepted_at), g.acknowledged_at, g.revoked_at, g.revoked_by
        FROM shares s
        JOIN accounts gh ON gh.id = s.guest_id
        JOIN api_tokens t ON t.account_id = s.guest_id AND t.status <> 'revoked'
        LEFT JOIN share_grants g ON g.alias_id = s.alias_id AND g.api_token_id = t.id
        WHERE s.alias_id = ${aliasId} AND s.status = 'active'
        ORDER BY 1, 2`.pipe(
        Effect.flatMap(grantRows),
        Effect.orDie,
        // A guest endpoint is a grant when it can select this mailbox's events.
        Effect.map((rows) => rows.filter((row) => row.subscription === null || subscriptionReaches(row.subscription, aliasId)))
      )

    const grants = Effect.fn("Shares.grants")(function*(ownerId: number, aliasId: number) {
      yield* ownerOf(ownerId, aliasId)
      return (yield* currentGrants(aliasId)).map((row): ShareGrant => ({
        kind: row.kind,
        webhookId: row.kind === "webhook" ? row.subject_id : null,
        apiTokenId: row.kind === "api_token" ? row.subject_id : null,
        guestHandle: row.guest_handle,
        endpointHost: row.url === null ? null : endpointHostOf(row.url),
        createdAt: row.created_at,
        revokedAt: row.revoked_at,
        revokedBy: row.revoked_by,
        isNewToOwner: row.acknowledged_at === null,
        deliveryStatus: row.delivery_status,
        lastSuccessAt: row.last_success_at,
        lastFailureAt: row.last_failure_at,
        lastUsedAt: row.last_used_at
      }))
    })

    /** Writes (or updates) the grant row of a current grant: `set` names what changes. */
    const upsertGrant = (aliasId: number, row: { kind: "webhook" | "api_token"; subject_id: number; share_id: number; guest_id: number }, at: Date, set: Statement.Fragment) => {
      const webhookId = row.kind === "webhook" ? row.subject_id : null
      const tokenId = row.kind === "api_token" ? row.subject_id : null
      const target = row.kind === "webhook" ? sql`(alias_id, webhook_id) WHERE webhook_id IS NOT NULL` : sql`(alias_id, api_token_id) WHERE api_token_id IS NOT NULL`
      return sql`
        INSERT INTO share_grants AS g (share_id, alias_id, guest_id, kind, webhook_id, api_token_id, created_at)
        VALUES (${row.share_id}, ${aliasId}, ${row.guest_id}, ${row.kind}, ${webhookId}, ${tokenId}, ${at})
        ON CONFLICT ${target} DO NOTHING`.pipe(
        Effect.andThen(sql`UPDATE share_grants g SET ${set}
          WHERE g.alias_id = ${aliasId} AND ${row.kind === "webhook" ? sql`g.webhook_id = ${row.subject_id}` : sql`g.api_token_id = ${row.subject_id}`}`)
      )
    }

    const acknowledgeGrants = Effect.fn("Shares.acknowledgeGrants")(function*(ownerId: number, aliasId: number) {
      yield* ownerOf(ownerId, aliasId)
      const at = yield* now
      yield* sql.withTransaction(Effect.gen(function*() {
        for (const row of yield* currentGrants(aliasId)) {
          if (row.acknowledged_at === null) yield* upsertGrant(aliasId, row, at, sql`acknowledged_at = ${at}`)
        }
      })).pipe(Effect.orDie)
    })

    const revokeGrant = Effect.fn("Shares.revokeGrant")(function*(ownerId: number, aliasId: number, kind: ShareGrantKindPath, subjectId: number) {
      yield* ownerOf(ownerId, aliasId)
      const at = yield* now
      const wanted = kind === "webhooks" ? "webhook" : "api_token"
      const grant = (yield* currentGrants(aliasId)).find((row) => row.kind === wanted && row.subject_id === subjectId)
      if (grant === undefined) return yield* Effect.fail(new ShareGrantNotFound({ aliasId, subjectId }))
      if (grant.revoked_at !== null) return
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* upsertGrant(aliasId, grant, at, sql`revoked_at = ${at}, revoked_by = 'owner'`)
        if (wanted === "webhook") {
          // Its queued and retrying deliveries of this mailbox are abandoned (spec 6.5, rule 6).
          yield* sql`
            UPDATE webhook_deliveries d SET status = 'abandoned'
            FROM events e
            WHERE d.webhook_id = ${subjectId} AND d.status = 'pending' AND e.id = d.event_id AND e.alias_id = ${aliasId}`
        }
      })).pipe(Effect.orDie)
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
      const grantsRevoked = yield* sql`
        SELECT g.alias_id, g.kind, g.webhook_id, g.api_token_id, w.url, g.revoked_at,
               al.local_part || '@' || d.name AS alias_address, o.handle AS owner_handle
        FROM share_grants g
        JOIN shares s ON s.id = g.share_id
        JOIN aliases al ON al.id = g.alias_id
        JOIN domains d ON d.id = al.domain_id
        JOIN accounts o ON o.id = s.owner_id
        LEFT JOIN webhooks w ON w.id = g.webhook_id
        WHERE g.guest_id = ${guestId} AND g.revoked_by = 'owner' AND ${sql.literal(liveGuestShare("s"))}
        ORDER BY g.id`.pipe(Effect.flatMap(revokedGrantRows), Effect.orDie)
      const grantItems = grantsRevoked.map((row): RevokedShareGrant => ({
        aliasId: row.alias_id,
        aliasAddress: row.alias_address,
        ownerHandle: row.owner_handle,
        reason: "owner_revoked",
        reversible: false,
        kind: row.kind,
        webhookId: row.webhook_id,
        apiTokenId: row.api_token_id,
        endpointHost: row.url === null ? null : endpointHostOf(row.url),
        endedAt: row.revoked_at,
        revokedAt: row.revoked_at,
        revokedBy: "owner"
      }))
      return [...grantItems, ...rows.map((row): RevokedShareGrant => {
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
      })]
    })
    const revokedGrantRows = rowsDecoder(Schema.Struct({
      alias_id: Schema.Int,
      kind: Schema.Literals(["webhook", "api_token"]),
      webhook_id: Schema.NullOr(Schema.Int),
      api_token_id: Schema.NullOr(Schema.Int),
      url: Schema.NullOr(Schema.String),
      revoked_at: Schema.NullOr(IsoFromDate),
      alias_address: Schema.String,
      owner_handle: Schema.String
    }))

    /**
     * The plan effect (decisions.md): an owner without sharing in its plan (free) holds every live
     * share of its mailboxes (suspended: the guest reaches nothing, is told `share_suspended`);
     * with sharing (an upgrade) they resume. Decided from `after`, so it is idempotent.
     */
    const followPlan = (ownerId: number, sharing: boolean) =>
      Effect.gen(function*() {
        const at = yield* now
        if (sharing) {
          const resumed = yield* sql<{ guest_id: number; alias_id: number }>`UPDATE shares s SET suspended_at = NULL
                WHERE s.owner_id = ${ownerId} AND ${sql.literal(standingShare("s"))} AND s.suspended_at IS NOT NULL
                RETURNING s.guest_id, s.alias_id`
          yield* access.forgetGuests(resumed.map((row) => row.guest_id))
          yield* notifyChanges(sql, resumed.map((row) => ({ accountId: row.guest_id, type: "share.started" as const, aliasId: row.alias_id })))
        } else {
          const suspended = yield* sql<{ guest_id: number; alias_id: number }>`UPDATE shares s SET suspended_at = ${at}
                WHERE s.owner_id = ${ownerId} AND ${sql.literal(standingShare("s"))} AND s.suspended_at IS NULL
                RETURNING s.guest_id, s.alias_id`
          yield* notifyChanges(sql, suspended.map((row) => ({ accountId: row.guest_id, type: "share.stopped" as const, aliasId: row.alias_id })))
        }
      }).pipe(Effect.orDie)
    yield* entitlements.onPlanChange({ feature: "sharing", apply: ({ accountId, after }) => followPlan(accountId, planIncludes(after, "sharing")) })

    return Shares.of({ invite, list, changeRole, end, invitations, accept, decline, leave, grants, acknowledgeGrants, revokeGrant, revoked, handleOf })
  }))
}
