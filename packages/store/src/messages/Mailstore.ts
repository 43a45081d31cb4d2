/**
 * Storing accepted mail. `accept` commits, in one transaction, for each accepted alias: the
 * message row (processing_status 'stub', the durable pipeline job) and its raw bytes (BlobStore);
 * the counters of alias and account follow as appended deltas (MailCounts.ts), and the quota is
 * kept by leases (QuotaLeases.ts), making room by eviction when the account's quota would be
 * passed. Only after that commit may ingest answer 250 (or test injection 202).
 */
import { normalizeLocalPart } from "@burnbox/domain/aliases/index"
import { type PlanEntitlements, QuotaExceeded, ResolvedPlan } from "@burnbox/domain"
import { randomUUID } from "node:crypto"
import { Cause, Context, Deferred, Effect, Layer, Queue, Result, Schema } from "effect"
import { PgTypes } from "@effect/sql-pg"
import { SqlClient } from "effect/sql"
import { BlobStore, compressRaw, type RawBytes, type StagedRaw } from "../platform/BlobStore.ts"
import { rowsDecoder } from "../platform/Rows.ts"
import { phaseClock, stampPhase } from "../platform/PhaseStamps.ts"
import { now } from "../platform/Time.ts"
import { SearchIndex } from "../search/SearchIndex.ts"
import { Entitlements } from "../plans/Entitlements.ts"
import type { ClaimedMessage } from "../pipeline/MailQueue.ts"
import { PipelineHandoff } from "../pipeline/PipelineHandoff.ts"
import { PipelineWakeups } from "../pipeline/PipelineWakeups.ts"
import { accountStorageUsedOf, foldMailCounts } from "./MailCounts.ts"
import { dropLeases, grant, LaneLeases, leasedOf, lockForEviction, spendFragment } from "./QuotaLeases.ts"

export const TestMessageRetentionDays = 7

export type RecipientVerdict =
  | { readonly kind: "accept"; readonly aliasId: number; readonly accountId: number }
  | { readonly kind: "paused"; readonly aliasId: number }
  | { readonly kind: "unknown" }

export interface Delivery {
  readonly aliasId: number
  readonly accountId: number
  /** The address as the sender wrote it (subaddress included). */
  readonly recipient: string
}

export interface AcceptInput {
  readonly deliveries: ReadonlyArray<Delivery>
  /** The exact bytes as received: one array, or the pieces in order (a big message need never be joined). */
  readonly raw: Uint8Array | ReadonlyArray<Uint8Array>
  readonly source: "smtp" | "test"
  readonly envelopeFrom: string | null
  readonly clientAddress: string | null
  readonly clientHelo: string | null
}

export interface Accepted {
  readonly id: number
  readonly aliasId: number
  readonly receivedAt: Date
  readonly expiresAt: Date
}

const dayMs = 86_400_000
/** Group commit: how many batches may be in flight at once, and how many accepts one takes. */
const BatchesInFlight = 2
const MaxBatch = 64
/** How often (at most) ingest folds the counters' deltas into their rows, ms. */
const FoldEveryMs = 1_000
/** RCPT lookups: how many shared queries may be in flight at once. */
const LookupsInFlight = 4
/**
 * A message up to this size (as received) may be handed to this process's pipeline by its
 * accepting commit (PipelineHandoff), its bytes with it; a larger one is claimed (and its bytes
 * read back) as before, as its claim would not carry them either.
 */
const HandoffBytes = 256 * 1024

/** The bytes as received, in one array (a copy: each handed delivery its own). */
const joinedRaw = (raw: Uint8Array | ReadonlyArray<Uint8Array>): Uint8Array =>
  raw instanceof Uint8Array ? new Uint8Array(raw) : new Uint8Array(Buffer.concat(raw))

/** A text[] parameter that may hold only nulls (the driver cannot infer the type of those). */
const nullableText = (values: ReadonlyArray<string | null>) => PgTypes.array(values, PgTypes.OID.text).pipe(Result.getOrThrow)

/** A message about to be destroyed, with what its removal gives back to the counters. */
export const DestroyedMessage = Schema.Struct({
  id: Schema.Int,
  alias_id: Schema.Int,
  size_bytes: Schema.Int,
  /** Counted in its alias's unread_count: unread by the owner and not in the trash. */
  unread: Schema.Boolean
})
export type DestroyedMessage = typeof DestroyedMessage.Type

/** What destroying mail touches besides its rows: its bytes and its search index entries. */
export interface MessageStores {
  readonly sql: SqlClient.SqlClient
  readonly blobs: BlobStore["Service"]
  readonly search: SearchIndex["Service"]
}

/**
 * Destroys messages of one account (rows, raw bytes, attachments, search index entries, reader
 * state and tags go with them) and gives their bytes and unread marks back to the alias and
 * account counters. Run it inside the caller's transaction.
 *
 * The counters are not clamped at 0: a row alone may be below its count while the deltas of
 * mail arriving wait to be folded (MailCounts.ts).
 */
export const destroyMessages = ({ blobs, search, sql }: MessageStores, victims: ReadonlyArray<DestroyedMessage>) =>
  Effect.gen(function*() {
    if (victims.length === 0) return
    const ids = victims.map((v) => v.id)
    yield* sql`DELETE FROM messages WHERE id IN ${sql.in(ids)}`
    yield* blobs.messagesDestroyed(ids)
    yield* search.followChanges(ids)
    const byAlias = new Map<number, { bytes: number; unread: number }>()
    for (const v of victims) {
      const entry = byAlias.get(v.alias_id) ?? { bytes: 0, unread: 0 }
      entry.bytes += v.size_bytes
      entry.unread += v.unread ? 1 : 0
      byAlias.set(v.alias_id, entry)
    }
    // In alias id order, as every writer of alias rows takes them.
    for (const [aliasId, freed] of [...byAlias].sort(([a], [b]) => a - b)) {
      yield* sql`
        UPDATE aliases SET storage_used_bytes = storage_used_bytes - ${freed.bytes}, unread_count = unread_count - ${freed.unread}
        WHERE id = ${aliasId}`
    }
    const total = victims.reduce((n, v) => n + v.size_bytes, 0)
    yield* sql`
      UPDATE accounts SET storage_used_bytes = storage_used_bytes - ${total}
      WHERE id = (SELECT account_id FROM aliases WHERE id = ${victims[0]!.alias_id})`
  }).pipe(Effect.orDie)

export class Mailstore extends Context.Service<Mailstore, {
  /** RCPT TO: which alias (if any) takes mail for this address. Counts refusals of paused aliases. */
  readonly resolveRecipient: (address: string) => Effect.Effect<RecipientVerdict>
  readonly accept: (input: AcceptInput) => Effect.Effect<ReadonlyArray<Accepted>, QuotaExceeded>
  /** Deletes messages past their retention; answers how many. */
  readonly purgeExpired: Effect.Effect<number>
  /** Folds the counters' appended deltas into their rows (MailCounts.ts); answers how many it folded. */
  readonly foldCounts: Effect.Effect<number>
}>()("burnbox/Mailstore") {
  /** Needs BlobStore and SearchIndex besides the SQL client. */
  static readonly layerNoDeps = Layer.effect(Mailstore, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const blobs = yield* BlobStore
    const search = yield* SearchIndex
    const entitlements = yield* Entitlements
    const pipelineWakeups = yield* PipelineWakeups
    const handoff = yield* PipelineHandoff
    const stores: MessageStores = { sql, blobs, search }

    const recipientRows = rowsDecoder(Schema.Struct({ n: Schema.Int, id: Schema.Int, account_id: Schema.Int, status: Schema.String }))
    const victimRows = rowsDecoder(DestroyedMessage)
    const accountRows = rowsDecoder(Schema.Struct({ storage_used_bytes: Schema.Number, plan: ResolvedPlan }))
    const idRows = rowsDecoder(Schema.Struct({ id: Schema.Int }))
    const AccountPlan = Schema.Struct({ id: Schema.Int, plan: ResolvedPlan })
    const planRows = rowsDecoder(AccountPlan)
    const batchAnswers = rowsDecoder(Schema.Struct({
      ids: Schema.NullOr(Schema.Array(Schema.Tuple([Schema.Int, Schema.Int]))),
      accounts: Schema.NullOr(Schema.Array(AccountPlan)),
      leased: Schema.Int,
      /** The handed messages' aliases: id, address, label. */
      aliases: Schema.NullOr(Schema.Array(Schema.Tuple([Schema.Int, Schema.String, Schema.NullOr(Schema.String)])))
    }))
    const ownerRows = rowsDecoder(Schema.Struct({ account_id: Schema.Int }))

    /**
     * RCPT lookups arriving together share one query (an alias per address, by domain name
     * and normalised local part); refusals of paused aliases are counted one by one, as rare.
     */
    interface Lookup {
      readonly domain: string
      readonly localKey: string
      readonly done: Deferred.Deferred<RecipientVerdict>
    }
    const lookups = yield* Queue.unbounded<Lookup>()
    const resolveBatch = (batch: ReadonlyArray<Lookup>) =>
      Effect.gen(function*() {
        const rows = yield* sql`
          SELECT i.n::int4 AS n, al.id, al.account_id, al.status
          FROM unnest(${batch.map((l) => l.domain)}::text[], ${batch.map((l) => l.localKey)}::text[]) WITH ORDINALITY AS i(domain, local_key, n)
          JOIN domains d ON d.name = i.domain
          JOIN aliases al ON al.domain_id = d.id AND al.local_key = i.local_key`.pipe(Effect.flatMap(recipientRows))
        const found = new Map(rows.map((r) => [r.n, r]))
        yield* Effect.forEach(batch, (lookup, i) =>
          Effect.gen(function*() {
            const row = found.get(i + 1)
            if (row === undefined || row.status === "burned" || row.status === "reserved") return yield* Deferred.succeed(lookup.done, { kind: "unknown" })
            if (row.status === "paused") {
              yield* sql`UPDATE aliases SET rejected_count = rejected_count + 1 WHERE id = ${row.id}`
              return yield* Deferred.succeed(lookup.done, { kind: "paused", aliasId: row.id })
            }
            // A retired domain keeps delivering to the aliases it already has; it only takes no new claims.
            return yield* Deferred.succeed(lookup.done, { kind: "accept", aliasId: row.id, accountId: row.account_id })
          }), { discard: true })
      }).pipe(
        Effect.catchCause((cause) => Effect.forEach(batch, (l) => Deferred.failCause(l.done, Cause.die(Cause.squash(cause))), { discard: true }))
      )
    for (let i = 0; i < LookupsInFlight; i++) {
      yield* Queue.takeBetween(lookups, 1, MaxBatch).pipe(Effect.flatMap(resolveBatch), Effect.forever, Effect.forkScoped)
    }

    const resolveRecipient = Effect.fn("Mailstore.resolveRecipient")(function*(address: string) {
      const at = address.lastIndexOf("@")
      if (at <= 0) return { kind: "unknown" } as const
      const done = yield* Deferred.make<RecipientVerdict>()
      yield* Queue.offer(lookups, { domain: address.slice(at + 1).toLowerCase(), localKey: normalizeLocalPart(address.slice(0, at)).base, done })
      return yield* Deferred.await(done)
    })

    /** Frees at least `needed` bytes of the account: the trash first, then the oldest unpinned mail. */
    const evict = (accountId: number, needed: number) =>
      Effect.gen(function*() {
        const victims = yield* sql`
          WITH candidates AS (
            SELECT m.id, m.alias_id, m.size_bytes, NOT coalesce(s.is_read, false) AND m.trashed_at IS NULL AS unread,
                   sum(m.size_bytes) OVER (ORDER BY m.trashed_at IS NULL, m.trashed_at, m.received_at, m.id) AS running
            FROM messages m
            LEFT JOIN message_states s ON s.message_id = m.id AND s.account_id = m.account_id
            WHERE m.account_id = ${accountId} AND (m.trashed_at IS NOT NULL OR NOT coalesce(s.pinned, false))
          )
          SELECT id, alias_id, size_bytes, unread FROM candidates WHERE running - size_bytes < ${needed}`.pipe(
          Effect.flatMap(victimRows),
          Effect.orDie
        )
        if (victims.length === 0) return 0
        yield* destroyMessages(stores, victims)
        return victims.reduce((n, v) => n + v.size_bytes, 0)
      })

    /** Stores one accepted message for each of its deliveries; inside the batch's transaction. */
    const acceptOne = (input: AcceptInput, staged: StagedRaw, index: number, at: Date) =>
      Effect.gen(function*() {
        const size = staged.raws[index]!.size
        const accepted: Array<Accepted> = []
        for (const delivery of input.deliveries) {
          // Used: stored, and leased to other lanes (this one holds the account's quota lock).
          const [account] = yield* sql`
            SELECT (${accountStorageUsedOf(sql, "a")} + ${leasedOf(sql, "a")})::float8 AS storage_used_bytes, ${entitlements.column("a")} AS plan
            FROM accounts a WHERE a.id = ${delivery.accountId}`.pipe(Effect.flatMap(accountRows))
          const plan = account!.plan
          if (size > plan.storageQuotaBytes) {
            return yield* Effect.fail(new QuotaExceeded({ accountId: delivery.accountId, sizeBytes: size, quotaBytes: plan.storageQuotaBytes }))
          }
          const overBy = account!.storage_used_bytes + size - plan.storageQuotaBytes
          if (overBy > 0) yield* evict(delivery.accountId, overBy)
          const retentionDays = input.source === "test" ? TestMessageRetentionDays : plan.retentionDays
          const expiresAt = new Date(at.getTime() + retentionDays * dayMs)
          const [row] = yield* sql`
            WITH message AS (
              INSERT INTO messages (account_id, alias_id, source, recipient, envelope_from, client_address, client_helo,
                                    received_at, expires_at, size_bytes)
              VALUES (${delivery.accountId}, ${delivery.aliasId}, ${input.source}, ${delivery.recipient}, ${input.envelopeFrom},
                      ${input.clientAddress}, ${input.clientHelo}, ${at}, ${expiresAt}, ${size})
              RETURNING id
            ), raw AS (${blobs.insertRawOne(staged, index, "message")}
            )
            SELECT id FROM message`.pipe(Effect.flatMap(idRows))
          accepted.push({ id: row!.id, aliasId: delivery.aliasId, receivedAt: at, expiresAt })
        }
        return accepted as ReadonlyArray<Accepted>
      })

    /**
     * The plan of each account as last read. The set-based statement takes retention from here
     * (and a lease its quota); what it assumed is checked against the plans it read before the
     * transaction may commit, so a stale entry costs a retry, never a wrong row.
     */
    const knownPlans = new Map<number, PlanEntitlements>()
    const quotaOf = (accountId: number) => knownPlans.get(accountId)!.storageQuotaBytes

    /** The set-based statement cannot take this batch (a plan changed, a lease fell short, it failed). */
    class NotSetBased {
      readonly _tag = "NotSetBased"
      /**
       * The statement may try again: only a plan differed from what it assumed, or it was chosen
       * as a deadlock's victim (rolled back whole).
       */
      readonly stalePlan: boolean
      constructor(stalePlan: boolean) {
        this.stalePlan = stalePlan
      }
    }

    /** What each account of the batch would store (bytes), for its lease. */
    const bytesByAccount = (batch: ReadonlyArray<Pending>) => {
      const wants = new Map<number, number>()
      for (const p of batch) for (const d of p.input.deliveries) wants.set(d.accountId, (wants.get(d.accountId) ?? 0) + p.raw.size)
      return wants
    }

    /**
     * The whole batch in one statement, locking no account or alias row (issue 36 item 2): it
     * takes each account's bytes off the lane's quota lease, draws the ids, inserts every message
     * row and raw copy (the counters follow as deltas, migration 0029's trigger); the pipeline
     * hears of it after the commit (`runBatch`, PipelineWakeups). It answers the accounts' plans
     * as it read them and the leases it spent, and this checks, before the transaction can
     * commit, that each plan is the one the statement assumed and that every account's lease
     * covered its bytes; if not, the transaction rolls back (NotSetBased).
     */
    const acceptSet = (
      lane: LaneLeases,
      batch: ReadonlyArray<Pending>,
      accountIds: ReadonlyArray<number>,
      wants: ReadonlyMap<number, number>,
      at: Date,
      places: number
    ) =>
      Effect.gen(function*() {
        const staged = yield* blobs.stageRaw(batch.map((p) => p.raw))
        let handing = places
        const rows = batch.flatMap((p, n) => p.input.deliveries.map((delivery) => {
          const plan = knownPlans.get(delivery.accountId)!
          const retentionDays = p.input.source === "test" ? TestMessageRetentionDays : plan.retentionDays
          // Claimed by this statement for this process's pipeline, while it has places for them.
          const handed = handing > 0 && p.raw.size <= HandoffBytes
          if (handed) handing--
          return { n: n + 1, delivery, input: p.input, size: p.raw.size, expiresAt: new Date(at.getTime() + retentionDays * dayMs), handed }
        }))
        const handedAliases = [...new Set(rows.filter((r) => r.handed).map((r) => r.delivery.aliasId))]
        const [answer] = yield* sql`
          WITH plans AS (
            SELECT a.id, ${entitlements.column("a")} AS plan FROM accounts a WHERE a.id = ANY(${accountIds}::int4[])
          ), spends AS (
            SELECT * FROM unnest(${accountIds}::int4[], ${accountIds.map((id) => wants.get(id) ?? 0)}::int8[],
                                 ${accountIds.map(quotaOf)}::int8[]) AS s(account_id, bytes, quota)
          ), spent AS (${spendFragment(sql, lane, "spends")}
          ), input AS (
            SELECT * FROM unnest(${rows.map((_, i) => i + 1)}::int4[], ${rows.map((r) => r.n)}::int4[],
                                 ${rows.map((r) => r.delivery.accountId)}::int4[], ${rows.map((r) => r.delivery.aliasId)}::int4[],
                                 ${rows.map((r) => r.input.source)}::text[], ${rows.map((r) => r.delivery.recipient)}::text[],
                                 ${nullableText(rows.map((r) => r.input.envelopeFrom))}, ${nullableText(rows.map((r) => r.input.clientAddress))},
                                 ${nullableText(rows.map((r) => r.input.clientHelo))}, ${rows.map((r) => r.expiresAt)}::timestamptz[],
                                 ${rows.map((r) => r.size)}::int4[], ${rows.map((r) => r.handed)}::bool[])
              AS i(ord, n, account_id, alias_id, source, recipient, envelope_from, client_address, client_helo, expires_at, size_bytes, handed)
          ), ids AS (
            SELECT ord, nextval(pg_get_serial_sequence('messages', 'id'))::int4 AS id FROM input
          ), message AS (
            -- A handed row is written claimed, as MailQueue's claim would write it (PipelineHandoff).
            INSERT INTO messages (id, account_id, alias_id, source, recipient, envelope_from, client_address, client_helo,
                                  received_at, expires_at, size_bytes,
                                  processing_status, processing_started_at, processing_attempts, processing_worker)
            OVERRIDING SYSTEM VALUE
            SELECT ids.id, i.account_id, i.alias_id, i.source, i.recipient, i.envelope_from, i.client_address, i.client_helo,
                   ${at}, i.expires_at, i.size_bytes,
                   CASE WHEN i.handed THEN 'processing' ELSE 'stub' END, CASE WHEN i.handed THEN ${at}::timestamptz END,
                   CASE WHEN i.handed THEN 1 ELSE 0 END, CASE WHEN i.handed THEN ${handoff.worker}::text END
            FROM input i JOIN ids USING (ord)
            RETURNING id
          ), raw AS (${blobs.insertRawBatch(staged)}
          )
          SELECT (SELECT json_agg(json_build_array(ord, id)) FROM ids) AS ids,
                 (SELECT json_agg(json_build_object('id', id, 'plan', plan)) FROM plans) AS accounts,
                 (SELECT count(*)::int FROM spent) AS leased,
                 (SELECT json_agg(json_build_array(al.id, al.local_part || '@' || d.name, al.label))
                  FROM aliases al JOIN domains d ON d.id = al.domain_id WHERE al.id = ANY(${handedAliases}::int4[])) AS aliases`.pipe(
          Effect.flatMap(batchAnswers)
        )
        yield* blobs.unstageRaw(staged)
        const plans = new Map((answer?.accounts ?? []).map((a) => [a.id, a.plan]))
        const assumed = accountIds.every((id) =>
          knownPlans.get(id)?.retentionDays === plans.get(id)?.retentionDays && knownPlans.get(id)?.storageQuotaBytes === plans.get(id)?.storageQuotaBytes
        )
        for (const [id, plan] of plans) knownPlans.set(id, plan)
        const ids = answer?.ids ?? []
        if (ids.length !== rows.length || answer?.leased !== accountIds.length) return yield* Effect.fail(new NotSetBased(false))
        if (!assumed) return yield* Effect.fail(new NotSetBased(true))
        const idOf = new Map(ids.map(([ord, id]) => [ord, id]))
        const accepted: Array<Array<Accepted>> = batch.map(() => [])
        rows.forEach((r, i) => accepted[r.n - 1]!.push({ id: idOf.get(i + 1)!, aliasId: r.delivery.aliasId, receivedAt: at, expiresAt: r.expiresAt }))
        const aliasOf = new Map((answer?.aliases ?? []).map(([id, address, label]) => [id, { id, address, label }]))
        const handed = rows.flatMap((r, i): Array<ClaimedMessage> => {
          const alias = aliasOf.get(r.delivery.aliasId)
          return !r.handed || alias === undefined ? [] : [{
            id: idOf.get(i + 1)!,
            attempts: 1,
            accountId: r.delivery.accountId,
            aliasId: r.delivery.aliasId,
            alias,
            source: r.input.source,
            receivedAt: at,
            sizeBytes: r.size,
            clientAddress: r.input.clientAddress,
            clientHelo: r.input.clientHelo,
            envelopeFrom: r.input.envelopeFrom,
            hasRaw: true,
            raw: joinedRaw(r.input.raw),
            // at most HandoffBytes: its bytes as received, never compressed ones to inflate
            rawZstd: null
          }]
        })
        if (handed.length !== rows.filter((r) => r.handed).length) return yield* Effect.fail(new NotSetBased(false))
        return { outcomes: accepted.map((list) => Result.succeed(list as ReadonlyArray<Accepted>)), handed }
      }).pipe(Effect.catchTag("SqlError", (error) =>
        error.cause._tag === "DeadlockError"
          ? Effect.logDebug("group commit: the set-based statement was a deadlock's victim; it runs again").pipe(
            Effect.andThen(Effect.fail(new NotSetBased(true)))
          )
          : Effect.logWarning("group commit: the set-based statement failed; the batch is stored message by message", error).pipe(
            Effect.andThen(Effect.fail(new NotSetBased(false)))
          )))

    /**
     * Group commit: accepts arriving together share one transaction (and one WAL flush). Each
     * of the BatchesInFlight lanes holds quota leases of its own (QuotaLeases.ts), so batches of
     * one account, in this process or another, never wait for each other. The usual batch is the
     * one set-based statement, after a lease is asked for the accounts whose lease does not cover
     * it; when a plan is not known yet or changed, a lease cannot be granted (eviction is needed,
     * or a message is over a quota) or the statement fails, the batch is done again under the
     * accounts' quota locks with each message in its own savepoint, so one refused message leaves
     * the others stored.
     */
    interface Pending {
      readonly input: AcceptInput
      readonly raw: RawBytes
      readonly done: Deferred.Deferred<ReadonlyArray<Accepted>, QuotaExceeded>
      /** When the accept was asked (PhaseStamps). */
      readonly askedAt: number
    }
    const pending = yield* Queue.unbounded<Pending>()
    /** When the counters were last folded (epoch ms of wall time), and the wake-ups of the fold (below). */
    let foldedAtMs = 0
    const foldWakes = yield* Queue.unbounded<void>()
    const foldSoon = Effect.suspend(() => {
      const nowMs = Date.now()
      if (nowMs - foldedAtMs < FoldEveryMs) return Effect.void
      foldedAtMs = nowMs
      return Queue.offer(foldWakes, undefined)
    })
    const accountsOf = (batch: ReadonlyArray<Pending>) =>
      [...new Set(batch.flatMap((p) => p.input.deliveries.map((d) => d.accountId)))].sort((a, b) => a - b)
    const aliasesOf = (batch: ReadonlyArray<Pending>) =>
      [...new Set(batch.flatMap((p) => p.input.deliveries.map((d) => d.aliasId)))].sort((a, b) => a - b)
    /** The set-based statement, after asking for the leases the lane lacks; NotSetBased when one is not granted. */
    const setBased = (lane: LaneLeases, batch: ReadonlyArray<Pending>, at: Date, places: number) =>
      Effect.gen(function*() {
        const accountIds = accountsOf(batch)
        const wants = bytesByAccount(batch)
        const nowMs = Date.now()
        const lacking = lane.lacking(wants, quotaOf, nowMs)
        if (lacking.length > 0) {
          const granted = yield* grant(sql, lane, lacking, wants, quotaOf, nowMs)
          if (!granted) return yield* Effect.fail(new NotSetBased(false))
        }
        const outcomes = yield* sql.withTransaction(acceptSet(lane, batch, accountIds, wants, at, places))
        lane.spent(wants)
        return outcomes
      })
    const messageByMessage = (lane: LaneLeases, batch: ReadonlyArray<Pending>, at: Date) =>
      sql.withTransaction(Effect.gen(function*() {
        const accountIds = accountsOf(batch)
        // The accounts' quota locks first (no lease is granted meanwhile), then their rows, in id order.
        yield* lockForEviction(sql, accountIds)
        const accounts = accountIds.length === 0 ? [] : yield* sql`
          SELECT a.id, ${entitlements.column("a")} AS plan
          FROM accounts a
          WHERE a.id IN ${sql.in(accountIds)} ORDER BY a.id FOR NO KEY UPDATE OF a`.pipe(Effect.flatMap(planRows))
        for (const a of accounts) knownPlans.set(a.id, a.plan)
        yield* dropLeases(sql, lane, accounts.map((a) => ({ account: a.id, quota: a.plan.storageQuotaBytes })))
        // The aliases next, in id order (eviction updates them).
        const aliasIds = aliasesOf(batch)
        if (aliasIds.length > 0) yield* sql`SELECT id FROM aliases WHERE id IN ${sql.in(aliasIds)} ORDER BY id FOR NO KEY UPDATE`
        const staged = yield* blobs.stageRaw(batch.map((p) => p.raw))
        const results = yield* Effect.forEach(batch, (p, i) => sql.withTransaction(acceptOne(p.input, staged, i, at)).pipe(Effect.result))
        yield* blobs.unstageRaw(staged)
        // Message by message, every row is left for a claim.
        return { outcomes: results, handed: [] as ReadonlyArray<ClaimedMessage> }
      }))
    const runBatch = (lane: LaneLeases) => (batch: ReadonlyArray<Pending>) =>
      Effect.gen(function*() {
        const batchAt = phaseClock()
        const at = yield* now
        const known = batch.every((p) => p.input.deliveries.every((d) => knownPlans.has(d.accountId)))
        // Places in this process's pipeline for the rows it may take from the commit (PipelineHandoff).
        const places = known
          ? handoff.reserve(batch.reduce((n, p) => n + (p.raw.size <= HandoffBytes ? p.input.deliveries.length : 0), 0))
          : 0
        const { handed, outcomes } = known
          ? yield* setBased(lane, batch, at, places).pipe(
            Effect.catchTag("NotSetBased", (e) => e.stalePlan ? setBased(lane, batch, at, places) : Effect.fail(e)),
            Effect.catchTag("NotSetBased", () => messageByMessage(lane, batch, at)),
            Effect.onExit((exit) => Effect.sync(() => handoff.release(places - (exit._tag === "Success" ? exit.value.handed.length : 0))))
          )
          : yield* messageByMessage(lane, batch, at)
        const committedAt = phaseClock()
        // The pipeline hears of the rows left for a claim after the commit (PipelineWakeups: not a
        // NOTIFY in the transaction); the handed ones it is given below, after the replies.
        const rowsWritten = outcomes.reduce((n, outcome) => n + (Result.isSuccess(outcome) ? outcome.success.length : 0), 0)
        if (rowsWritten > handed.length) yield* pipelineWakeups.queued
        yield* foldSoon
        yield* Effect.forEach(batch, (p, i) => {
          const outcome = outcomes[i]!
          if (Result.isSuccess(outcome)) {
            const ids = outcome.success.map((m) => m.id)
            stampPhase("accept.asked", ids, p.askedAt)
            stampPhase("accept.batch", ids, batchAt)
            stampPhase("accept.committed", ids, committedAt)
          }
          return Result.isSuccess(outcome)
            ? Deferred.succeed(p.done, outcome.success)
            : outcome.failure._tag === "QuotaExceeded"
            ? Deferred.fail(p.done, outcome.failure)
            : Deferred.die(p.done, outcome.failure)
        }, { discard: true })
        if (handed.length > 0) {
          // The replies first: the fibers waiting for this batch's outcomes answer their sessions
          // before its messages' work (small mail is worked on this thread) begins.
          yield* Effect.yieldNow
          const ids = handed.map((m) => m.id)
          stampPhase("claim.woke", ids, committedAt)
          stampPhase("claim.sent", ids, committedAt)
          stampPhase("claim.answered", ids, committedAt)
          handoff.hand(handed)
        }
      }).pipe(
        Effect.catchCause((cause) => Effect.forEach(batch, (p) => Deferred.failCause(p.done, Cause.die(Cause.squash(cause))), { discard: true }))
      )
    // Two batches in flight: one gathers and sends while the other waits for its commit. Each
    // lane is one holder of quota leases (this process's id and the lane's number).
    const holder = randomUUID()
    for (let i = 0; i < BatchesInFlight; i++) {
      const run = runBatch(new LaneLeases(`${holder}/${i}`))
      yield* Queue.takeBetween(pending, 1, MaxBatch).pipe(Effect.flatMap(run), Effect.forever, Effect.forkScoped)
    }

    // The counters' deltas this process appended are folded into their rows by one fiber of its
    // own, woken after a batch at most once a second of wall time (readers add what is not folded
    // yet, so this only keeps their sums short; the timers job folds what is left when mail stops).
    // No timer of Effect's clock: a test's clock moved by days would run it for every second.
    const foldCounts = foldMailCounts(sql)
    yield* Queue.take(foldWakes).pipe(
      Effect.andThen(foldCounts),
      Effect.catchCause((cause) => Effect.logWarning("folding the mail counters failed; the next fold retries", cause)),
      Effect.forever,
      Effect.forkScoped
    )

    const accept = Effect.fn("Mailstore.accept")(function*(input: AcceptInput) {
      const done = yield* Deferred.make<ReadonlyArray<Accepted>, QuotaExceeded>()
      // Compressed here, before the batch: a big message's in the thread pool, while others' batches commit.
      const askedAt = phaseClock()
      yield* Queue.offer(pending, { input, raw: yield* compressRaw(input.raw), done, askedAt })
      return yield* Deferred.await(done)
    })

    const purgeExpired = Effect.gen(function*() {
      const at = yield* now
      return yield* sql.withTransaction(Effect.gen(function*() {
        const victims = yield* sql`
          SELECT m.id, m.alias_id, m.size_bytes, NOT coalesce(s.is_read, false) AND m.trashed_at IS NULL AS unread
          FROM messages m LEFT JOIN message_states s ON s.message_id = m.id AND s.account_id = m.account_id
          WHERE m.expires_at <= ${at} OR m.trash_purge_at <= ${at}
          ORDER BY m.id LIMIT 1000 FOR UPDATE OF m SKIP LOCKED`.pipe(Effect.flatMap(victimRows))
        const byAccount = new Map<number, Array<DestroyedMessage>>()
        for (const v of victims) {
          const [owner] = yield* sql`SELECT account_id FROM aliases WHERE id = ${v.alias_id}`.pipe(Effect.flatMap(ownerRows))
          const list = byAccount.get(owner!.account_id) ?? []
          list.push(v)
          byAccount.set(owner!.account_id, list)
        }
        // Account by account in id order, as every writer of account rows takes them.
        for (const [, list] of [...byAccount].sort(([a], [b]) => a - b)) yield* destroyMessages(stores, list)
        return victims.length
      })).pipe(Effect.orDie)
    })

    return Mailstore.of({ resolveRecipient, accept, purgeExpired, foldCounts })
  }))

  /** With its own BlobStore, SearchIndex and Entitlements, and the process's PipelineWakeups and PipelineHandoff. */
  static readonly layer = Mailstore.layerNoDeps.pipe(
    Layer.provide([BlobStore.layer, SearchIndex.layer, Entitlements.layer, PipelineWakeups.layer, PipelineHandoff.layer])
  )
}
