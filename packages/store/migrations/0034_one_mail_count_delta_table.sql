-- One delta table for the mail counters (issue 36 clean-up). The rules step's unread corrections
-- (alias_unread_deltas, 0027) and every insert's counts (mail_count_deltas, 0029) were two append
-- tables read and folded apart, each fold locking the aliases rows and deleting what it added.
-- Now `mail_count_deltas` holds both: an `unread` delta column (what a row adds to its alias's
-- unread_count), filled by the insert trigger with the messages added outside the trash (each
-- arrives unread, as before), and by the rules step with its correction (-n unread), whose other
-- columns are neutral (0, and no last_received_at). store/src/messages/MailCounts.ts stays the one
-- reader and the one fold. A correction row carries its alias's owner as account_id, so the fold
-- takes it with the owner's rows (and drops it with an account that is gone, as the alias is).

ALTER TABLE mail_count_deltas ADD COLUMN unread integer;
-- The rows already here counted unread what they added outside the trash (the fold added in_mailbox).
UPDATE mail_count_deltas SET unread = in_mailbox;
ALTER TABLE mail_count_deltas ALTER COLUMN unread SET NOT NULL, ALTER COLUMN last_received_at DROP NOT NULL;

-- The corrections not folded yet, moved as they are (one row each). The rows of an alias that is
-- gone are left behind, as 0027's fold dropped them.
INSERT INTO mail_count_deltas (account_id, alias_id, in_mailbox, trashed, bytes, last_received_at, unread)
SELECT al.account_id, x.alias_id, 0, 0, 0, NULL, x.delta
FROM alias_unread_deltas x JOIN aliases al ON al.id = x.alias_id;
DROP TABLE alias_unread_deltas;

-- 0029's insert trigger, with the unread column.
CREATE OR REPLACE FUNCTION mail_count_deltas_messages_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO mailbox_counts (account_id)
  SELECT DISTINCT i.account_id FROM inserted i WHERE NOT EXISTS (SELECT 1 FROM mailbox_counts c WHERE c.account_id = i.account_id)
  ORDER BY 1 ON CONFLICT DO NOTHING;
  INSERT INTO alias_counts (alias_id)
  SELECT DISTINCT i.alias_id FROM inserted i WHERE NOT EXISTS (SELECT 1 FROM alias_counts c WHERE c.alias_id = i.alias_id)
  ORDER BY 1 ON CONFLICT DO NOTHING;
  INSERT INTO mail_count_deltas (account_id, alias_id, in_mailbox, trashed, bytes, last_received_at, unread)
  SELECT account_id, alias_id, count(*) FILTER (WHERE trashed_at IS NULL), count(*) FILTER (WHERE trashed_at IS NOT NULL),
         sum(size_bytes), max(received_at), count(*) FILTER (WHERE trashed_at IS NULL)
  FROM inserted GROUP BY account_id, alias_id;
  -- The accounts' snapshots (GET /me, /storage) are read again after this commits (0011), as
  -- when the accounts row was updated here.
  PERFORM burnbox_notify_accounts((SELECT string_agg(DISTINCT account_id::text, ',') FROM inserted));
  RETURN NULL;
END $$;
