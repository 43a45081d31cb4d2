import {
  ActiveAliasCapReached,
  type Alias,
  AliasBurned,
  AliasLifetimeCapReached,
  AliasNotFound,
  AliasPaused,
  AliasStatus,
  AliasStyle,
  type AliasTimer,
  CandidateNotReserved,
  CandidatesPerReservation,
  type CandidateReservation,
  DailyClaimLimitReached,
  DomainNotFound,
  DomainRetired,
  DomainState,
  DomainTier,
  type EventAlias,
  ExpiringNoticeMs,
  FeatureNotInPlan,
  HourlyShuffleLimitReached,
  liveReservationCap,
  requestedTransition,
  ReservationCapReached,
  ReservationLifetimeMs,
  ReservationUnavailable,
  ResolvedPlan,
  SelfDestructNotInFuture,
  TransitionsConflict,
  type UpdateAlias
} from "@burnbox/domain"
import { cryptoRandom, generateLocalPart, type LocalPartStyle, type RandomSource } from "@burnbox/domain/aliases/index"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema, type Statement } from "effect/sql"
import { ownsActiveDesk } from "../desks/Desks.ts"
import { DomainRow } from "../domains/Domains.ts"
import { aliasLastReceivedOf, aliasReceivedCountOf, aliasStorageUsedOf, aliasUnreadCountOf } from "../messages/MailCounts.ts"
import { accountLockSpace, lockAccountFor } from "../platform/AccountLocks.ts"
import { Keyring, randomSecret } from "../platform/Keyring.ts"
import { CountRow, decodeRows, IdRow } from "../platform/Rows.ts"
import { appendEvent, eventRecord, insertEventRecords, type NewEvent, OutboxChannel } from "../webhooks/Outbox.ts"
import { changesFragment, notifyChanges } from "../realtime/Realtime.ts"
import { RateLimiter } from "../platform/RateLimiter.ts"
import { now } from "../platform/Time.ts"
import { pgJson } from "../platform/PgText.ts"
import { Entitlements } from "../plans/Entitlements.ts"
import { liveGuestShare, reachableShare } from "../sharing/MailboxAccess.ts"
import { endSharesOfBurned } from "../sharing/Shares.ts"

/** Where candidate randomness comes from; tests replace it with a seeded source. */
export class CandidateRandom extends Context.Service<CandidateRandom, RandomSource>()("burnbox/CandidateRandom") {
  static readonly layer = Layer.succeed(CandidateRandom, cryptoRandom)
}

type Status = typeof AliasStatus.Type

/** An alias as `select` reads it: the row (never a reserved candidate), its domain, and its owner's plan. */
const AliasRow = Schema.Struct({
  id: Schema.Int,
  account_id: Schema.Int,
  local_part: Schema.String,
  style: AliasStyle,
  status: AliasStatus,
  label: Schema.NullOr(Schema.String),
  note: Schema.NullOr(Schema.String),
  received_count: Schema.Int,
  rejected_count: Schema.Int,
  unread_count: Schema.Int,
  /** Read as float8. */
  storage_used_bytes: Schema.Number,
  push_enabled: Schema.Boolean,
  last_received_at: Schema.NullOr(Schema.Date),
  claimed_at: Schema.NullOr(Schema.Date),
  paused_at: Schema.NullOr(Schema.Date),
  burned_at: Schema.NullOr(Schema.Date),
  plan_paused: Schema.Boolean,
  self_destruct_at: Schema.NullOr(Schema.Date),
  self_destruct_suspended: Schema.Boolean,
  expiring_notified_at: Schema.NullOr(Schema.Date),
  domain_id: Schema.Int,
  domain_name: Schema.String,
  domain_state: DomainState,
  domain_tier: DomainTier,
  /** The owner's resolved plan (its trash window is the alias's `trash`). */
  plan: ResolvedPlan,
  /** Accounts the owner gave access to: live, accepted shares. */
  guest_count: Schema.Int,
  /** The owner has an active protected desk (spec 2.7 canSend). */
  can_send: Schema.Boolean
})
type Row = typeof AliasRow.Type
const decodeAliasRows = decodeRows(AliasRow)

/** A mailbox another account shared with the reader: the alias row, how the reader reaches it, the owner's handle, the reader's own unread count. */
const SharedAliasRow = Schema.Struct({
  ...AliasRow.fields,
  role: Schema.Literals(["viewer", "collaborator"]),
  owner_handle: Schema.String,
  reader_unread: Schema.Int,
  reader_push: Schema.Boolean
})
type SharedRow = typeof SharedAliasRow.Type
const decodeSharedRows = decodeRows(SharedAliasRow)

/** The owner's plan, and how many aliases the account ever claimed. */
const AccountPlanRow = Schema.Struct({ plan: ResolvedPlan, aliases_lifetime_claimed: Schema.Int })


/** A reservation's token, as its digest, of an account. */
const TokenOf = Schema.Struct({ accountId: Schema.Int, digest: Schema.Uint8Array })

const iso = (d: Date | null) => d?.toISOString() ?? null

export const toAlias = (row: Row): Alias => {
  const trashDays = row.plan.trashRetentionDays
  return {
    id: row.id,
    address: `${row.local_part}@${row.domain_name}`,
    localPart: row.local_part,
    domain: { id: row.domain_id, name: row.domain_name, state: row.domain_state },
    style: row.style,
    status: row.status,
    label: row.label,
    note: row.note,
    receivedCount: row.received_count,
    rejectedCount: row.rejected_count,
    unreadCount: row.unread_count,
    storageUsedBytes: row.storage_used_bytes,
    pushEnabled: row.push_enabled,
    lastReceivedAt: iso(row.last_received_at),
    claimedAt: iso(row.claimed_at),
    pausedAt: iso(row.paused_at),
    burnedAt: iso(row.burned_at),
    planPaused: row.plan_paused,
    selfDestructAt: iso(row.self_destruct_at),
    selfDestructSuspended: row.self_destruct_suspended,
    expiringNotifiedAt: iso(row.expiring_notified_at),
    domainTier: row.domain_tier,
    role: "owner",
    shared: false,
    ownerHandle: null,
    guestCount: row.guest_count,
    trash: { enabled: trashDays > 0, retentionDays: trashDays },
    ...(row.can_send ? { canSend: true } : {})
  }
}

/**
 * A mailbox shared with the reader, as the reader sees it (spec 2.7): its role, the owner's handle
 * and the owner's trash; never the owner's label, note, storage, timer or plan state, guestCount 0,
 * its own unread count and push preference.
 */
export const toSharedAlias = (row: SharedRow): Alias => {
  // canSend is the owner's: a guest never sends from a shared mailbox.
  const { canSend: _ownersDesk, ...alias } = toAlias(row)
  return {
    ...alias,
    label: null,
    note: null,
    unreadCount: row.reader_unread,
    storageUsedBytes: 0,
    pushEnabled: row.reader_push,
    planPaused: false,
    selfDestructAt: null,
    selfDestructSuspended: false,
    expiringNotifiedAt: null,
    role: row.role,
    shared: true,
    ownerHandle: row.owner_handle,
    guestCount: 0
  }
}

const toTimer = (row: Row): AliasTimer => ({
  id: row.id,
  selfDestructAt: iso(row.self_destruct_at),
  selfDestructSuspended: row.self_destruct_suspended,
  expiringNotifiedAt: iso(row.expiring_notified_at)
})

const eventAlias = (row: Row): EventAlias => ({ id: row.id, address: `${row.local_part}@${row.domain_name}`, label: row.label })

const startOfUtcDay = (at: Date) => new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate()))

export type Transition = "pause" | "resume" | "burn"

export class Aliases extends Context.Service<Aliases, {
  readonly list: (accountId: number, includeBurned: boolean) => Effect.Effect<ReadonlyArray<Alias>>
  readonly reserve: (accountId: number, input: { domainId: number; style: LocalPartStyle }) =>
    Effect.Effect<CandidateReservation, DomainNotFound | DomainRetired | FeatureNotInPlan | HourlyShuffleLimitReached | ReservationCapReached>
  readonly release: (accountId: number, token: string | undefined) => Effect.Effect<number>
  readonly claim: (accountId: number, input: {
    aliasId: number
    reservationToken: string
    label?: string | null | undefined
    note?: string | null | undefined
    selfDestructAt?: string | null | undefined
  }) => Effect.Effect<
    Alias,
    | ReservationUnavailable
    | CandidateNotReserved
    | DomainRetired
    | FeatureNotInPlan
    | SelfDestructNotInFuture
    | ActiveAliasCapReached
    | AliasLifetimeCapReached
    | DailyClaimLimitReached
  >
  readonly transition: (accountId: number, id: number, to: Transition) => Effect.Effect<Alias, AliasNotFound | AliasBurned | ActiveAliasCapReached>
  /** PATCH /aliases/{id}: label, note and the transition `action` or `status` asks for, in one transaction. */
  readonly change: (accountId: number, id: number, input: typeof UpdateAlias.Type) =>
    Effect.Effect<Alias, AliasNotFound | AliasBurned | ActiveAliasCapReached | TransitionsConflict>
  readonly setTimer: (accountId: number, id: number, at: string) =>
    Effect.Effect<AliasTimer, AliasNotFound | FeatureNotInPlan | AliasBurned | SelfDestructNotInFuture>
  readonly clearTimer: (accountId: number, id: number) => Effect.Effect<AliasTimer, AliasNotFound | AliasBurned>
  /** The address test mail for the alias goes to: the caller's, and active. */
  readonly injectableAddress: (accountId: number, id: number) => Effect.Effect<string, AliasNotFound | AliasPaused | AliasBurned>
  /** Burns aliases whose deadline passed and emits the 24-hour notices that are due. */
  readonly runTimers: Effect.Effect<{ burned: number; notified: number }>
  /** Applies a plan change: pause beyond the cap, suspend timers; or undo both on an upgrade. */
  readonly reconcilePlan: (accountId: number) => Effect.Effect<{ paused: number; resumed: number }>
  /** Deletes reserved candidates of ended or expired reservations. */
  readonly sweepReservations: Effect.Effect<number>
}>()("burnbox/Aliases") {
  static readonly layer = Layer.effect(Aliases, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const keyring = yield* Keyring
    const limiter = yield* RateLimiter
    const entitlements = yield* Entitlements
    const random = yield* CandidateRandom
    const tokenDigest = (token: string) => keyring.digest("reservation", token)

    /** The columns of AliasRow, of the alias `al`, its domain `d` and its owner `a`. */
    const aliasColumns = sql`
        al.id, al.account_id, al.local_part, al.style, al.status, al.label, al.note, ${aliasReceivedCountOf(sql, "al")} AS received_count,
        al.rejected_count, ${aliasUnreadCountOf(sql, "al")} AS unread_count, ${aliasStorageUsedOf(sql, "al")} AS storage_used_bytes, al.push_enabled,
        ${aliasLastReceivedOf(sql, "al")} AS last_received_at, al.claimed_at, al.paused_at, al.burned_at, al.plan_paused, al.self_destruct_at,
        al.self_destruct_suspended, al.expiring_notified_at,
        d.id AS domain_id, d.name AS domain_name, d.state AS domain_state, d.tier AS domain_tier,
        ${entitlements.column("a")} AS plan,
        (SELECT count(*)::int FROM shares s WHERE s.alias_id = al.id AND ${sql.literal(liveGuestShare("s"))}) AS guest_count,
        ${sql.literal(ownsActiveDesk("a"))} AS can_send`

    const select = (where: Statement.Fragment, lock = false) =>
      sql`
        SELECT ${aliasColumns}
        FROM aliases al
        JOIN domains d ON d.id = al.domain_id
        JOIN accounts a ON a.id = al.account_id
        WHERE ${where}
        ORDER BY al.id
        ${lock ? sql`FOR NO KEY UPDATE OF al` : sql``}`.pipe(Effect.flatMap(decodeAliasRows), Effect.orDie)

    const owned = (accountId: number, id: number, lock = false) =>
      select(sql`al.account_id = ${accountId} AND al.id = ${id} AND al.status <> 'reserved'`, lock).pipe(
        Effect.flatMap((rows) => (rows[0] ? Effect.succeed(rows[0]) : Effect.fail(new AliasNotFound({ aliasId: id }))))
      )

    const accountPlan = SqlSchema.findOne({
      Request: Schema.Int,
      Result: AccountPlanRow,
      execute: (accountId) =>
        sql`SELECT ${entitlements.column("a")} AS plan,
                   coalesce((SELECT c.lifetime FROM alias_claim_counts c WHERE c.account_id = a.id), 0) AS aliases_lifetime_claimed
            FROM accounts a WHERE a.id = ${accountId}`
    })
    /**
     * The owner's plan and lifetime claims, read under the account's alias counts lock (held until
     * the transaction ends): what a resume, a timer or a plan change decides from them stays true
     * until it commits. Take it before locking any of the account's alias rows.
     */
    const entitlementsOf = (accountId: number) =>
      lockAccountFor(sql, "aliasCounts", accountId).pipe(
        Effect.andThen(accountPlan(accountId)),
        Effect.orDie,
        Effect.map((row) => ({ ...row, resolved: row.plan }))
      )

    const countActive = SqlSchema.findOne({
      Request: Schema.Int,
      Result: CountRow,
      execute: (accountId) => sql`SELECT count(*)::int AS n FROM aliases WHERE account_id = ${accountId} AND status = 'active'`
    })
    const activeCount = (accountId: number) => countActive(accountId).pipe(Effect.orDie, Effect.map((row) => row.n))

    const endLiveReservations = SqlSchema.findAll({
      Request: Schema.Struct({ accountId: Schema.Int, at: Schema.Date, only: Schema.NullOr(Schema.Int) }),
      Result: IdRow,
      execute: ({ accountId, at, only }) =>
        sql`
          UPDATE alias_reservations SET ended_at = ${at}
          WHERE account_id = ${accountId} AND ended_at IS NULL ${only === null ? sql`` : sql`AND id = ${only}`}
          RETURNING id`
    })

    /** Ends the account's live reservations and frees their unclaimed candidates. */
    const endReservations = (accountId: number, at: Date, only?: number) =>
      Effect.gen(function*() {
        const ended = yield* endLiveReservations({ accountId, at, only: only ?? null }).pipe(Effect.orDie)
        if (ended.length === 0) return 0
        const freed = yield* sql`
          DELETE FROM aliases WHERE status = 'reserved' AND reservation_id IN ${sql.in(ended.map((r) => r.id))}
          RETURNING id`.pipe(Effect.orDie)
        return freed.length
      })

    const domainById = SqlSchema.findOneOption({
      Request: Schema.Int,
      Result: DomainRow,
      execute: (domainId) => sql`
        SELECT id, name, state, tier FROM domains WHERE id = ${domainId}`
    })
    /**
     * A new reservation with its first candidates, in one statement, when the account's live
     * reservations are under `cap` (counted under the reservations lock, which the statement takes:
     * migration 0024; run outside a transaction, it holds the lock for itself and its commit
     * alone); candidates whose address is taken are skipped (ON CONFLICT), and the caller draws
     * again for them.
     */
    const insertReservationUnderCap = SqlSchema.findOne({
      Request: Schema.Struct({
        accountId: Schema.Int,
        digest: Schema.Uint8Array,
        expiresAt: Schema.Date,
        at: Schema.Date,
        cap: Schema.Int,
        domainId: Schema.Int,
        style: AliasStyle,
        localParts: Schema.Array(Schema.String)
      }),
      Result: Schema.Struct({
        reservation_id: Schema.NullOr(Schema.Int),
        candidates: Schema.Array(Schema.Struct({ id: Schema.Int, local_part: Schema.String }))
      }),
      execute: ({ accountId, at, cap, digest, domainId, expiresAt, localParts, style }) => sql`
          WITH reservation AS (
            INSERT INTO alias_reservations (account_id, token_digest, expires_at)
            SELECT ${accountId}, ${digest}, ${expiresAt}
            WHERE burnbox_live_reservations_locked(${accountLockSpace("reservations")}::int4, ${accountId}::int4, ${at}) < ${cap}
            RETURNING id
          ), candidate AS (
            INSERT INTO aliases (account_id, domain_id, local_part, local_key, style, status, reservation_id)
            SELECT ${accountId}, ${domainId}, l, l, ${style}, 'reserved', r.id
            FROM reservation r, jsonb_array_elements_text(${pgJson(localParts)}::jsonb) AS l
            ON CONFLICT (domain_id, local_key) DO NOTHING
            RETURNING id, local_part
          )
          SELECT (SELECT id FROM reservation) AS reservation_id,
                 coalesce((SELECT json_agg(json_build_object('id', id, 'local_part', local_part)) FROM candidate), '[]'::json) AS candidates`
    })
    const insertCandidates = SqlSchema.findAll({
      Request: Schema.Struct({
        accountId: Schema.Int,
        domainId: Schema.Int,
        style: AliasStyle,
        reservationId: Schema.Int,
        localParts: Schema.Array(Schema.String)
      }),
      Result: Schema.Struct({ id: Schema.Int, local_part: Schema.String }),
      execute: ({ accountId, domainId, localParts, reservationId, style }) => sql`
            INSERT INTO aliases (account_id, domain_id, local_part, local_key, style, status, reservation_id)
            SELECT ${accountId}, ${domainId}, l, l, ${style}, 'reserved', ${reservationId}
            FROM jsonb_array_elements_text(${pgJson(localParts)}::jsonb) AS l
            ON CONFLICT (domain_id, local_key) DO NOTHING
            RETURNING id, local_part`
    })

    const reserve = Effect.fn("Aliases.reserve")(function*(accountId: number, input: { domainId: number; style: LocalPartStyle }) {
      const at = yield* now
      const found = yield* domainById(input.domainId).pipe(Effect.orDie)
      if (Option.isNone(found)) return yield* Effect.fail(new DomainNotFound({ domainId: input.domainId }))
      const domain = found.value
      // Read without the account's row lock (a transaction of its own that only took and dropped
      // it): the cap below is counted under the lock.
      const resolved = yield* entitlements.of(accountId)
      if (domain.state !== "active") return yield* Effect.fail(new DomainRetired({ domainId: domain.id }))
      if (domain.tier === "premium_only" && !resolved.earlyAccessDomains) {
        return yield* Effect.fail(new FeatureNotInPlan({ feature: "earlyAccessDomains" }))
      }
      if (!resolved.candidateShufflesUnlimited) {
        const decision = yield* limiter.hit(`shuffle:${accountId}`, [{ limit: resolved.candidateShufflesPerHour, seconds: 3600 }])
        if (!decision.allowed) {
          return yield* new HourlyShuffleLimitReached({ limit: resolved.candidateShufflesPerHour, retryAfter: decision.retryAfter })
        }
      }
      const token = randomSecret(24)
      const expiresAt = new Date(at.getTime() + ReservationLifetimeMs)
      const candidates = yield* Effect.gen(function*() {
        // Reservations are independent: each lives its ten minutes unless claimed or released. The
        // account's reservations lock makes counting the live ones and adding this one a single
        // step, without waiting on the account row (claims and mail delivery lock that).
        const cap = liveReservationCap(resolved)
        const draw = (count: number) => {
          const wanted = new Set<string>()
          while (wanted.size < count) wanted.add(generateLocalPart(input.style, random))
          return [...wanted]
        }
        const first = yield* insertReservationUnderCap({
          accountId,
          digest: tokenDigest(token),
          expiresAt,
          at,
          cap,
          domainId: domain.id,
          style: input.style,
          localParts: draw(CandidatesPerReservation)
        })
        if (first.reservation_id === null) return yield* new ReservationCapReached({ limit: cap })
        const picked = first.candidates.map((row) => ({ id: row.id, localPart: row.local_part }))
        // Taken addresses were skipped: draw again for them (rare; the reservation is already
        // committed, and these statements add to it under its id).
        for (let round = 0; picked.length < CandidatesPerReservation && round < 20; round++) {
          const inserted = yield* insertCandidates({
            accountId,
            domainId: domain.id,
            style: input.style,
            reservationId: first.reservation_id,
            localParts: draw(CandidatesPerReservation - picked.length)
          })
          for (const row of inserted) picked.push({ id: row.id, localPart: row.local_part })
        }
        return picked
      }).pipe(Effect.catch((error) => error instanceof ReservationCapReached ? Effect.fail(error) : Effect.die(error)))
      if (candidates.length < CandidatesPerReservation) {
        return yield* Effect.die(new Error(`could not find ${CandidatesPerReservation} free ${input.style} addresses on ${domain.name}`))
      }
      return {
        reservationToken: token,
        expiresAt: expiresAt.toISOString(),
        candidates: candidates.map((c) => ({ id: c.id, localPart: c.localPart, domain: domain.name, address: `${c.localPart}@${domain.name}` }))
      }
    })

    const reservationIdOf = SqlSchema.findOneOption({
      Request: TokenOf,
      Result: IdRow,
      execute: ({ accountId, digest }) => sql`
        SELECT id FROM alias_reservations WHERE account_id = ${accountId} AND token_digest = ${digest}`
    })

    const release = Effect.fn("Aliases.release")(function*(accountId: number, token: string | undefined) {
      const at = yield* now
      if (token === undefined) return yield* endReservations(accountId, at).pipe(sql.withTransaction, Effect.orDie)
      const reservation = yield* reservationIdOf({ accountId, digest: tokenDigest(token) }).pipe(Effect.orDie)
      if (Option.isNone(reservation)) return 0
      return yield* endReservations(accountId, at, reservation.value.id).pipe(sql.withTransaction, Effect.orDie)
    })

    /**
     * What a claim is decided on that no other claim changes, in one read without a lock: the
     * reservation its token names, the candidate (reserved by it) with its domain, and the owner's
     * plan, resolved and as stored (`plan_code`, `overrides`: the claim's statement checks that
     * the plan it counted under is still this one). Null columns where the reservation or the
     * candidate is not found.
     */
    const claimTarget = SqlSchema.findOne({
      Request: Schema.Struct({ accountId: Schema.Int, digest: Schema.Uint8Array, aliasId: Schema.Int }),
      Result: Schema.Struct({
        plan: ResolvedPlan,
        plan_code: Schema.String,
        overrides: Schema.String,
        reservation_id: Schema.NullOr(Schema.Int),
        expires_at: Schema.NullOr(Schema.Date),
        ended_at: Schema.NullOr(Schema.Date),
        candidate_id: Schema.NullOr(Schema.Int),
        local_part: Schema.NullOr(Schema.String),
        domain_id: Schema.NullOr(Schema.Int),
        domain_name: Schema.NullOr(Schema.String),
        state: Schema.NullOr(DomainState),
        tier: Schema.NullOr(DomainTier)
      }),
      execute: ({ accountId, aliasId, digest }) => sql`
          SELECT ${entitlements.column("a")} AS plan, a.plan AS plan_code, a.overrides::text AS overrides,
                 r.id AS reservation_id, r.expires_at, r.ended_at,
                 c.id AS candidate_id, c.local_part, d.id AS domain_id, d.name AS domain_name, d.state, d.tier
          FROM accounts a
          LEFT JOIN alias_reservations r ON r.account_id = a.id AND r.token_digest = ${digest}
          LEFT JOIN aliases c ON c.id = ${aliasId} AND c.reservation_id = r.id AND c.status = 'reserved'
          LEFT JOIN domains d ON d.id = c.domain_id
          WHERE a.id = ${accountId}`
    })

    /**
     * The claim itself, one statement: it takes the account's alias counts lock and reads the
     * counts under it (`burnbox_alias_counts_locked`, migration 0024: fresh after the lock), and
     * only when they are under the plan's caps and the plan is still the one they were read for,
     * ends the reservation (while it is live: a release that came first wins), makes the
     * candidate active, frees the other candidates, counts the claim and appends (and notifies)
     * the event. Run outside a transaction, the lock is held for this statement and its commit
     * alone. Answers whether it claimed, and the counts it decided on.
     */
    const claimStatement = (input: {
      readonly accountId: number
      readonly aliasId: number
      readonly reservationId: number
      readonly at: Date
      readonly since: Date
      readonly planCode: string
      readonly overrides: string
      readonly caps: { readonly active: number; readonly lifetime: number; readonly perDay: number }
      readonly label: string | null
      readonly note: string | null
      readonly selfDestructAt: Date | null
      readonly event: NewEvent
    }) =>
      sql`
        WITH counts AS MATERIALIZED (
          SELECT * FROM burnbox_alias_counts_locked(${accountLockSpace("aliasCounts")}::int4, ${input.accountId}::int4, ${input.since})
        ), allowed AS MATERIALIZED (
          SELECT 1 FROM counts c WHERE c.plan = ${input.planCode} AND c.overrides = ${input.overrides}::jsonb
            AND c.active < ${input.caps.active} AND c.lifetime < ${input.caps.lifetime} AND c.today < ${input.caps.perDay}
        ), ended AS (
          UPDATE alias_reservations SET ended_at = ${input.at}
          WHERE id = ${input.reservationId} AND ended_at IS NULL AND expires_at > ${input.at} AND EXISTS (SELECT 1 FROM allowed)
          RETURNING id
        ), claimed AS (
          UPDATE aliases SET status = 'active', reservation_id = NULL, claimed_at = ${input.at}, label = ${input.label},
                 note = ${input.note}, self_destruct_at = ${input.selfDestructAt}
          WHERE id = ${input.aliasId} AND status = 'reserved' AND reservation_id = ${input.reservationId} AND EXISTS (SELECT 1 FROM ended)
          RETURNING id
        ), freed AS (
          DELETE FROM aliases WHERE status = 'reserved' AND reservation_id = ${input.reservationId} AND id <> ${input.aliasId}
            AND EXISTS (SELECT 1 FROM claimed)
        ), counted AS (
          INSERT INTO alias_claim_counts AS c (account_id, lifetime) SELECT ${input.accountId}, 1 WHERE EXISTS (SELECT 1 FROM claimed)
          ON CONFLICT (account_id) DO UPDATE SET lifetime = c.lifetime + 1
        ), event AS (${insertEventRecords(sql, [eventRecord(input.event)], sql`EXISTS (SELECT 1 FROM claimed)`)})
        SELECT EXISTS (SELECT 1 FROM claimed) AS claimed,
               c.plan = ${input.planCode} AND c.overrides = ${input.overrides}::jsonb AS same_plan, c.active, c.today, c.lifetime,
               -- the notifications go out at the commit, and only for a claim
               (SELECT count(*) FROM pg_notify(${OutboxChannel}, '') WHERE EXISTS (SELECT 1 FROM claimed)) AS notified,
               ${changesFragment(sql, [{ accountId: input.accountId, type: "alias.claimed", aliasId: input.aliasId }], sql`EXISTS (SELECT 1 FROM claimed)`)} AS published
        FROM counts c`.pipe(
        Effect.flatMap(decodeRows(Schema.Struct({
          claimed: Schema.Boolean,
          same_plan: Schema.Boolean,
          active: Schema.Int,
          today: Schema.Int,
          lifetime: Schema.Int
        }))),
        Effect.flatMap(([row]) => row === undefined ? Effect.die(new Error(`account ${input.accountId} not found`)) : Effect.succeed(row))
      )

    /**
     * A claim: what no other claim changes is read first, without a lock; the counting rules are
     * decided and the claim written in one statement under the account's alias counts lock
     * (claims, resumes and plan changes count active aliases under it), so claims of one account
     * queue only for that statement; the alias is read back after the commit. A plan change
     * between the two reads decides again on the new plan.
     */
    const claim = Effect.fn("Aliases.claim")(function*(accountId: number, input: {
      aliasId: number
      reservationToken: string
      label?: string | null | undefined
      note?: string | null | undefined
      selfDestructAt?: string | null | undefined
    }) {
      const at = yield* now
      const selfDestructAt = input.selfDestructAt === undefined || input.selfDestructAt === null ? null : new Date(input.selfDestructAt)
      const dayStart = startOfUtcDay(at)
      const decide = Effect.gen(function*() {
        const target = yield* claimTarget({ accountId, digest: tokenDigest(input.reservationToken), aliasId: input.aliasId })
        if (target.reservation_id === null || target.ended_at !== null || target.expires_at === null || target.expires_at <= at) {
          return yield* Effect.fail(new ReservationUnavailable())
        }
        if (target.candidate_id === null || target.domain_id === null || target.local_part === null || target.domain_name === null) {
          return yield* Effect.fail(new CandidateNotReserved({ aliasId: input.aliasId }))
        }
        const plan = target.plan
        if (target.tier === "premium_only" && !plan.earlyAccessDomains) {
          return yield* Effect.fail(new FeatureNotInPlan({ feature: "earlyAccessDomains" }))
        }
        if (target.state !== "active") return yield* Effect.fail(new DomainRetired({ domainId: target.domain_id }))
        if (selfDestructAt !== null) {
          if (!plan.selfDestructTimers) return yield* Effect.fail(new FeatureNotInPlan({ feature: "selfDestructTimers" }))
          if (!(selfDestructAt > at)) return yield* Effect.fail(new SelfDestructNotInFuture({ selfDestructAt: input.selfDestructAt! }))
        }
        const label = input.label ?? null
        const alias: EventAlias = { id: target.candidate_id, address: `${target.local_part}@${target.domain_name}`, label }
        const outcome = yield* claimStatement({
          accountId,
          aliasId: target.candidate_id,
          reservationId: target.reservation_id,
          at,
          since: dayStart,
          planCode: target.plan_code,
          overrides: target.overrides,
          caps: { active: plan.activeAliasCap, lifetime: plan.aliasLifetimeCap, perDay: plan.claimsPerDay },
          label,
          note: input.note ?? null,
          selfDestructAt,
          event: {
            accountId,
            alias,
            type: "alias.claimed",
            time: at,
            data: { alias, claimed_at: at.toISOString(), ...(selfDestructAt ? { self_destruct_at: selfDestructAt.toISOString() } : {}) }
          }
        })
        if (outcome.claimed) return Option.some(target.candidate_id)
        if (!outcome.same_plan) return Option.none<number>()
        if (outcome.active >= plan.activeAliasCap) return yield* Effect.fail(new ActiveAliasCapReached({ limit: plan.activeAliasCap }))
        if (outcome.lifetime >= plan.aliasLifetimeCap) return yield* Effect.fail(new AliasLifetimeCapReached({ limit: plan.aliasLifetimeCap }))
        if (outcome.today >= plan.claimsPerDay) {
          const retryAfter = Math.ceil((dayStart.getTime() + 86_400_000 - at.getTime()) / 1000)
          return yield* Effect.fail(new DailyClaimLimitReached({ limit: plan.claimsPerDay, retryAfter }))
        }
        return yield* Effect.fail(new ReservationUnavailable())
      })
      // The plan changed between the two reads (rare), or the statement was a deadlock's victim
      // (rolled back whole): decide again.
      let claimedId = Option.none<number>()
      for (let round = 0; Option.isNone(claimedId); round++) {
        if (round === 5) return yield* Effect.die(new Error(`a claim of account ${accountId} could not be decided in 5 rounds`))
        claimedId = yield* decide.pipe(
          Effect.catchTag("SqlError", (error) => error.cause._tag === "DeadlockError" ? Effect.succeed(Option.none<number>()) : Effect.die(error)),
          Effect.catchTag(["SchemaError", "NoSuchElementError"], Effect.die)
        )
      }
      return toAlias(yield* owned(accountId, claimedId.value).pipe(Effect.orDie))
    })

    /** Moves a locked alias to `to`; inside the caller's transaction. */
    const applyTransition = (accountId: number, row: Row, to: Transition, at: Date) =>
      Effect.gen(function*() {
        const target: Status = to === "pause" ? "paused" : to === "resume" ? "active" : "burned"
        if (row.status === target) return
        if (row.status === "burned") {
          return yield* Effect.fail(new AliasBurned({ aliasId: row.id, refused: "statusChange" }))
        }
        if (target === "active") {
          const { resolved } = yield* entitlementsOf(accountId)
          if ((yield* activeCount(accountId)) >= resolved.activeAliasCap) {
            return yield* Effect.fail(new ActiveAliasCapReached({ limit: resolved.activeAliasCap }))
          }
          yield* sql`UPDATE aliases SET status = 'active', plan_paused = false WHERE id = ${row.id}`.pipe(Effect.orDie)
          yield* notifyChanges(sql, [{ accountId, type: "alias.resumed", aliasId: row.id }])
        } else if (target === "paused") {
          yield* sql`UPDATE aliases SET status = 'paused', paused_at = ${at} WHERE id = ${row.id}`.pipe(Effect.orDie)
          yield* appendEvent(sql, { accountId, alias: eventAlias(row), type: "alias.paused", time: at, data: { alias: eventAlias(row), paused_at: at.toISOString() } })
          yield* notifyChanges(sql, [{ accountId, type: "alias.paused", aliasId: row.id }])
        } else {
          yield* burn(row, at)
        }
      })

    /**
     * Label, note and a transition in one transaction: a refused transition changes nothing,
     * and the event of an accepted one carries the new label.
     */
    const changeTo = Effect.fn("Aliases.change")(function*(accountId: number, id: number, input: {
      readonly label?: string | null | undefined
      readonly note?: string | null | undefined
    }, to: Transition | undefined) {
      const at = yield* now
      const relabelled = input.label !== undefined || input.note !== undefined
      if (to === "burn" && !relabelled) return yield* burnAlone(accountId, id, at)
      return yield* sql.withTransaction(Effect.gen(function*() {
        // A resume counts active aliases: the alias counts lock comes before the alias row's.
        if (to === "resume") yield* entitlementsOf(accountId)
        const locked = yield* owned(accountId, id, true)
        if (relabelled) {
          yield* sql`
            UPDATE aliases SET
              label = CASE WHEN ${input.label !== undefined} THEN ${input.label ?? null}::text ELSE label END,
              note = CASE WHEN ${input.note !== undefined} THEN ${input.note ?? null}::text ELSE note END
            WHERE id = ${id}`.pipe(Effect.orDie)
        }
        // The transition's event carries the label as it is now: read again only when it changed.
        if (to !== undefined) yield* applyTransition(accountId, relabelled ? yield* owned(accountId, id) : locked, to, at)
        return toAlias(yield* owned(accountId, id))
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    const change = (accountId: number, id: number, input: typeof UpdateAlias.Type) => {
      const to = requestedTransition(input)
      return to === "conflict" ? Effect.fail(new TransitionsConflict()) : changeTo(accountId, id, input, to)
    }

    const transition = (accountId: number, id: number, to: Transition) => changeTo(accountId, id, {}, to)

    /**
     * Burns the alias `row` in one statement, when it is still as read (its status and label: the
     * event carries the label): the alias, its standing shares end, the event is appended, and the
     * outbox and realtime are notified at the commit. Answers whether it burned; under the row's
     * lock it always does.
     */
    const burn = (row: Row, at: Date) =>
      sql`
        WITH burned AS (
          UPDATE aliases SET status = 'burned', burned_at = ${at}, plan_paused = false
          WHERE id = ${row.id} AND status = ${row.status} AND label IS NOT DISTINCT FROM ${row.label}::text
          RETURNING id
        ), shares_ended AS (${endSharesOfBurned(sql, row.id, at, sql`EXISTS (SELECT 1 FROM burned)`)}
        ), event AS (${insertEventRecords(sql, [eventRecord({ accountId: row.account_id, alias: eventAlias(row), type: "alias.burned", time: at, data: { alias: eventAlias(row), burned_at: at.toISOString() } })], sql`EXISTS (SELECT 1 FROM burned)`)})
        SELECT EXISTS (SELECT 1 FROM burned) AS burned,
               (SELECT count(*) FROM pg_notify(${OutboxChannel}, '') WHERE EXISTS (SELECT 1 FROM burned)) AS notified,
               ${changesFragment(sql, [{ accountId: row.account_id, type: "alias.burned", aliasId: row.id }], sql`EXISTS (SELECT 1 FROM burned)`)} AS published`.pipe(
        Effect.flatMap(decodeRows(Schema.Struct({ burned: Schema.Boolean }))),
        Effect.map(([answer]) => answer?.burned === true),
        Effect.orDie
      )

    /**
     * A burn on its own (no relabel with it), without a transaction: the alias read, then burned in
     * one statement if it is still as read (a pause, resume or relabel in between reads it again).
     * A CI fleet burns an alias at the end of every job; nothing is held between the two.
     */
    const burnAlone = Effect.fn("Aliases.burn")(function*(accountId: number, id: number, at: Date) {
      for (let round = 0; round < 5; round++) {
        const row = yield* owned(accountId, id)
        if (row.status === "burned") return toAlias(row)
        if (yield* burn(row, at)) return toAlias(yield* owned(accountId, id))
      }
      return yield* Effect.die(new Error(`alias ${id} kept changing while it was burned`))
    })

    const setTimer = Effect.fn("Aliases.setTimer")(function*(accountId: number, id: number, atInput: string) {
      const at = yield* now
      const deadline = new Date(atInput)
      return yield* sql.withTransaction(Effect.gen(function*() {
        const { resolved } = yield* entitlementsOf(accountId)
        const row = yield* owned(accountId, id, true)
        if (!resolved.selfDestructTimers) return yield* Effect.fail(new FeatureNotInPlan({ feature: "selfDestructTimers" }))
        if (row.status === "burned") return yield* Effect.fail(new AliasBurned({ aliasId: id, refused: "timerChange" }))
        if (!(deadline > at)) return yield* Effect.fail(new SelfDestructNotInFuture({ selfDestructAt: atInput }))
        yield* sql`
          UPDATE aliases SET self_destruct_at = ${deadline}, self_destruct_suspended = false, expiring_notified_at = NULL
          WHERE id = ${id}`.pipe(Effect.orDie)
        return toTimer(yield* owned(accountId, id))
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    const clearTimer = Effect.fn("Aliases.clearTimer")(function*(accountId: number, id: number) {
      const row = yield* owned(accountId, id)
      if (row.status === "burned") return yield* Effect.fail(new AliasBurned({ aliasId: id, refused: "timerChange" }))
      yield* sql`
        UPDATE aliases SET self_destruct_at = NULL, self_destruct_suspended = false, expiring_notified_at = NULL
        WHERE id = ${id}`.pipe(Effect.orDie)
      return toTimer(yield* owned(accountId, id))
    })

    const addressOf = SqlSchema.findOneOption({
      Request: Schema.Struct({ accountId: Schema.Int, id: Schema.Int }),
      Result: Schema.Struct({ status: AliasStatus, address: Schema.String }),
      execute: ({ accountId, id }) => sql`
        SELECT al.status, al.local_part || '@' || d.name AS address FROM aliases al JOIN domains d ON d.id = al.domain_id
        WHERE al.id = ${id} AND al.account_id = ${accountId} AND al.status <> 'reserved'`
    })

    const injectableAddress = Effect.fn("Aliases.injectableAddress")(function*(accountId: number, id: number) {
      const alias = Option.getOrUndefined(yield* addressOf({ accountId, id }).pipe(Effect.orDie))
      if (alias === undefined) return yield* Effect.fail(new AliasNotFound({ aliasId: id }))
      if (alias.status === "paused") return yield* Effect.fail(new AliasPaused({ aliasId: id }))
      if (alias.status === "burned") return yield* Effect.fail(new AliasBurned({ aliasId: id, refused: "mailInjection" }))
      return alias.address
    })

    const runTimers = Effect.gen(function*() {
      const at = yield* now
      return yield* sql.withTransaction(Effect.gen(function*() {
        // Spec 3.1: an active alias burns at its deadline; a paused one waits until it is resumed.
        const due = yield* select(sql`al.status = 'active' AND al.self_destruct_at <= ${at} AND NOT al.self_destruct_suspended`, true)
        for (const row of due) yield* burn(row, at)
        const notice = yield* select(sql`
          al.status IN ('active', 'paused') AND NOT al.self_destruct_suspended AND al.expiring_notified_at IS NULL
          AND al.self_destruct_at > ${at} AND al.self_destruct_at <= ${new Date(at.getTime() + ExpiringNoticeMs)}`, true)
        for (const row of notice) {
          yield* sql`UPDATE aliases SET expiring_notified_at = ${at} WHERE id = ${row.id}`.pipe(Effect.orDie)
          yield* appendEvent(sql, {
            accountId: row.account_id,
            alias: eventAlias(row),
            type: "alias.expiring",
            time: at,
            data: { alias: eventAlias(row), self_destruct_at: row.self_destruct_at!.toISOString() }
          })
        }
        return { burned: due.length, notified: notice.length }
      })).pipe(Effect.orDie)
    })

    const planPausedFirst = SqlSchema.findAll({
      Request: Schema.Struct({ accountId: Schema.Int, room: Schema.Int }),
      Result: IdRow,
      execute: ({ accountId, room }) => sql`
            SELECT id FROM aliases WHERE account_id = ${accountId} AND status = 'paused' AND plan_paused
            ORDER BY claimed_at, id LIMIT ${room}`
    })

    const reconcilePlan = Effect.fn("Aliases.reconcilePlan")(function*(accountId: number) {
      const at = yield* now
      return yield* sql.withTransaction(Effect.gen(function*() {
        const { resolved } = yield* entitlementsOf(accountId)
        yield* sql`UPDATE aliases SET self_destruct_suspended = ${!resolved.selfDestructTimers}
                   WHERE account_id = ${accountId} AND self_destruct_at IS NOT NULL AND status IN ('active', 'paused')`.pipe(Effect.orDie)
        const active = yield* select(sql`al.account_id = ${accountId} AND al.status = 'active'`, true)
        let paused = 0
        let resumed = 0
        if (active.length > resolved.activeAliasCap) {
          // The most recently claimed aliases give way first; the oldest keep receiving.
          const excess = [...active].sort((a, b) => (b.claimed_at?.getTime() ?? 0) - (a.claimed_at?.getTime() ?? 0) || b.id - a.id)
            .slice(0, active.length - resolved.activeAliasCap)
          for (const row of excess) {
            yield* sql`UPDATE aliases SET status = 'paused', paused_at = ${at}, plan_paused = true WHERE id = ${row.id}`.pipe(Effect.orDie)
            yield* appendEvent(sql, { accountId, alias: eventAlias(row), type: "alias.paused", time: at, data: { alias: eventAlias(row), paused_at: at.toISOString() } })
          }
          yield* notifyChanges(sql, excess.map((row) => ({ accountId, type: "alias.paused" as const, aliasId: row.id })))
          paused = excess.length
        } else {
          const room = resolved.activeAliasCap - active.length
          const planPaused = yield* planPausedFirst({ accountId, room }).pipe(Effect.orDie)
          if (planPaused.length > 0) {
            yield* sql`UPDATE aliases SET status = 'active', plan_paused = false WHERE id IN ${sql.in(planPaused.map((r) => r.id))}`.pipe(Effect.orDie)
            yield* notifyChanges(sql, planPaused.map((r) => ({ accountId, type: "alias.resumed" as const, aliasId: r.id })))
          }
          resumed = planPaused.length
        }
        return { paused, resumed }
      })).pipe(Effect.orDie)
    })

    // A plan change: aliases beyond the active cap pause (or plan-paused ones resume), timers follow the entitlement.
    yield* entitlements.onPlanChange({ feature: "aliases", apply: ({ accountId }) => Effect.asVoid(reconcilePlan(accountId)) })

    const sweepReservations = Effect.gen(function*() {
      const at = yield* now
      const rows = yield* sql`
        DELETE FROM aliases al USING alias_reservations r
        WHERE al.status = 'reserved' AND al.reservation_id = r.id AND (r.ended_at IS NOT NULL OR r.expires_at <= ${at})
        RETURNING al.id`.pipe(Effect.orDie)
      return rows.length
    })

    /** The mailboxes others shared with the reader, live now. */
    const sharedWith = (accountId: number) =>
      Effect.flatMap(reachableShare(sql, "s"), (reachable) => sql`
        SELECT ${aliasColumns}, s.role, o.handle AS owner_handle, s.push_enabled AS reader_push,
               (SELECT count(*)::int FROM messages m
                WHERE m.alias_id = al.id AND m.trashed_at IS NULL
                  AND NOT EXISTS (SELECT 1 FROM message_states ms WHERE ms.message_id = m.id AND ms.account_id = ${accountId} AND ms.is_read)
               ) AS reader_unread
        FROM shares s
        JOIN aliases al ON al.id = s.alias_id
        JOIN domains d ON d.id = al.domain_id
        JOIN accounts a ON a.id = al.account_id
        JOIN accounts o ON o.id = s.owner_id
        WHERE s.guest_id = ${accountId} AND ${reachable} AND al.status IN ('active', 'paused')
        ORDER BY al.id`).pipe(Effect.flatMap(decodeSharedRows), Effect.orDie)

    const list = Effect.fn("Aliases.list")(function*(accountId: number, includeBurned: boolean) {
      const [own, shared] = yield* Effect.all([
        select(includeBurned
          ? sql`al.account_id = ${accountId} AND al.status <> 'reserved'`
          : sql`al.account_id = ${accountId} AND al.status IN ('active', 'paused')`),
        sharedWith(accountId)
      ], { concurrency: 2 })
      return [...own.map(toAlias), ...shared.map(toSharedAlias)]
    })

    return Aliases.of({
      list,
      reserve,
      release,
      claim,
      transition,
      change,
      setTimer,
      clearTimer,
      injectableAddress,
      runTimers,
      reconcilePlan,
      sweepReservations
    })
  }))
}

