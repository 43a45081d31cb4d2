/**
 * Changing mail as its reader (spec 3.2, 4.5): reader state (PATCH and bulk flags and tags),
 * the trash (delete, restore, empty, delete forever), the remote-image preference, and the
 * HTML and attachment bodies. Each selects the caller's mail through MailboxAccess; the bodies
 * are read through BlobStore, and the trash and archive changes are told to SearchIndex.
 *
 * Every change runs in one transaction that first locks the owner's account row (as ingest
 * does before it stores or evicts), then the messages in id order: counters of aliases and
 * account are only ever touched in that order, so changes, ingest and eviction cannot deadlock.
 */
import {
  AliasNotFound,
  AttachmentNotFound,
  AttachmentPreviewUnavailable,
  type BulkAction,
  type BulkMessageResult,
  BulkTagActionWithoutTag,
  DangerousAttachmentUnconfirmed,
  type EmptyTrashResult,
  type EventAlias,
  type MessageOutcome,
  MessageNotFound,
  type MessageState,
  PinLimitReached,
  type PlanEntitlements,
  type RemoteImagePreference,
  StateFieldsNeedSession,
  stateFieldsRefused,
  type TagInput,
  TagNotOwned,
  type UpdateMessageState
} from "@burnbox/domain"
import { RequestTimeHtmlMaxChars, sanitizeEmailHtml, smallCheckedHtml } from "@burnbox/domain/mail/index"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { BlobStore } from "../platform/BlobStore.ts"
import { BurnboxConfig } from "../platform/Config.ts"
import { rowsDecoder } from "../platform/Rows.ts"
import { SearchIndex } from "../search/SearchIndex.ts"
import { MailboxAccess, type MailboxUse, roleAllows } from "../sharing/MailboxAccess.ts"
import { destroyMessages, type MessageStores } from "./Mailstore.ts"
import { senderAddressOf } from "./Messages.ts"
import { Entitlements } from "../plans/Entitlements.ts"
import { appendEvent } from "../webhooks/Outbox.ts"
import { notifyChanges } from "../realtime/Realtime.ts"
import { now } from "../platform/Time.ts"

const dayMs = 86_400_000

/**
 * A message as a change sees it: where it lives, its owner (the caller, or for a guest the
 * account that shared the mailbox) with the owner's read mark (the alias's unread count is the
 * owner's), and the caller's marks on it.
 */
const Target = Schema.Struct({
  id: Schema.Int,
  alias_id: Schema.Int,
  owner_id: Schema.Int,
  owner_read: Schema.Boolean,
  local_part: Schema.String,
  domain: Schema.String,
  label: Schema.NullOr(Schema.String),
  size_bytes: Schema.Int,
  expires_at: Schema.Date,
  trashed_at: Schema.NullOr(Schema.Date),
  trash_purge_at: Schema.NullOr(Schema.Date),
  is_read: Schema.Boolean,
  starred: Schema.Boolean,
  pinned: Schema.Boolean,
  archived: Schema.Boolean
})
type Target = typeof Target.Type

const TagRow = Schema.Struct({ id: Schema.Int, name: Schema.String, color: Schema.NullOr(Schema.String) })
const CountRow = Schema.Struct({ n: Schema.Int })
/** The sender columns a message's remote-image preference is keyed by (`senderAddressOf`). */
const senderColumns = { sender_address: Schema.String, envelope_from: Schema.NullOr(Schema.String) }

type Flags = Partial<Pick<Target, "is_read" | "starred" | "pinned" | "archived">>

/** The purge deadline fixed when a message goes to the trash: the earlier of its retention and the trash window. */
export const trashPurgeDeadline = (expiresAt: Date, trashedAt: Date, trashRetentionDays: number): Date =>
  new Date(Math.min(expiresAt.getTime(), trashedAt.getTime() + trashRetentionDays * dayMs))

export interface HtmlBody {
  readonly html: string
  readonly remoteImagesAllowed: boolean
}

export interface AttachmentBody {
  readonly filename: string
  readonly mimeType: string
  readonly dangerous: boolean
  readonly previewable: boolean
  readonly content: Uint8Array
}

const notFound = (messageId: number) => new MessageNotFound({ messageId })
const notOwned = (tagIds: ReadonlyArray<number>, input: TagInput) => new TagNotOwned({ tagIds, input })

const flagOfAction: Partial<Record<BulkAction, Flags>> = {
  mark_read: { is_read: true },
  mark_unread: { is_read: false },
  star: { starred: true },
  unstar: { starred: false },
  pin: { pinned: true },
  unpin: { pinned: false },
  archive: { archived: true },
  unarchive: { archived: false }
}

export class MessageActions extends Context.Service<MessageActions, {
  /**
   * PATCH /messages/{id}: the caller's own marks and tags on a message it may read. A bearer
   * caller changes only isRead (spec 4.5); sessions change them all.
   */
  readonly updateState: (accountId: number, id: number, patch: UpdateMessageState, caller?: "bearer" | "session") =>
    Effect.Effect<MessageState, MessageNotFound | PinLimitReached | TagNotOwned | StateFieldsNeedSession>
  readonly bulk: (accountId: number, input: { readonly ids: ReadonlyArray<number>; readonly action: BulkAction; readonly tagId?: number | undefined }) =>
    Effect.Effect<BulkMessageResult, MessageNotFound | PinLimitReached | TagNotOwned | BulkTagActionWithoutTag>
  /** DELETE /messages/{id}: to the trash when the owner's plan has one, else (or with `permanent`) destroyed. */
  readonly remove: (accountId: number, id: number, permanent: boolean) => Effect.Effect<void, MessageNotFound>
  readonly restore: (accountId: number, id: number) => Effect.Effect<void, MessageNotFound>
  readonly emptyTrash: (accountId: number, aliasId: number | undefined) => Effect.Effect<EmptyTrashResult, AliasNotFound>
  /** The sanitized HTML; MessageNotFound when the message is not the caller's or has no HTML. */
  readonly html: (accountId: number, id: number, remote: boolean) => Effect.Effect<HtmlBody, MessageNotFound>
  readonly setRemoteImagePreference: (accountId: number, id: number, alwaysLoad: boolean) =>
    Effect.Effect<RemoteImagePreference, MessageNotFound>
  /** An attachment to download; a dangerous one only when the request `confirmed` it (spec 4.5: confirm=1). */
  readonly attachment: (accountId: number, messageId: number, attachmentId: number, confirmed: boolean) =>
    Effect.Effect<AttachmentBody, AttachmentNotFound | DangerousAttachmentUnconfirmed>
  /** An attachment shown inline: an image of a previewable type that is not dangerous. */
  readonly attachmentPreview: (accountId: number, messageId: number, attachmentId: number) =>
    Effect.Effect<AttachmentBody, AttachmentPreviewUnavailable>
}>()("burnbox/MessageActions") {
  /** Needs BlobStore, SearchIndex and MailboxAccess besides the SQL client and the config. */
  static readonly layerNoDeps = Layer.effect(MessageActions, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* BurnboxConfig
    const blobs = yield* BlobStore
    const search = yield* SearchIndex
    const access = yield* MailboxAccess
    const entitlements = yield* Entitlements
    const stores: MessageStores = { sql, blobs, search }

    const targetRows = rowsDecoder(Target)
    const countRows = rowsDecoder(CountRow)
    const tagRows = rowsDecoder(TagRow)
    const changedRows = rowsDecoder(Schema.Struct({ message_id: Schema.Int }))
    const victimRows = rowsDecoder(Schema.Struct({ id: Schema.Int, alias_id: Schema.Int, size_bytes: Schema.Int }))
    const htmlRows = rowsDecoder(Schema.Struct({
      html_sanitized: Schema.NullOr(Schema.String),
      html_sanitized_remote: Schema.NullOr(Schema.String),
      remote_image_count: Schema.Int,
      html_original: Schema.NullOr(Schema.String),
      ...senderColumns
    }))
    const senderRows = rowsDecoder(Schema.Struct(senderColumns))

    /** Locks the account row and answers its resolved plan. */
    const lockAccount = entitlements.lock

    /** Locks the messages among `ids` in mailboxes the caller may use so, in id order. */
    const lockTargets = (accountId: number, ids: ReadonlyArray<number>, use: MailboxUse) =>
      Effect.flatMap(access.mailboxes(accountId, use, "m"), (reachable) =>
        sql`
        SELECT m.id, m.alias_id, m.account_id AS owner_id,
               CASE WHEN m.account_id = ${accountId} THEN coalesce(s.is_read, false)
                    ELSE coalesce((SELECT o.is_read FROM message_states o WHERE o.message_id = m.id AND o.account_id = m.account_id), false)
               END AS owner_read,
               al.local_part, d.name AS domain, al.label, m.size_bytes, m.expires_at, m.trashed_at,
               m.trash_purge_at, coalesce(s.is_read, false) AS is_read, coalesce(s.starred, false) AS starred,
               coalesce(s.pinned, false) AS pinned, coalesce(s.archived, false) AS archived
        FROM messages m
        JOIN aliases al ON al.id = m.alias_id
        JOIN domains d ON d.id = al.domain_id
        LEFT JOIN message_states s ON s.message_id = m.id AND s.account_id = ${accountId}
        WHERE m.id IN ${sql.in(ids)} AND ${reachable}
        ORDER BY m.id
        FOR UPDATE OF m`.pipe(Effect.flatMap(targetRows)))

    /** All of `ids`, or MessageNotFound (the first id missing) with nothing changed when any is not the caller's. */
    const lockAll = (accountId: number, ids: ReadonlyArray<number>, use: MailboxUse) =>
      Effect.flatMap(lockTargets(accountId, ids, use), (rows) => {
        if (rows.length === new Set(ids).size) return Effect.succeed(rows)
        const found = new Set(rows.map((row) => row.id))
        return Effect.fail(notFound(ids.find((id) => !found.has(id)) ?? ids[0]!))
      })

    /**
     * aliases.unread_count counts the owner's unread mail outside the trash (a guest's read marks are its own, not counted there).
     * Not clamped at 0: the row alone may be below the count while mail's deltas wait to be folded (MailCounts.ts).
     */
    const adjustUnread = (deltas: ReadonlyArray<{ aliasId: number; delta: number }>) =>
      Effect.gen(function*() {
        const byAlias = new Map<number, number>()
        for (const { aliasId, delta } of deltas) byAlias.set(aliasId, (byAlias.get(aliasId) ?? 0) + delta)
        for (const [aliasId, delta] of [...byAlias].sort(([a], [b]) => a - b)) {
          if (delta !== 0) yield* sql`UPDATE aliases SET unread_count = unread_count + ${delta} WHERE id = ${aliasId}`
        }
      })

    const ownTags = (accountId: number, tagIds: ReadonlyArray<number>) =>
      tagIds.length === 0
        ? Effect.succeed(0)
        : sql`SELECT count(*)::int AS n FROM tags WHERE account_id = ${accountId} AND id IN ${sql.in(tagIds)}`.pipe(
          Effect.flatMap(countRows),
          Effect.map(([row]) => row!.n)
        )

    /** Applies flags to the targets; answers how many actually changed. PinLimitReached when pins would pass maxPinned. */
    const setFlags = (accountId: number, plan: PlanEntitlements, targets: ReadonlyArray<Target>, flags: Flags) =>
      Effect.gen(function*() {
        const keys = Object.keys(flags) as Array<keyof Flags>
        const changed = targets.filter((t) => keys.some((k) => flags[k] !== undefined && flags[k] !== t[k]))
        if (changed.length === 0) return 0
        if (flags.pinned === true) {
          const newlyPinned = changed.filter((t) => !t.pinned && t.trashed_at === null).length
          const [row] = yield* sql`
            SELECT count(*)::int AS n FROM message_states s JOIN messages m ON m.id = s.message_id
            WHERE s.account_id = ${accountId} AND s.pinned AND m.trashed_at IS NULL`.pipe(Effect.flatMap(countRows))
          if (newlyPinned > 0 && row!.n + newlyPinned > plan.maxPinned) {
            return yield* Effect.fail(new PinLimitReached({ limit: plan.maxPinned }))
          }
        }
        const ids = changed.map((t) => t.id)
        yield* sql`
          INSERT INTO message_states (message_id, account_id)
          SELECT id, ${accountId} FROM messages WHERE id IN ${sql.in(ids)}
          ON CONFLICT DO NOTHING`
        yield* sql`
          UPDATE message_states SET
            is_read = coalesce(${flags.is_read ?? null}::boolean, is_read),
            starred = coalesce(${flags.starred ?? null}::boolean, starred),
            pinned = coalesce(${flags.pinned ?? null}::boolean, pinned),
            archived = coalesce(${flags.archived ?? null}::boolean, archived)
          WHERE account_id = ${accountId} AND message_id IN ${sql.in(ids)}`
        if (flags.is_read !== undefined) {
          yield* adjustUnread(changed
            .filter((t) => t.owner_id === accountId && t.is_read !== flags.is_read && t.trashed_at === null)
            .map((t) => ({ aliasId: t.alias_id, delta: flags.is_read ? -1 : 1 })))
        }
        if (flags.archived !== undefined) yield* search.followChanges(changed.filter((t) => t.archived !== flags.archived).map((t) => t.id))
        return changed.length
      })

    const tagsOf = (accountId: number, id: number) =>
      sql`
        SELECT t.id, t.name, t.color FROM message_tags mt JOIN tags t ON t.id = mt.tag_id
        WHERE mt.account_id = ${accountId} AND mt.message_id = ${id} ORDER BY t.name_key, t.id`.pipe(Effect.flatMap(tagRows))

    /** The reader's own view of these messages changed: its Mercure topic hears it at commit. */
    const publishChanged = (accountId: number, messageIds: ReadonlyArray<number>) =>
      messageIds.length === 0 ? Effect.void : notifyChanges(sql, [{ accountId, type: "message.changed", messageIds }])

    const updateState = Effect.fn("MessageActions.updateState")(function*(
      accountId: number,
      id: number,
      patch: UpdateMessageState,
      caller: "bearer" | "session" = "session"
    ) {
      const refused = stateFieldsRefused(caller, patch)
      if (refused.length > 0) return yield* Effect.fail(new StateFieldsNeedSession({ fields: refused }))
      return yield* sql.withTransaction(Effect.gen(function*() {
        const plan = yield* lockAccount(accountId)
        const [target] = yield* lockTargets(accountId, [id], "read")
        if (target === undefined) return yield* Effect.fail(notFound(id))
        const tagIds = patch.tagIds
        if (tagIds !== undefined && (yield* ownTags(accountId, tagIds)) !== tagIds.length) return yield* Effect.fail(notOwned(tagIds, "tagIds"))
        const flags: Flags = {
          ...(patch.isRead === undefined ? {} : { is_read: patch.isRead }),
          ...(patch.starred === undefined ? {} : { starred: patch.starred }),
          ...(patch.pinned === undefined ? {} : { pinned: patch.pinned }),
          ...(patch.archived === undefined ? {} : { archived: patch.archived })
        }
        yield* setFlags(accountId, plan, [target], flags)
        if (tagIds !== undefined) {
          yield* tagIds.length === 0
            ? sql`DELETE FROM message_tags WHERE message_id = ${id} AND account_id = ${accountId}`
            : sql`DELETE FROM message_tags WHERE message_id = ${id} AND account_id = ${accountId} AND tag_id NOT IN ${sql.in(tagIds)}`
          if (tagIds.length > 0) {
            yield* sql`
              INSERT INTO message_tags (message_id, account_id, tag_id)
              SELECT ${id}, ${accountId}, id FROM tags WHERE account_id = ${accountId} AND id IN ${sql.in(tagIds)}
              ON CONFLICT DO NOTHING`
          }
        }
        const state = { ...target, ...flags }
        yield* notifyChanges(sql, [{ accountId, type: "message.changed", aliasId: target.alias_id, messageIds: [id] }])
        return {
          isRead: state.is_read,
          starred: state.starred,
          pinned: state.pinned,
          archived: state.archived,
          tags: yield* tagsOf(accountId, id)
        } satisfies MessageState
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    /**
     * Trashes or destroys the targets, as each mailbox owner's plan says (spec 4.5, rule 6: the
     * owner's, not a guest caller's; `plan` is the caller's, read for its own mail); one outcome per target.
     */
    const deleteTargets = (accountId: number, plan: PlanEntitlements, targets: ReadonlyArray<Target>, forever: boolean) =>
      Effect.gen(function*() {
        const at = yield* now
        const trashDaysOf = new Map<number, number>([[accountId, plan.trashRetentionDays]])
        for (const owner of new Set(targets.map((t) => t.owner_id))) {
          if (!trashDaysOf.has(owner)) trashDaysOf.set(owner, (yield* entitlements.of(owner)).trashRetentionDays)
        }
        const trashDays = (t: Target) => trashDaysOf.get(t.owner_id)!
        const outcomes = new Map<number, MessageOutcome>()
        const inMailbox = targets.filter((t) => t.trashed_at === null)
        // A plain delete never destroys what is already in the trash, whatever the plan is now (spec 4.5, rule 7).
        const toDestroy = forever ? targets : inMailbox.filter((t) => trashDays(t) <= 0)
        const toTrash = forever ? [] : inMailbox.filter((t) => trashDays(t) > 0)
        for (const t of targets) {
          if (t.trashed_at !== null && !forever) {
            outcomes.set(t.id, { id: t.id, outcome: "trashed", trashPurgeAt: t.trash_purge_at?.toISOString() ?? null })
          }
        }
        for (const t of toTrash) {
          const purgeAt = trashPurgeDeadline(t.expires_at, at, trashDays(t))
          yield* sql`UPDATE messages SET trashed_at = ${at}, trash_purge_at = ${purgeAt} WHERE id = ${t.id}`
          outcomes.set(t.id, { id: t.id, outcome: "trashed", trashPurgeAt: purgeAt.toISOString() })
        }
        yield* adjustUnread(toTrash.filter((t) => !t.owner_read).map((t) => ({ aliasId: t.alias_id, delta: -1 })))
        yield* search.followChanges(toTrash.map((t) => t.id))
        yield* destroyMessages(stores, toDestroy.map((t) => ({
          id: t.id,
          alias_id: t.alias_id,
          size_bytes: t.size_bytes,
          unread: !t.owner_read && t.trashed_at === null
        })))
        for (const t of toDestroy) outcomes.set(t.id, { id: t.id, outcome: "deleted", trashPurgeAt: null })
        return { outcomes, trashed: toTrash.length, deleted: toTrash.length + toDestroy.length }
      })

    /** Takes the targets out of the trash, with message.restored (the owner's event) for each one that was in it. */
    const restoreTargets = (targets: ReadonlyArray<Target>) =>
      Effect.gen(function*() {
        const at = yield* now
        const trashed = targets.filter((t) => t.trashed_at !== null)
        if (trashed.length === 0) return 0
        yield* sql`UPDATE messages SET trashed_at = NULL, trash_purge_at = NULL WHERE id IN ${sql.in(trashed.map((t) => t.id))}`
        yield* search.followChanges(trashed.map((t) => t.id))
        yield* adjustUnread(trashed.filter((t) => !t.owner_read).map((t) => ({ aliasId: t.alias_id, delta: 1 })))
        for (const t of trashed) {
          const alias: EventAlias = { id: t.alias_id, address: `${t.local_part}@${t.domain}`, label: t.label }
          yield* appendEvent(sql, {
            accountId: t.owner_id,
            alias,
            type: "message.restored",
            time: at,
            data: { alias, message_id: t.id, restored_at: at.toISOString(), url: `${config.baseUrl}/messages/${t.id}` }
          })
        }
        return trashed.length
      })

    const remove = Effect.fn("MessageActions.remove")(function*(accountId: number, id: number, permanent: boolean) {
      yield* sql.withTransaction(Effect.gen(function*() {
        const plan = yield* lockAccount(accountId)
        const targets = yield* lockAll(accountId, [id], "delete")
        yield* deleteTargets(accountId, plan, targets, permanent)
        yield* publishChanged(accountId, targets.map((t) => t.id))
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    const restore = Effect.fn("MessageActions.restore")(function*(accountId: number, id: number) {
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* lockAccount(accountId)
        const targets = yield* lockAll(accountId, [id], "delete")
        yield* restoreTargets(targets)
        yield* publishChanged(accountId, targets.map((t) => t.id))
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    const bulk = Effect.fn("MessageActions.bulk")(function*(
      accountId: number,
      input: { readonly ids: ReadonlyArray<number>; readonly action: BulkAction; readonly tagId?: number | undefined }
    ) {
      const { action, ids, tagId } = input
      const tagAction = action === "add_tag" || action === "remove_tag"
      if (tagAction && tagId === undefined) {
        return yield* Effect.fail(new BulkTagActionWithoutTag({ action }))
      }
      return yield* sql.withTransaction(Effect.gen(function*() {
        const plan = yield* lockAccount(accountId)
        // Deleting, restoring and deleting forever need a mailbox the caller may delete from.
        const targets = yield* lockAll(accountId, ids, flagOfAction[action] !== undefined || tagAction ? "read" : "delete")
        const result = { updated: 0, deleted: 0, trashed: 0, restored: 0, outcomes: [] as Array<MessageOutcome> }
        const flags = flagOfAction[action]
        if (flags !== undefined) {
          result.updated = yield* setFlags(accountId, plan, targets, flags)
        } else if (tagAction && tagId !== undefined) {
          if ((yield* ownTags(accountId, [tagId])) !== 1) return yield* Effect.fail(notOwned([tagId], "tagId"))
          const changed = yield* (action === "add_tag"
            ? sql`
                INSERT INTO message_tags (message_id, account_id, tag_id)
                SELECT id, ${accountId}, ${tagId} FROM messages WHERE id IN ${sql.in(ids)}
                ON CONFLICT DO NOTHING RETURNING message_id`
            : sql`
                DELETE FROM message_tags WHERE account_id = ${accountId} AND tag_id = ${tagId} AND message_id IN ${sql.in(ids)}
                RETURNING message_id`).pipe(Effect.flatMap(changedRows))
          result.updated = changed.length
        } else if (action === "restore") {
          result.restored = yield* restoreTargets(targets)
          result.outcomes = ids.map((id) => ({ id, outcome: "restored", trashPurgeAt: null }))
        } else {
          const done = yield* deleteTargets(accountId, plan, targets, action === "delete_forever")
          result.deleted = done.deleted
          result.trashed = done.trashed
          result.outcomes = ids.map((id) => done.outcomes.get(id)!)
        }
        yield* publishChanged(accountId, targets.map((t) => t.id))
        return result satisfies BulkMessageResult
      })).pipe(Effect.catchTag("SqlError", Effect.die))
    })

    const emptyTrash = Effect.fn("MessageActions.emptyTrash")(function*(accountId: number, aliasId: number | undefined) {
      if (aliasId !== undefined) {
        const role = yield* access.role(accountId, aliasId)
        if (Option.isNone(role) || !roleAllows(role.value, "delete")) return yield* Effect.fail(new AliasNotFound({ aliasId }))
      }
      const inAlias = aliasId === undefined ? sql`true` : sql`m.alias_id = ${aliasId}`
      return yield* sql.withTransaction(Effect.gen(function*() {
        yield* lockAccount(accountId)
        const deletable = yield* access.mailboxes(accountId, "delete", "m")
        const victims = yield* sql`
          SELECT m.id, m.alias_id, m.size_bytes FROM messages m
          WHERE ${deletable} AND m.trashed_at IS NOT NULL AND ${inAlias}
          ORDER BY m.trashed_at, m.id LIMIT 1000
          FOR UPDATE OF m SKIP LOCKED`.pipe(Effect.flatMap(victimRows))
        // Mail in the trash is not in any unread count.
        yield* destroyMessages(stores, victims.map((v) => ({ ...v, unread: false })))
        yield* publishChanged(accountId, victims.map((v) => v.id))
        const [left] = yield* sql`
          SELECT count(*)::int AS n FROM messages m WHERE ${deletable} AND m.trashed_at IS NOT NULL AND ${inAlias}`
          .pipe(Effect.flatMap(countRows))
        return { deleted: victims.length, remaining: left!.n } satisfies EmptyTrashResult
      })).pipe(Effect.orDie)
    })

    const preferences = SqlSchema.findAll({
      Request: Schema.Struct({ accountId: Schema.Int, sender: Schema.String }),
      Result: Schema.Struct({ always_load: Schema.Boolean }),
      execute: ({ accountId, sender }) =>
        sql`
        SELECT always_load FROM remote_image_preferences WHERE account_id = ${accountId} AND sender = ${sender}`
    })
    const preferenceOf = (accountId: number, sender: string) =>
      preferences({ accountId, sender }).pipe(Effect.map((rows) => rows[0]?.always_load ?? false))

    /**
     * Both renderings were made by the pipeline, in its threads: nothing is sanitized here but
     * the small HTML of a row processed before the rendering with remote images was stored
     * (migration 0018); a larger one is served with its images blocked.
     */
    const html = Effect.fn("MessageActions.html")(function*(accountId: number, id: number, remote: boolean) {
      const reachable = yield* access.mailboxes(accountId, "read")
      const [row] = yield* sql`
        SELECT html_sanitized, html_sanitized_remote, remote_image_count, sender_address, envelope_from,
               CASE WHEN html_sanitized_remote IS NULL AND remote_image_count > 0
                         AND octet_length(html_original) <= ${RequestTimeHtmlMaxChars}
                    THEN html_original END AS html_original
        FROM messages
        WHERE id = ${id} AND ${reachable}`.pipe(Effect.flatMap(htmlRows), Effect.orDie)
      if (row === undefined || row.html_sanitized === null) return yield* Effect.fail(notFound(id))
      const allow = remote || (yield* preferenceOf(accountId, senderAddressOf(row).toLowerCase()).pipe(Effect.orDie))
      if (!allow) return { html: row.html_sanitized, remoteImagesAllowed: false }
      // Without remote images, loading them changes nothing in the rendering.
      if (row.remote_image_count === 0) return { html: row.html_sanitized, remoteImagesAllowed: true }
      if (row.html_sanitized_remote !== null) return { html: row.html_sanitized_remote, remoteImagesAllowed: true }
      const small = row.html_original === null ? undefined : smallCheckedHtml(row.html_original)
      return small === undefined
        ? { html: row.html_sanitized, remoteImagesAllowed: false }
        : { html: sanitizeEmailHtml(small, { allowRemoteImages: true }).html, remoteImagesAllowed: true }
    })

    const setRemoteImagePreference = Effect.fn("MessageActions.setRemoteImagePreference")(function*(accountId: number, id: number, alwaysLoad: boolean) {
      const reachable = yield* access.mailboxes(accountId, "read")
      const [row] = yield* sql`
        SELECT sender_address, envelope_from FROM messages WHERE id = ${id} AND ${reachable}`.pipe(
        Effect.flatMap(senderRows),
        Effect.orDie
      )
      if (row === undefined) return yield* Effect.fail(notFound(id))
      const sender = senderAddressOf(row).toLowerCase()
      const at = yield* now
      yield* sql`
        INSERT INTO remote_image_preferences (account_id, sender, always_load, updated_at)
        VALUES (${accountId}, ${sender}, ${alwaysLoad}, ${at})
        ON CONFLICT (account_id, sender) DO UPDATE SET always_load = excluded.always_load, updated_at = excluded.updated_at`.pipe(Effect.orDie)
      return { sender, alwaysLoad } satisfies RemoteImagePreference
    })

    const readAttachment = (accountId: number, messageId: number, attachmentId: number) =>
      access.mailboxes(accountId, "read", "m").pipe(
        Effect.flatMap((reachable) => blobs.attachment(messageId, attachmentId, reachable)),
        Effect.map(Option.map((row): AttachmentBody => ({
          filename: row.filename,
          mimeType: row.mime_type,
          dangerous: row.dangerous,
          previewable: row.previewable,
          content: row.content
        })))
      )
    const attachment = Effect.fn("MessageActions.attachment")(function*(accountId: number, messageId: number, attachmentId: number, confirmed: boolean) {
      const found = yield* readAttachment(accountId, messageId, attachmentId)
      if (Option.isNone(found)) return yield* Effect.fail(new AttachmentNotFound({ messageId, attachmentId }))
      if (found.value.dangerous && !confirmed) return yield* Effect.fail(new DangerousAttachmentUnconfirmed({ attachmentId }))
      return found.value
    })
    const attachmentPreview = Effect.fn("MessageActions.attachmentPreview")(function*(accountId: number, messageId: number, attachmentId: number) {
      const found = yield* readAttachment(accountId, messageId, attachmentId)
      // Dangerous or unsupported types have no preview (spec 7, 404).
      if (Option.isNone(found) || found.value.dangerous || !found.value.previewable) {
        return yield* Effect.fail(new AttachmentPreviewUnavailable({ attachmentId }))
      }
      return found.value
    })

    return MessageActions.of({ updateState, bulk, remove, restore, emptyTrash, html, setRemoteImagePreference, attachment, attachmentPreview })
  }))

  /** With its own BlobStore, SearchIndex, MailboxAccess and Entitlements (each built once however many services ask for it). */
  static readonly layer = MessageActions.layerNoDeps.pipe(Layer.provide([BlobStore.layer, SearchIndex.layer, MailboxAccess.layer, Entitlements.layer]))
}
