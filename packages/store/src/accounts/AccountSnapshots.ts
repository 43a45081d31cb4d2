/**
 * Recently read accounts, kept in memory so the hottest reads (GET /me, GET /storage) need no
 * query. A snapshot is served only while this process is listening for the `burnbox_accounts`
 * notifications that triggers send at every commit changing an account (migration 0011), and
 * for at most `SnapshotMaxAgeMs`. Writes this process makes through the API forget the
 * account's snapshot before their response is sent (read-your-writes); writes from other
 * processes reach it when their notification arrives, normally within a millisecond.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, FiberMap, Layer, Queue, Schedule } from "effect"
import { type AccountRow, Accounts } from "./Accounts.ts"
import { now } from "../platform/Time.ts"

export const AccountChangesChannel = "burnbox_accounts"

/** The longest a snapshot is trusted, even when no notification said it changed. */
export const SnapshotMaxAgeMs = 1_000

interface Snapshot {
  readonly row: AccountRow
  readonly loadedAt: number
}

/** Parses a notification payload: account ids, or every account (`*`). */
export const changedAccounts = (payload: string): ReadonlyArray<number> | "all" =>
  payload === "*" ? "all" : payload.split(",").map(Number).filter(Number.isSafeInteger)

export class AccountSnapshots extends Context.Service<AccountSnapshots, {
  /** The account, from a fresh snapshot or read (and kept) now. */
  readonly get: (id: number) => Effect.Effect<AccountRow | undefined>
  /** A fresh snapshot at `atMs`, without waiting; undefined when it would need a query. */
  readonly peek: (id: number, atMs: number) => AccountRow | undefined
  /** Drops the account's snapshot, and any read of it still in flight. */
  readonly forget: (id: number) => void
  /** Drops every snapshot: for writes made behind the service's back that cannot wait for their notification. */
  readonly forgetAll: () => void
}>()("burnbox/AccountSnapshots") {
  static readonly layer = Layer.effect(AccountSnapshots, Effect.gen(function*() {
    const accounts = yield* Accounts
    const pg = yield* PgClient.PgClient
    const snapshots = new Map<number, Snapshot>()
    /** Bumped by every forget of the account, so a read of it that started before is not kept. */
    const generations = new Map<number, number>()
    /** Bumped by every forgetAll, so no read that started before it is kept (of any account, read before or not). */
    let epoch = 0
    let listening = false

    const forgetAll = () => {
      snapshots.clear()
      generations.clear()
      epoch++
    }
    const forget = (id: number) => {
      snapshots.delete(id)
      generations.set(id, (generations.get(id) ?? 0) + 1)
      // Bounded: clearing the counts would let an older read match again, so all of it goes.
      if (generations.size > 100_000) forgetAll()
    }

    /** Reads the account and keeps it, unless it was forgotten meanwhile. */
    const load = (id: number) =>
      Effect.gen(function*() {
        const at = (yield* now).getTime()
        const started = { epoch, generation: generations.get(id) ?? 0 }
        const row = yield* accounts.get(id)
        if (row !== undefined && listening && epoch === started.epoch && (generations.get(id) ?? 0) === started.generation) {
          if (snapshots.size >= 50_000) snapshots.clear()
          snapshots.set(id, { row, loadedAt: at })
        }
        return row
      })

    // A snapshot past half its age is read again in the background, so a busy account's reads
    // never all wait for the database at once when it expires. One read per account at a time,
    // on fibers of this layer's scope: closing the layer (shutdown) interrupts them.
    const refreshes = yield* FiberMap.make<number>()
    const runRefresh = yield* FiberMap.runtime(refreshes)()
    const refreshAhead = (id: number) => {
      if (FiberMap.hasUnsafe(refreshes, id)) return
      runRefresh(id, load(id).pipe(
        Effect.catchCause((cause) => Effect.logWarning("account snapshot not read ahead; the next read will", cause))
      ), { onlyIfMissing: true })
    }

    const peek = (id: number, atMs: number) => {
      const snapshot = listening ? snapshots.get(id) : undefined
      if (snapshot === undefined) return undefined
      const age = atMs - snapshot.loadedAt
      if (age >= SnapshotMaxAgeMs) return undefined
      if (age >= SnapshotMaxAgeMs / 2) refreshAhead(id)
      return snapshot.row
    }

    const get = (id: number) =>
      Effect.gen(function*() {
        const fresh = peek(id, (yield* now).getTime())
        return fresh !== undefined ? fresh : yield* load(id)
      })

    // Listen; when the connection fails, stop trusting snapshots until listening again.
    const listen = Effect.scoped(Effect.gen(function*() {
      const changes = yield* pg.listen(AccountChangesChannel)
      forgetAll()
      listening = true
      while (true) {
        const { payload } = yield* Queue.take(changes)
        const changed = changedAccounts(payload)
        if (changed === "all") forgetAll()
        else for (const id of changed) forget(id)
      }
    })).pipe(
      Effect.ensuring(Effect.sync(() => {
        listening = false
        forgetAll()
      })),
      Effect.catchCause((cause) => Effect.logWarning("account change notifications lost; reading accounts from the database", cause)),
      Effect.repeat(Schedule.spaced("1 second"))
    )
    yield* Effect.forkScoped(listen)

    return AccountSnapshots.of({ get, peek, forget, forgetAll })
  }))
}
