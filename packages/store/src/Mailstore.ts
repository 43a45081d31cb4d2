/**
 * Storing accepted mail. `accept` commits, in one transaction, for each accepted alias: the
 * message row (processing_status 'stub', the durable pipeline job), its raw bytes and the
 * storage counters of alias and account, making room by eviction when the account's quota
 * would be passed. Only after that commit may ingest answer 250 (or test injection 202).
 */
import { normalizeLocalPart } from "@burnbox/domain/aliases/index"
import { type PlanEntitlements, type PlanOverrides, resolveEntitlements } from "@burnbox/domain"
import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { now } from "./Time.ts"

export const PipelineChannel = "burnbox_pipeline"
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
  readonly raw: Uint8Array
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

/** The message is larger than the whole quota of an account it is for. */
export class OverQuota {
  readonly _tag = "OverQuota"
}

const dayMs = 86_400_000

export class Mailstore extends Context.Service<Mailstore, {
  /** RCPT TO: which alias (if any) takes mail for this address. Counts refusals of paused aliases. */
  readonly resolveRecipient: (address: string) => Effect.Effect<RecipientVerdict>
  readonly accept: (input: AcceptInput) => Effect.Effect<ReadonlyArray<Accepted>, OverQuota>
  /** Deletes messages past their retention; answers how many. */
  readonly purgeExpired: Effect.Effect<number>
}>()("burnbox/Mailstore") {
  static readonly layer = Layer.effect(Mailstore, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const resolveRecipient = Effect.fn("Mailstore.resolveRecipient")(function*(address: string) {
      const at = address.lastIndexOf("@")
      if (at <= 0) return { kind: "unknown" } as const
      const { base } = normalizeLocalPart(address.slice(0, at))
      const domain = address.slice(at + 1).toLowerCase()
      const rows = yield* sql<{ id: number; account_id: number; status: string; domain_state: string }>`
        SELECT al.id, al.account_id, al.status, d.state AS domain_state
        FROM aliases al JOIN domains d ON d.id = al.domain_id
        WHERE d.name = ${domain} AND al.local_key = ${base}`.pipe(Effect.orDie)
      const row = rows[0]
      if (row === undefined || row.status === "burned" || row.status === "reserved") return { kind: "unknown" } as const
      if (row.status === "paused") {
        yield* sql`UPDATE aliases SET rejected_count = rejected_count + 1 WHERE id = ${row.id}`.pipe(Effect.orDie)
        return { kind: "paused", aliasId: row.id } as const
      }
      // A retired domain keeps delivering to the aliases it already has; it only takes no new claims.
      return { kind: "accept", aliasId: row.id, accountId: row.account_id } as const
    })

    /** Frees at least `needed` bytes of the account: the trash first, then the oldest unpinned mail. */
    const evict = (accountId: number, needed: number) =>
      Effect.gen(function*() {
        const victims = yield* sql<{ id: number; alias_id: number; size_bytes: number; unread: boolean }>`
          WITH candidates AS (
            SELECT m.id, m.alias_id, m.size_bytes, NOT coalesce(s.is_read, false) AND m.trashed_at IS NULL AS unread,
                   sum(m.size_bytes) OVER (ORDER BY m.trashed_at IS NULL, m.trashed_at, m.received_at, m.id) AS running
            FROM messages m
            LEFT JOIN message_states s ON s.message_id = m.id AND s.account_id = m.account_id
            WHERE m.account_id = ${accountId} AND (m.trashed_at IS NOT NULL OR NOT coalesce(s.pinned, false))
          )
          SELECT id, alias_id, size_bytes, unread FROM candidates WHERE running - size_bytes < ${needed}`.pipe(Effect.orDie)
        if (victims.length === 0) return 0
        yield* removeMessages(victims)
        return victims.reduce((n, v) => n + v.size_bytes, 0)
      })

    const removeMessages = (victims: ReadonlyArray<{ id: number; alias_id: number; size_bytes: number; unread: boolean }>) =>
      Effect.gen(function*() {
        yield* sql`DELETE FROM messages WHERE id IN ${sql.in(victims.map((v) => v.id))}`.pipe(Effect.orDie)
        const byAlias = new Map<number, { bytes: number; unread: number }>()
        for (const v of victims) {
          const entry = byAlias.get(v.alias_id) ?? { bytes: 0, unread: 0 }
          entry.bytes += v.size_bytes
          entry.unread += v.unread ? 1 : 0
          byAlias.set(v.alias_id, entry)
        }
        for (const [aliasId, freed] of byAlias) {
          yield* sql`
            UPDATE aliases SET storage_used_bytes = storage_used_bytes - ${freed.bytes}, unread_count = greatest(0, unread_count - ${freed.unread})
            WHERE id = ${aliasId}`.pipe(Effect.orDie)
        }
        const total = victims.reduce((n, v) => n + v.size_bytes, 0)
        yield* sql`
          UPDATE accounts SET storage_used_bytes = greatest(0, storage_used_bytes - ${total})
          WHERE id = (SELECT account_id FROM aliases WHERE id = ${victims[0]!.alias_id})`.pipe(Effect.orDie)
      })

    const accept = Effect.fn("Mailstore.accept")(function*(input: AcceptInput) {
      const at = yield* now
      const size = input.raw.byteLength
      return yield* sql.withTransaction(Effect.gen(function*() {
        const accepted: Array<Accepted> = []
        for (const delivery of input.deliveries) {
          const [account] = yield* sql<{ storage_used_bytes: number; entitlements: PlanEntitlements; overrides: PlanOverrides }>`
            SELECT a.storage_used_bytes::float8 AS storage_used_bytes, p.entitlements, a.overrides
            FROM accounts a JOIN plans p ON p.code = a.plan WHERE a.id = ${delivery.accountId} FOR NO KEY UPDATE OF a`
          const plan = resolveEntitlements(account!.entitlements, account!.overrides)
          if (size > plan.storageQuotaBytes) return yield* Effect.fail(new OverQuota())
          const overBy = account!.storage_used_bytes + size - plan.storageQuotaBytes
          if (overBy > 0) yield* evict(delivery.accountId, overBy)
          const retentionDays = input.source === "test" ? TestMessageRetentionDays : plan.retentionDays
          const expiresAt = new Date(at.getTime() + retentionDays * dayMs)
          const [row] = yield* sql<{ id: number }>`
            INSERT INTO messages (account_id, alias_id, source, recipient, envelope_from, client_address, client_helo,
                                  received_at, expires_at, size_bytes)
            VALUES (${delivery.accountId}, ${delivery.aliasId}, ${input.source}, ${delivery.recipient}, ${input.envelopeFrom},
                    ${input.clientAddress}, ${input.clientHelo}, ${at}, ${expiresAt}, ${size})
            RETURNING id`
          yield* sql`INSERT INTO message_raw (message_id, raw) VALUES (${row!.id}, ${input.raw})`
          yield* sql`
            UPDATE aliases SET storage_used_bytes = storage_used_bytes + ${size}, received_count = received_count + 1,
                   unread_count = unread_count + 1, last_received_at = ${at}
            WHERE id = ${delivery.aliasId}`
          yield* sql`UPDATE accounts SET storage_used_bytes = storage_used_bytes + ${size} WHERE id = ${delivery.accountId}`
          accepted.push({ id: row!.id, aliasId: delivery.aliasId, receivedAt: at, expiresAt })
        }
        yield* sql`SELECT pg_notify(${PipelineChannel}, '')`
        return accepted
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    const purgeExpired = Effect.gen(function*() {
      const at = yield* now
      return yield* sql.withTransaction(Effect.gen(function*() {
        const victims = yield* sql<{ id: number; alias_id: number; size_bytes: number; unread: boolean }>`
          SELECT m.id, m.alias_id, m.size_bytes, NOT coalesce(s.is_read, false) AND m.trashed_at IS NULL AS unread
          FROM messages m LEFT JOIN message_states s ON s.message_id = m.id AND s.account_id = m.account_id
          WHERE m.expires_at <= ${at} OR m.trash_purge_at <= ${at}
          ORDER BY m.id LIMIT 1000 FOR UPDATE OF m SKIP LOCKED`
        type Victim = (typeof victims)[number]
        const byAccount = new Map<number, Array<Victim>>()
        for (const v of victims) {
          const [owner] = yield* sql<{ account_id: number }>`SELECT account_id FROM aliases WHERE id = ${v.alias_id}`
          const list = byAccount.get(owner!.account_id) ?? []
          list.push(v)
          byAccount.set(owner!.account_id, list)
        }
        for (const list of byAccount.values()) yield* removeMessages(list)
        return victims.length
      })).pipe(Effect.orDie)
    })

    return Mailstore.of({ resolveRecipient, accept, purgeExpired })
  }))
}
