/**
 * The pipeline's rules step as fragments of its store statement (MailQueue.store): each new
 * message walks its owner's running rules (enabled, within the plan's mailRuleCount) in position
 * order, and the marks, tags and trash of the rules that match are written by the same statement
 * that stores the message, before its search row is written and before its events are read for
 * webhooks (decisions.md "Mail rules"). In the statement, so a message is never seen processed
 * without its rules' marks, and a retried job repeats nothing: the statement stores only a
 * message still in `processing`, once.
 *
 * Measured against doing it in the mail thread's work (bench:pipeline --rules): here an account
 * without rules costs one index probe of `mail_rules_running` per message.
 */
import type { SqlClient, Statement } from "effect/sql"
import { unreadCorrections } from "../messages/MailCounts.ts"

/**
 * The recordset columns the walk reads of each message `u` (besides the message's own columns,
 * which the pipeline's recordset has): its owner, alias and address.
 */
export const walkedColumns = "account_id int, alias_id int, alias_address text"

/**
 * `LEFT JOIN LATERAL (...) AS rl ON true` after the recordset `u`: per message, the marks its
 * matching rules set (`rule_read`, `rule_starred`, `rule_pinned`, `rule_archived`, `rule_trash`,
 * null when no rule matched), the tags they name (`rule_tag_ids`), when one trashes it the
 * owner's trash window in days (`rule_trash_days`; a plan without a trash keeps the message), and
 * when one pins it how many pins the owner has to spare (`rule_pin_room`: maxPinned less the
 * owner's pins before the batch; `ruleMarks` hands them to the batch's pins in message order). A
 * rule matches when all its conditions hold (case-insensitive substrings); a matching rule with
 * `stop` ends the walk after its own actions.
 */
export const ruleWalk = (sql: SqlClient.SqlClient, plan: (account: string) => Statement.Fragment) => {
  /** An integer entitlement of the message's owner: its override when it has one, else its plan's. */
  const entitlement = (key: "trashRetentionDays" | "maxPinned") =>
    sql`(SELECT CASE WHEN json_typeof(p.plan -> 'overrides' -> ${key}::text) = 'number'
                     THEN (p.plan -> 'overrides' ->> ${key}::text)::int
                     ELSE (p.plan -> 'entitlements' ->> ${key}::text)::int END
         FROM (SELECT ${plan("a")} AS plan FROM accounts a WHERE a.id = u.account_id) p)`
  return sql`
    LEFT JOIN LATERAL (
      SELECT bool_or(r.sets_read) AS rule_read, bool_or(r.sets_starred) AS rule_starred,
             bool_or(r.sets_pinned) AS rule_pinned, bool_or(r.sets_archived) AS rule_archived,
             bool_or(r.sets_trash) AS rule_trash,
             array_agg(DISTINCT t.tag_id) FILTER (WHERE t.tag_id IS NOT NULL) AS rule_tag_ids,
             CASE WHEN bool_or(r.sets_trash) THEN ${entitlement("trashRetentionDays")} END AS rule_trash_days,
             -- A pin needs room under maxPinned (the owner's pins outside the trash, as the
             -- statement's snapshot sees them): without it the pin is skipped, not failed.
             CASE WHEN bool_or(r.sets_pinned) THEN ${entitlement("maxPinned")} - (
               SELECT count(*)::int FROM message_states ps JOIN messages pm ON pm.id = ps.message_id
               WHERE ps.account_id = u.account_id AND ps.pinned AND pm.trashed_at IS NULL)
             END AS rule_pin_room
      FROM (
        SELECT r.sets_read, r.sets_starred, r.sets_pinned, r.sets_archived, r.sets_trash, r.tag_ids,
               coalesce(bool_or(r.stop) OVER (ORDER BY r.position, r.id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), false) AS stopped
        FROM (
          -- The message's texts lowered once, only for an account with rules to run: the rules
          -- are a LATERAL of these texts (kept a subquery by OFFSET 0, as the texts are), so the
          -- texts are the outer side of the join and are not lowered again for each rule (as a
          -- plain join, the planner put them inside the loop over the rules: 50 lowerings each).
          SELECT lower(coalesce(u.sender_text, '')) AS sender,
                 lower(u.alias_address || ' ' || coalesce(u.headers ->> 'to', '')) AS recipients,
                 lower(coalesce(u.subject, '')) AS subject,
                 lower(coalesce(u.text_body, u.search_text, '')) AS body
          WHERE EXISTS (SELECT 1 FROM mail_rules x WHERE x.account_id = u.account_id AND x.enabled AND NOT x.beyond_cap)
          OFFSET 0) msg
        CROSS JOIN LATERAL (
          SELECT r.* FROM mail_rules r
          WHERE r.account_id = u.account_id AND r.enabled AND NOT r.beyond_cap
            AND (r.alias_id IS NULL OR r.alias_id = u.alias_id)
            AND (r.match_from IS NULL OR strpos(msg.sender, r.match_from) > 0)
            AND (r.match_to IS NULL OR strpos(msg.recipients, r.match_to) > 0)
            AND (r.match_subject IS NULL OR strpos(msg.subject, r.match_subject) > 0)
            AND (r.match_body IS NULL OR strpos(msg.body, r.match_body) > 0)
            AND (r.match_has_attachment IS NULL OR r.match_has_attachment = coalesce(u.has_attachments, false))
            AND (r.match_has_otp IS NULL OR r.match_has_otp = (jsonb_array_length(coalesce(u.otp_codes, '[]'::jsonb)) > 0))
          OFFSET 0) r
      ) r
      LEFT JOIN LATERAL unnest(r.tag_ids) AS t(tag_id) ON true
      WHERE NOT r.stopped
    ) rl ON true`
}

/**
 * The SET items of the messages UPDATE for the walk's trash: to the trash (and its purge deadline
 * fixed, as a DELETE would: the earlier of the message's retention and the owner's trash window)
 * when a rule trashes it and the owner's plan has a trash.
 */
export const ruleTrashSet = (sql: SqlClient.SqlClient, at: Date) =>
  sql`
    trashed_at = CASE WHEN rl.rule_trash AND rl.rule_trash_days > 0 AND m.trashed_at IS NULL THEN ${at} ELSE m.trashed_at END,
    trash_purge_at = CASE WHEN rl.rule_trash AND rl.rule_trash_days > 0 AND m.trashed_at IS NULL
                          THEN least(m.expires_at, ${at}::timestamptz + rl.rule_trash_days * interval '1 day') ELSE m.trash_purge_at END`

/** The RETURNING items the marks' steps read of the stored rows `s`. */
export const ruleReturning = (sql: SqlClient.SqlClient, at: Date) =>
  sql`rl.rule_read, rl.rule_starred, rl.rule_pinned, rl.rule_pin_room, rl.rule_archived, rl.rule_tag_ids,
      (rl.rule_trash AND m.trashed_at = ${at}) AS rule_trashed`

/**
 * The data-modifying steps that write the walk's marks on the stored rows `stored` (a CTE with
 * id, account_id, alias_id, trashed_at and `ruleReturning`): the owner's marks (never a guest's:
 * `account_id` is the mailbox's owner), the owner's tags that still exist (a deleted tag is
 * skipped), and the unread count of the alias for mail a rule read or trashed that the owner had
 * not read.
 *
 * Pins: the owner's spare pins go to the batch's pinned messages outside the trash in id order,
 * so a batch never passes maxPinned by its own pins; the rest are left unpinned (a pin in the
 * trash does not count, as for a reader's pin). The unread count is appended as a correction to
 * the mail counters' deltas (messages/MailCounts.ts), not written on the aliases row.
 */
export const ruleMarks = (sql: SqlClient.SqlClient, stored: string) =>
  sql`
    rule_pins AS (
      SELECT s.id, s.trashed_at IS NOT NULL
                   OR row_number() OVER (PARTITION BY s.account_id, s.trashed_at IS NULL ORDER BY s.id) <= s.rule_pin_room AS pinned
      FROM ${sql(stored)} s WHERE s.rule_pinned),
    rule_marked AS (
      INSERT INTO message_states (message_id, account_id, is_read, starred, pinned, archived)
      SELECT s.id, s.account_id, coalesce(s.rule_read, false), coalesce(s.rule_starred, false), coalesce(p.pinned, false),
             coalesce(s.rule_archived, false) AND s.trashed_at IS NULL
      FROM ${sql(stored)} s LEFT JOIN rule_pins p ON p.id = s.id
      WHERE s.rule_read OR s.rule_starred OR p.pinned OR (s.rule_archived AND s.trashed_at IS NULL)
      ON CONFLICT (message_id, account_id) DO UPDATE SET
        is_read = message_states.is_read OR excluded.is_read, starred = message_states.starred OR excluded.starred,
        pinned = message_states.pinned OR excluded.pinned, archived = message_states.archived OR excluded.archived),
    rule_tagged AS (
      INSERT INTO message_tags (message_id, account_id, tag_id)
      SELECT s.id, s.account_id, t.id FROM ${sql(stored)} s JOIN tags t ON t.account_id = s.account_id AND t.id = ANY(s.rule_tag_ids)
      WHERE s.rule_tag_ids IS NOT NULL
      ON CONFLICT DO NOTHING),
    rule_read_counts AS (
      SELECT s.account_id, s.alias_id, count(*)::int AS n FROM ${sql(stored)} s
      WHERE (s.rule_read OR s.rule_trashed)
        AND NOT EXISTS (SELECT 1 FROM message_states o WHERE o.message_id = s.id AND o.account_id = s.account_id AND o.is_read)
      GROUP BY s.account_id, s.alias_id),
    rule_unread AS (${unreadCorrections(sql, "rule_read_counts")})`
