/**
 * Protected operator desks (spec 4.6, 2.22; decisions.md "Protected operator desks"): which aliases
 * are desks (`desks`), and what their owners send from them (`desk_sent_mail`), through the relay of
 * `OutboundMail`. A send writes its Sent record `pending` and commits it before the relay is asked,
 * then marks it `sent` or `failed`: a crash in between leaves a `pending` record, never a send
 * without one.
 */
import {
  DeskLimits,
  DeskNotFound,
  type DeskReply,
  type DeskSentMail,
  DeskSentStatus,
  deskSendRefusal,
  DeskSendLimitReached,
  DeskSendingUnavailable,
  replyPrefill,
  replyReferences,
  ReplyTargetUnavailable,
  type SendDeskMail
} from "@burnbox/domain"
import { Context, Effect, Layer, Schema } from "effect"
import { SqlClient, SqlSchema } from "effect/sql"
import { OutboundMail } from "../platform/OutboundMail.ts"
import { IsoFromDate } from "../platform/Rows.ts"
import { now } from "../platform/Time.ts"

/**
 * The condition that the account row `account` owns an active desk (an alias's `canSend`, spec 2.7):
 * a desk whose alias is not burned.
 */
export const ownsActiveDesk = (account: string) =>
  `EXISTS (SELECT 1 FROM desks dk JOIN aliases da ON da.id = dk.alias_id WHERE dk.account_id = ${account}.id AND da.status <> 'burned')`

const hourMs = 3_600_000
const dayMs = 86_400_000

const DeskRow = Schema.Struct({ local_part: Schema.String, domain_name: Schema.String })
const AliasRef = Schema.Struct({ id: Schema.Int, account_id: Schema.Int, status: Schema.String })

/** A header as the pipeline keeps it (`messages.headers`): one value, or each of a repeated header. */
const HeaderValue = Schema.NullOr(Schema.Union([Schema.String, Schema.Array(Schema.String)]))
const firstValue = (value: typeof HeaderValue.Type): string | undefined =>
  value === null ? undefined : typeof value === "string" ? value : value[0]

const ReplyTargetRow = Schema.Struct({
  sender_address: Schema.String,
  subject: Schema.String,
  reply_to: HeaderValue,
  message_id_header: HeaderValue,
  references_header: HeaderValue
})

const SentRow = Schema.Struct({
  id: Schema.Int,
  recipient: Schema.String,
  subject: Schema.String,
  body: Schema.String,
  status: DeskSentStatus,
  sent_at: IsoFromDate
})

const RecentRow = Schema.Struct({ account_id: Schema.Int, created_at: Schema.Date })

/** An alias as the operator names it: `local@domain`, case-insensitively. */
const splitAddress = (address: string) => {
  const at = address.trim().lastIndexOf("@")
  return at <= 0 ? undefined : { local: address.trim().slice(0, at).toLowerCase(), domain: address.trim().slice(at + 1).toLowerCase() }
}

export class Desks extends Context.Service<Desks, {
  /** Makes the active alias at `address` a desk (idempotent); undefined when no claimed, active alias has it. */
  readonly grant: (address: string) => Effect.Effect<{ readonly accountId: number; readonly aliasId: number } | undefined>
  /** Ends the desk of the alias at `address`, if any (idempotent); undefined when no claimed alias has it. */
  readonly revoke: (address: string) => Effect.Effect<{ readonly accountId: number; readonly aliasId: number } | undefined>
  /** GET /desk-mail/{aliasId}: one page of 50 Sent records of the last 90 days, newest first. */
  readonly sent: (accountId: number, aliasId: number, page: number) => Effect.Effect<ReadonlyArray<DeskSentMail>, DeskNotFound>
  /** GET /desk-mail/{aliasId}/reply/{messageId}: the reply form prefilled from a message of the desk's mailbox. */
  readonly reply: (accountId: number, aliasId: number, messageId: number) => Effect.Effect<DeskReply, DeskNotFound | ReplyTargetUnavailable>
  /** POST /desk-mail/{aliasId}: records the send, hands it to the relay, answers the Sent record's id. */
  readonly send: (accountId: number, aliasId: number, input: SendDeskMail) => Effect.Effect<
    { readonly id: number },
    DeskNotFound | ReplyTargetUnavailable | DeskSendLimitReached | DeskSendingUnavailable
  >
  /** Deletes Sent records older than 90 days (the retention job). */
  readonly purgeSent: Effect.Effect<number>
}>()("burnbox/Desks") {
  static readonly layerNoDeps = Layer.effect(Desks, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const outbound = yield* OutboundMail

    const aliasAt = SqlSchema.findOneOption({
      Request: Schema.Struct({ local: Schema.String, domain: Schema.String }),
      Result: AliasRef,
      execute: ({ domain, local }) =>
        sql`
          SELECT al.id, al.account_id, al.status FROM aliases al JOIN domains d ON d.id = al.domain_id
          WHERE al.local_part = ${local} AND d.name = ${domain} AND al.status <> 'reserved'`
    })

    const grant = Effect.fn("Desks.grant")(function*(address: string) {
      const parts = splitAddress(address)
      if (parts === undefined) return undefined
      const alias = yield* aliasAt(parts).pipe(Effect.orDie)
      if (alias._tag === "None" || alias.value.status !== "active") return undefined
      const at = yield* now
      yield* sql`
        INSERT INTO desks (alias_id, account_id, granted_at) VALUES (${alias.value.id}, ${alias.value.account_id}, ${at})
        ON CONFLICT (alias_id) DO NOTHING`.pipe(Effect.orDie)
      return { accountId: alias.value.account_id, aliasId: alias.value.id }
    })

    const revoke = Effect.fn("Desks.revoke")(function*(address: string) {
      const parts = splitAddress(address)
      if (parts === undefined) return undefined
      const alias = yield* aliasAt(parts).pipe(Effect.orDie)
      if (alias._tag === "None") return undefined
      yield* sql`DELETE FROM desks WHERE alias_id = ${alias.value.id}`.pipe(Effect.orDie)
      return { accountId: alias.value.account_id, aliasId: alias.value.id }
    })

    const deskOf = SqlSchema.findOneOption({
      Request: Schema.Struct({ accountId: Schema.Int, aliasId: Schema.Int }),
      Result: DeskRow,
      execute: ({ accountId, aliasId }) =>
        sql`
          SELECT al.local_part, d.name AS domain_name
          FROM desks dk JOIN aliases al ON al.id = dk.alias_id JOIN domains d ON d.id = al.domain_id
          WHERE dk.alias_id = ${aliasId} AND dk.account_id = ${accountId} AND al.account_id = ${accountId} AND al.status <> 'burned'`
    })
    /** The desk's address, or DeskNotFound: anything but an active desk the account owns answers alike. */
    const activeDesk = (accountId: number, aliasId: number) =>
      deskOf({ accountId, aliasId }).pipe(
        Effect.orDie,
        Effect.flatMap((row) =>
          row._tag === "Some"
            ? Effect.succeed({ address: `${row.value.local_part}@${row.value.domain_name}` })
            : Effect.fail(new DeskNotFound({ aliasId }))
        )
      )

    const replyTargetOf = SqlSchema.findOneOption({
      Request: Schema.Struct({ accountId: Schema.Int, aliasId: Schema.Int, messageId: Schema.Int }),
      Result: ReplyTargetRow,
      execute: ({ accountId, aliasId, messageId }) =>
        sql`
          SELECT m.sender_address, m.subject, m.headers->'reply-to' AS reply_to,
                 m.headers->'message-id' AS message_id_header, m.headers->'references' AS references_header
          FROM messages m
          WHERE m.id = ${messageId} AND m.alias_id = ${aliasId} AND m.account_id = ${accountId}
            AND m.trashed_at IS NULL AND m.processing_status = 'processed'`
    })
    /** A message of the desk's mailbox that can be answered, with its prefilled reply; else ReplyTargetUnavailable. */
    const replyTarget = (accountId: number, aliasId: number, messageId: number, input: "message_id" | "messageId") =>
      Effect.gen(function*() {
        const unavailable = new ReplyTargetUnavailable({ messageId, input })
        const row = yield* replyTargetOf({ accountId, aliasId, messageId }).pipe(Effect.orDie)
        if (row._tag === "None") return yield* Effect.fail(unavailable)
        const target = row.value
        const prefill = replyPrefill({ senderAddress: target.sender_address, replyTo: firstValue(target.reply_to), subject: target.subject })
        if (prefill === undefined) return yield* Effect.fail(unavailable)
        const headerId = firstValue(target.message_id_header)?.trim()
        const originalId = headerId !== undefined && /^<[^<>\s]+>$/u.test(headerId) ? headerId : undefined
        return {
          prefill,
          inReplyTo: originalId,
          references: originalId === undefined ? undefined : replyReferences({ messageId: originalId, references: firstValue(target.references_header) })
        }
      })

    const page = SqlSchema.findAll({
      Request: Schema.Struct({ aliasId: Schema.Int, since: Schema.Date, offset: Schema.Int }),
      Result: SentRow,
      execute: ({ aliasId, offset, since }) =>
        sql`
          SELECT id, recipient, subject, body, status, coalesce(sent_at, created_at) AS sent_at
          FROM desk_sent_mail
          WHERE alias_id = ${aliasId} AND created_at > ${since}
          ORDER BY created_at DESC, id DESC
          LIMIT ${DeskLimits.sentPageSize} OFFSET ${offset}`
    })

    const sent = Effect.fn("Desks.sent")(function*(accountId: number, aliasId: number, pageNumber: number) {
      yield* activeDesk(accountId, aliasId)
      const at = yield* now
      return yield* page({
        aliasId,
        since: new Date(at.getTime() - DeskLimits.sentRetentionDays * dayMs),
        offset: (pageNumber - 1) * DeskLimits.sentPageSize
      }).pipe(Effect.orDie)
    })

    const reply = Effect.fn("Desks.reply")(function*(accountId: number, aliasId: number, messageId: number) {
      yield* activeDesk(accountId, aliasId)
      const target = yield* replyTarget(accountId, aliasId, messageId, "messageId")
      return { to: target.prefill.to, subject: target.prefill.subject, message_id: messageId }
    })

    /** The service's attempts of the last hour, newest first: as many as the limits need. */
    const recentAttempts = SqlSchema.findAll({
      Request: Schema.Date,
      Result: RecentRow,
      execute: (since) =>
        sql`
          SELECT account_id, created_at FROM desk_sent_mail WHERE created_at > ${since}
          ORDER BY created_at DESC, id DESC LIMIT ${DeskLimits.sendsPerHour}`
    })
    const insertPending = SqlSchema.findOne({
      Request: Schema.Struct({
        aliasId: Schema.Int,
        accountId: Schema.Int,
        recipient: Schema.String,
        subject: Schema.String,
        body: Schema.String,
        replyTo: Schema.NullOr(Schema.Int),
        at: Schema.Date
      }),
      Result: Schema.Struct({ id: Schema.Int }),
      execute: (r) =>
        sql`
          INSERT INTO desk_sent_mail (alias_id, account_id, recipient, subject, body, reply_to_message_id, status, created_at)
          VALUES (${r.aliasId}, ${r.accountId}, ${r.recipient}, ${r.subject}, ${r.body}, ${r.replyTo}, 'pending', ${r.at})
          RETURNING id`
    })

    /**
     * Checks the limits and writes the `pending` record in one transaction, under a lock every
     * send takes (the limits count across the service; sends are few, the lock is held briefly).
     */
    const recordPending = (accountId: number, aliasId: number, input: SendDeskMail) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`SELECT pg_advisory_xact_lock(hashtext('burnbox/desk-send'))`
        const at = yield* now
        const recent = yield* recentAttempts(new Date(at.getTime() - hourMs))
        const refusal = deskSendRefusal({ now: at, accountId, recent: recent.map((r) => ({ accountId: r.account_id, at: r.created_at })) })
        if (refusal !== undefined) return yield* Effect.fail(new DeskSendLimitReached(refusal))
        const { id } = yield* insertPending({
          aliasId,
          accountId,
          recipient: input.to,
          subject: input.subject,
          body: input.body,
          replyTo: input.message_id ?? null,
          at
        })
        return id
      })).pipe(Effect.catchTags({ SqlError: Effect.die, SchemaError: Effect.die, NoSuchElementError: Effect.die }))

    const send = Effect.fn("Desks.send")(function*(accountId: number, aliasId: number, input: SendDeskMail) {
      const desk = yield* activeDesk(accountId, aliasId)
      if (!outbound.configured) return yield* Effect.fail(new DeskSendingUnavailable({ reason: "not_configured", sentId: null }))
      const target = input.message_id === undefined || input.message_id === null
        ? undefined
        : yield* replyTarget(accountId, aliasId, input.message_id, "message_id")
      const id = yield* recordPending(accountId, aliasId, input)
      // Once the record exists, the relay's answer is always recorded, even if the caller goes away.
      return yield* Effect.uninterruptible(Effect.gen(function*() {
        const outcome = yield* Effect.result(outbound.send({
          from: desk.address,
          to: input.to,
          subject: input.subject,
          text: input.body,
          inReplyTo: target?.inReplyTo,
          references: target?.references
        }))
        const at = yield* now
        if (outcome._tag === "Success") {
          yield* sql`UPDATE desk_sent_mail SET status = 'sent', sent_at = ${at} WHERE id = ${id}`.pipe(Effect.orDie)
          return { id }
        }
        yield* sql`UPDATE desk_sent_mail SET status = 'failed', failure = ${outcome.failure.detail} WHERE id = ${id}`.pipe(Effect.orDie)
        yield* Effect.logWarning(`desk send ${id} failed at the relay: ${outcome.failure.detail}`)
        return yield* Effect.fail(new DeskSendingUnavailable({ reason: "relay_failed", sentId: id }))
      }))
    })

    const purgeSent = Effect.gen(function*() {
      const at = yield* now
      const rows = yield* sql`
        DELETE FROM desk_sent_mail WHERE created_at <= ${new Date(at.getTime() - DeskLimits.sentRetentionDays * dayMs)}
        RETURNING id`.pipe(Effect.orDie)
      return rows.length
    })

    return Desks.of({ grant, revoke, sent, reply, send, purgeSent })
  }))

  /** With its relay (BURNBOX_OUTBOUND_SMTP_URL), scoped to the layer that builds it. */
  static readonly layer = Desks.layerNoDeps.pipe(Layer.provide(OutboundMail.layer))
}
