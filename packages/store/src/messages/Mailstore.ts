/**
 * Storing accepted mail. `accept` commits, in one transaction, for each accepted alias: the
 * message row (processing_status 'stub', the durable pipeline job), its raw bytes (BlobStore) and
 * the storage counters of alias and account, making room by eviction when the account's quota
 * would be passed. Only after that commit may ingest answer 250 (or test injection 202).
 */
import { normalizeLocalPart } from "@burnbox/domain/aliases/index"
import { type PlanEntitlements, QuotaExceeded, ResolvedPlan } from "@burnbox/domain"
import { Cause, Context, Deferred, Effect, Layer, Queue, Result, Schema } from "effect"
import { PgTypes } from "@effect/sql-pg"
import { SqlClient } from "effect/sql"
import { BlobStore, type RawBytes, rawBytes, type StagedRaw } from "../platform/BlobStore.ts"
import { rowsDecoder } from "../platform/Rows.ts"
import { phaseClock, stampPhase } from "../platform/PhaseStamps.ts"
import { now } from "../platform/Time.ts"
import { SearchIndex } from "../search/SearchIndex.ts"
import { Entitlements } from "../plans/Entitlements.ts"
import { PipelineWakeups } from "../pipeline/PipelineWakeups.ts"

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
/** RCPT lookups: how many shared queries may be in flight at once. */
const LookupsInFlight = 4

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
        UPDATE aliases SET storage_used_bytes = storage_used_bytes - ${freed.bytes}, unread_count = greatest(0, unread_count - ${freed.unread})
        WHERE id = ${aliasId}`
    }
    const total = victims.reduce((n, v) => n + v.size_bytes, 0)
    yield* sql`
      UPDATE accounts SET storage_used_bytes = greatest(0, storage_used_bytes - ${total})
      WHERE id = (SELECT account_id FROM aliases WHERE id = ${victims[0]!.alias_id})`
  }).pipe(Effect.orDie)

export class Mailstore extends Context.Service<Mailstore, {
  /** RCPT TO: which alias (if any) takes mail for this address. Counts refusals of paused aliases. */
  readonly resolveRecipient: (address: string) => Effect.Effect<RecipientVerdict>
  readonly accept: (input: AcceptInput) => Effect.Effect<ReadonlyArray<Accepted>, QuotaExceeded>
  /** Deletes messages past their retention; answers how many. */
  readonly purgeExpired: Effect.Effect<number>
}>()("burnbox/Mailstore") {
  /** Needs BlobStore and SearchIndex besides the SQL client. */
  static readonly layerNoDeps = Layer.effect(Mailstore, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const blobs = yield* BlobStore
    const search = yield* SearchIndex
    const entitlements = yield* Entitlements
    const pipelineWakeups = yield* PipelineWakeups
    const stores: MessageStores = { sql, blobs, search }

    const recipientRows = rowsDecoder(Schema.Struct({ n: Schema.Int, id: Schema.Int, account_id: Schema.Int, status: Schema.String }))
    const victimRows = rowsDecoder(DestroyedMessage)
    const accountRows = rowsDecoder(Schema.Struct({ storage_used_bytes: Schema.Number, plan: ResolvedPlan }))
    const idRows = rowsDecoder(Schema.Struct({ id: Schema.Int }))
    const LockedAccount = Schema.Struct({ id: Schema.Int, used: Schema.Number, plan: ResolvedPlan })
    const lockedRows = rowsDecoder(LockedAccount)
    const batchAnswers = rowsDecoder(Schema.Struct({
      ids: Schema.NullOr(Schema.Array(Schema.Tuple([Schema.Int, Schema.Int]))),
      accounts: Schema.NullOr(Schema.Array(LockedAccount))
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
          const [account] = yield* sql`
            SELECT a.storage_used_bytes::float8 AS storage_used_bytes, ${entitlements.column("a")} AS plan
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
            ), alias AS (
              UPDATE aliases SET storage_used_bytes = storage_used_bytes + ${size}, received_count = received_count + 1,
                     unread_count = unread_count + 1, last_received_at = ${at}
              WHERE id = ${delivery.aliasId}
            ), account AS (
              UPDATE accounts SET storage_used_bytes = storage_used_bytes + ${size} WHERE id = ${delivery.accountId}
            )
            SELECT id FROM message`.pipe(Effect.flatMap(idRows))
          accepted.push({ id: row!.id, aliasId: delivery.aliasId, receivedAt: at, expiresAt })
        }
        return accepted as ReadonlyArray<Accepted>
      })

    interface AccountQuota {
      readonly storageUsedBytes: number
      readonly plan: PlanEntitlements
    }
    interface LockedAccount {
      readonly id: number
      readonly used: number
      readonly plan: PlanEntitlements
    }
    const quotaOf = (a: LockedAccount): AccountQuota => ({ storageUsedBytes: a.used, plan: a.plan })

    /**
     * The plan of each account as last read under its lock. The set-based statement takes
     * retention from here; what it assumed is checked against the rows it locked before the
     * transaction may commit, so a stale entry costs a retry, never a wrong row.
     */
    const knownPlans = new Map<number, PlanEntitlements>()

    /** True when every message of the batch fits its accounts' quotas as they stand: nothing to evict or refuse. */
    const fitsWithoutEviction = (batch: ReadonlyArray<Pending>, quotas: ReadonlyMap<number, AccountQuota>) => {
      const adding = new Map<number, number>()
      for (const p of batch) {
        for (const delivery of p.input.deliveries) {
          const quota = quotas.get(delivery.accountId)
          if (quota === undefined || p.raw.size > quota.plan.storageQuotaBytes) return false
          adding.set(delivery.accountId, (adding.get(delivery.accountId) ?? 0) + p.raw.size)
        }
      }
      for (const [accountId, bytes] of adding) {
        const quota = quotas.get(accountId)!
        if (quota.storageUsedBytes + bytes > quota.plan.storageQuotaBytes) return false
      }
      return true
    }

    /** The set-based statement cannot take this batch (a plan changed, eviction is needed, it failed). */
    class NotSetBased {
      readonly _tag = "NotSetBased"
      /**
       * The statement may try again: only a plan differed from what it assumed, or it was chosen
       * as a deadlock's victim (rolled back whole; batches of one account meeting under load).
       */
      readonly stalePlan: boolean
      constructor(stalePlan: boolean) {
        this.stalePlan = stalePlan
      }
    }

    /**
     * The whole batch in one statement: it locks the batch's accounts (in id order, before
     * anything else), draws the ids, inserts every message row and raw copy, updates the
     * counters once per alias and per account (the pipeline hears of it after the commit:
     * `runBatch`, PipelineWakeups). It answers the locked
     * accounts as they were before the batch, and this checks, before the transaction can
     * commit, that each plan is the one the statement assumed and that nothing needed eviction
     * or was over a quota; if not, the transaction rolls back (NotSetBased).
     */
    const acceptSet = (batch: ReadonlyArray<Pending>, accountIds: ReadonlyArray<number>, at: Date) =>
      Effect.gen(function*() {
        const aliasIds = aliasesOf(batch)
        const staged = yield* blobs.stageRaw(batch.map((p) => p.raw))
        const rows = batch.flatMap((p, n) => p.input.deliveries.map((delivery) => {
          const plan = knownPlans.get(delivery.accountId)!
          const retentionDays = p.input.source === "test" ? TestMessageRetentionDays : plan.retentionDays
          return { n: n + 1, delivery, input: p.input, size: p.raw.size, expiresAt: new Date(at.getTime() + retentionDays * dayMs) }
        }))
        const [answer] = yield* sql`
          WITH locked AS (
            SELECT a.id, a.storage_used_bytes::float8 AS used, ${entitlements.column("a")} AS plan
            FROM accounts a
            WHERE a.id = ANY(${accountIds}::int4[]) ORDER BY a.id FOR NO KEY UPDATE OF a
          ), input AS (
            SELECT * FROM unnest(${rows.map((_, i) => i + 1)}::int4[], ${rows.map((r) => r.n)}::int4[],
                                 ${rows.map((r) => r.delivery.accountId)}::int4[], ${rows.map((r) => r.delivery.aliasId)}::int4[],
                                 ${rows.map((r) => r.input.source)}::text[], ${rows.map((r) => r.delivery.recipient)}::text[],
                                 ${nullableText(rows.map((r) => r.input.envelopeFrom))}, ${nullableText(rows.map((r) => r.input.clientAddress))},
                                 ${nullableText(rows.map((r) => r.input.clientHelo))}, ${rows.map((r) => r.expiresAt)}::timestamptz[],
                                 ${rows.map((r) => r.size)}::int4[])
              AS i(ord, n, account_id, alias_id, source, recipient, envelope_from, client_address, client_helo, expires_at, size_bytes)
          ), aliases_locked AS (
            -- then the batch's aliases, in id order (after the accounts: this reads the count)
            SELECT al.id FROM aliases al
            WHERE al.id = ANY(${aliasIds}::int4[]) AND (SELECT count(*) FROM locked) = ${accountIds.length}
            ORDER BY al.id FOR NO KEY UPDATE OF al
          ), ids AS (
            -- every account and alias locked first (the counts read them all), in id order, so
            -- batches, the pipeline and reader actions that lock aliases in id order never deadlock
            SELECT ord, nextval(pg_get_serial_sequence('messages', 'id'))::int4 AS id FROM input
            WHERE (SELECT count(*) FROM locked) = ${accountIds.length} AND (SELECT count(*) FROM aliases_locked) >= 0
          ), message AS (
            INSERT INTO messages (id, account_id, alias_id, source, recipient, envelope_from, client_address, client_helo,
                                  received_at, expires_at, size_bytes)
            OVERRIDING SYSTEM VALUE
            SELECT ids.id, i.account_id, i.alias_id, i.source, i.recipient, i.envelope_from, i.client_address, i.client_helo,
                   ${at}, i.expires_at, i.size_bytes
            FROM input i JOIN ids USING (ord)
            RETURNING account_id, alias_id, size_bytes
          ), raw AS (${blobs.insertRawBatch(staged)}
          ), alias AS (
            UPDATE aliases al SET storage_used_bytes = al.storage_used_bytes + s.bytes, received_count = al.received_count + s.count,
                   unread_count = al.unread_count + s.count, last_received_at = ${at}
            FROM (SELECT alias_id, sum(size_bytes) AS bytes, count(*)::int4 AS count FROM message GROUP BY alias_id) s
            WHERE al.id = s.alias_id
          ), account AS (
            UPDATE accounts a SET storage_used_bytes = a.storage_used_bytes + s.bytes
            FROM (SELECT account_id, sum(size_bytes) AS bytes FROM message GROUP BY account_id) s
            WHERE a.id = s.account_id
          )
          SELECT (SELECT json_agg(json_build_array(ord, id)) FROM ids) AS ids,
                 (SELECT json_agg(json_build_object('id', id, 'used', used, 'plan', plan)) FROM locked) AS accounts`.pipe(Effect.flatMap(batchAnswers))
        yield* blobs.unstageRaw(staged)
        const locked = answer?.accounts ?? []
        const quotas = new Map(locked.map((a) => [a.id, quotaOf(a)]))
        const assumed = accountIds.every((id) => knownPlans.get(id)?.retentionDays === quotas.get(id)?.plan.retentionDays)
        for (const [id, quota] of quotas) knownPlans.set(id, quota.plan)
        const ids = answer?.ids ?? []
        if (ids.length !== rows.length || !fitsWithoutEviction(batch, quotas)) return yield* Effect.fail(new NotSetBased(false))
        if (!assumed) return yield* Effect.fail(new NotSetBased(true))
        const idOf = new Map(ids.map(([ord, id]) => [ord, id]))
        const accepted: Array<Array<Accepted>> = batch.map(() => [])
        rows.forEach((r, i) => accepted[r.n - 1]!.push({ id: idOf.get(i + 1)!, aliasId: r.delivery.aliasId, receivedAt: at, expiresAt: r.expiresAt }))
        return accepted.map((list) => Result.succeed(list as ReadonlyArray<Accepted>))
      }).pipe(Effect.catchTag("SqlError", (error) =>
        error.cause._tag === "DeadlockError"
          ? Effect.logDebug("group commit: the set-based statement was a deadlock's victim; it runs again").pipe(
            Effect.andThen(Effect.fail(new NotSetBased(true)))
          )
          : Effect.logWarning("group commit: the set-based statement failed; the batch is stored message by message", error).pipe(
            Effect.andThen(Effect.fail(new NotSetBased(false)))
          )))

    /**
     * Group commit: accepts arriving together share one transaction (and one WAL flush).
     * The accounts involved are locked first, in id order, so batches never deadlock. The
     * usual batch is the one set-based statement; when a plan is not known yet or changed, an
     * account needs eviction, a message is over a quota or the statement fails, the batch is
     * done again with each message in its own savepoint, so one refused message leaves the
     * others stored.
     */
    interface Pending {
      readonly input: AcceptInput
      readonly raw: RawBytes
      readonly done: Deferred.Deferred<ReadonlyArray<Accepted>, QuotaExceeded>
      /** When the accept was asked (PhaseStamps). */
      readonly askedAt: number
    }
    const pending = yield* Queue.unbounded<Pending>()
    const accountsOf = (batch: ReadonlyArray<Pending>) =>
      [...new Set(batch.flatMap((p) => p.input.deliveries.map((d) => d.accountId)))].sort((a, b) => a - b)
    const aliasesOf = (batch: ReadonlyArray<Pending>) =>
      [...new Set(batch.flatMap((p) => p.input.deliveries.map((d) => d.aliasId)))].sort((a, b) => a - b)
    const setBased = (batch: ReadonlyArray<Pending>, at: Date) =>
      sql.withTransaction(acceptSet(batch, accountsOf(batch), at))
    const messageByMessage = (batch: ReadonlyArray<Pending>, at: Date) =>
      sql.withTransaction(Effect.gen(function*() {
        const accountIds = accountsOf(batch)
        const accounts = accountIds.length === 0 ? [] : yield* sql`
          SELECT a.id, a.storage_used_bytes::float8 AS used, ${entitlements.column("a")} AS plan
          FROM accounts a
          WHERE a.id IN ${sql.in(accountIds)} ORDER BY a.id FOR NO KEY UPDATE OF a`.pipe(Effect.flatMap(lockedRows))
        for (const a of accounts) knownPlans.set(a.id, quotaOf(a).plan)
        // The aliases next, in id order (as the set-based statement locks them).
        const aliasIds = aliasesOf(batch)
        if (aliasIds.length > 0) yield* sql`SELECT id FROM aliases WHERE id IN ${sql.in(aliasIds)} ORDER BY id FOR NO KEY UPDATE`
        const staged = yield* blobs.stageRaw(batch.map((p) => p.raw))
        const results = yield* Effect.forEach(batch, (p, i) => sql.withTransaction(acceptOne(p.input, staged, i, at)).pipe(Effect.result))
        yield* blobs.unstageRaw(staged)
        return results
      }))
    const runBatch = (batch: ReadonlyArray<Pending>) =>
      Effect.gen(function*() {
        const batchAt = phaseClock()
        const at = yield* now
        const known = batch.every((p) => p.input.deliveries.every((d) => knownPlans.has(d.accountId)))
        const outcomes = known
          ? yield* setBased(batch, at).pipe(
            Effect.catchTag("NotSetBased", (e) => e.stalePlan ? setBased(batch, at) : Effect.fail(e)),
            Effect.catchTag("NotSetBased", () => messageByMessage(batch, at))
          )
          : yield* messageByMessage(batch, at)
        const committedAt = phaseClock()
        // The pipeline hears of it after the commit (PipelineWakeups: not a NOTIFY in the transaction).
        if (outcomes.some(Result.isSuccess)) yield* pipelineWakeups.queued
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
      }).pipe(
        Effect.catchCause((cause) => Effect.forEach(batch, (p) => Deferred.failCause(p.done, Cause.die(Cause.squash(cause))), { discard: true }))
      )
    // Two batches in flight: one gathers and sends while the other waits for its commit.
    for (let i = 0; i < BatchesInFlight; i++) {
      yield* Queue.takeBetween(pending, 1, MaxBatch).pipe(Effect.flatMap(runBatch), Effect.forever, Effect.forkScoped)
    }

    const accept = Effect.fn("Mailstore.accept")(function*(input: AcceptInput) {
      const done = yield* Deferred.make<ReadonlyArray<Accepted>, QuotaExceeded>()
      yield* Queue.offer(pending, { input, raw: rawBytes(input.raw), done, askedAt: phaseClock() })
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
        for (const list of byAccount.values()) yield* destroyMessages(stores, list)
        return victims.length
      })).pipe(Effect.orDie)
    })

    return Mailstore.of({ resolveRecipient, accept, purgeExpired })
  }))

  /** With its own BlobStore, SearchIndex and Entitlements, and the process's PipelineWakeups. */
  static readonly layer = Mailstore.layerNoDeps.pipe(Layer.provide([BlobStore.layer, SearchIndex.layer, Entitlements.layer, PipelineWakeups.layer]))
}
