-- Per-account counts of the three mailbox views GET /messages answers `total` for without
-- counting rows (issue 5): the mailbox (not trashed, not archived), the archive and the trash.
-- `total` is exact (spec 2.12), and count(*) over a 200,000-message mailbox took ~70 ms; these
-- counts are kept by triggers in the same transaction as every change, so no code path (ingest,
-- trash, restore, archive, destroy, eviction, retention purge, cascades from aliases and
-- accounts) can forget them.
--
-- Reader state belongs to the reader: `archived` counts the OWNER's archive marks only (a guest
-- of a shared mailbox keeps their own, which these counts do not describe).
CREATE TABLE mailbox_counts (
  account_id integer PRIMARY KEY REFERENCES accounts ON DELETE CASCADE,
  -- messages not in the trash
  in_mailbox integer NOT NULL DEFAULT 0,
  -- of those, archived by the owner
  archived integer NOT NULL DEFAULT 0,
  -- messages in the trash
  trashed integer NOT NULL DEFAULT 0
);

-- The one place the counts change, after the row exists (a message insert creates it).
-- Callers touching several accounts go through them in account order, so two such
-- transactions never wait on each other's counts in a cycle.
CREATE FUNCTION mailbox_counts_add(p_account integer, p_in_mailbox integer, p_archived integer, p_trashed integer)
RETURNS void LANGUAGE sql AS $$
  UPDATE mailbox_counts
  SET in_mailbox = in_mailbox + p_in_mailbox, archived = archived + p_archived, trashed = trashed + p_trashed
  WHERE account_id = p_account
$$;

-- Messages arrive (ingest, test mail, bulk loads): one row per account and statement.
CREATE FUNCTION mailbox_counts_messages_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO mailbox_counts AS c (account_id, in_mailbox, trashed)
  SELECT account_id, count(*) FILTER (WHERE trashed_at IS NULL), count(*) FILTER (WHERE trashed_at IS NOT NULL)
  FROM inserted GROUP BY account_id ORDER BY account_id
  ON CONFLICT (account_id) DO UPDATE
  SET in_mailbox = c.in_mailbox + excluded.in_mailbox, trashed = c.trashed + excluded.trashed;
  RETURN NULL;
END $$;
CREATE TRIGGER mailbox_counts_messages_inserted AFTER INSERT ON messages
  REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION mailbox_counts_messages_inserted();

-- Messages destroyed (delete, empty trash, eviction, retention purge, cascades).
CREATE FUNCTION mailbox_counts_messages_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  FOR r IN
    SELECT account_id, count(*) FILTER (WHERE trashed_at IS NULL)::int AS in_mailbox,
           count(*) FILTER (WHERE trashed_at IS NOT NULL)::int AS trashed
    FROM deleted GROUP BY account_id ORDER BY account_id
  LOOP
    PERFORM mailbox_counts_add(r.account_id, -r.in_mailbox, 0, -r.trashed);
  END LOOP;
  RETURN NULL;
END $$;
CREATE TRIGGER mailbox_counts_messages_deleted AFTER DELETE ON messages
  REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION mailbox_counts_messages_deleted();

-- The owner's archive mark of a destroyed message: read before the delete cascades to
-- message_states (afterwards neither the mark nor the message is left to look at). Only for
-- messages outside the trash, and only archived ones update the counts.
CREATE FUNCTION mailbox_counts_archived_message_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM message_states s WHERE s.message_id = OLD.id AND s.account_id = OLD.account_id AND s.archived) THEN
    PERFORM mailbox_counts_add(OLD.account_id, 0, -1, 0);
  END IF;
  RETURN OLD;
END $$;
CREATE TRIGGER mailbox_counts_archived_message_deleted BEFORE DELETE ON messages
  FOR EACH ROW WHEN (OLD.trashed_at IS NULL) EXECUTE FUNCTION mailbox_counts_archived_message_deleted();

-- Trash and restore (one row at a time, at most 100 per request).
CREATE FUNCTION mailbox_counts_message_trash_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  back integer := CASE WHEN NEW.trashed_at IS NULL THEN 1 ELSE -1 END;
  archived integer := 0;
BEGIN
  IF EXISTS (SELECT 1 FROM message_states s WHERE s.message_id = NEW.id AND s.account_id = NEW.account_id AND s.archived) THEN
    archived := back;
  END IF;
  PERFORM mailbox_counts_add(NEW.account_id, back, archived, -back);
  RETURN NULL;
END $$;
CREATE TRIGGER mailbox_counts_message_trash_changed AFTER UPDATE OF trashed_at ON messages
  FOR EACH ROW WHEN ((OLD.trashed_at IS NULL) <> (NEW.trashed_at IS NULL)) EXECUTE FUNCTION mailbox_counts_message_trash_changed();

-- The owner's archive marks on messages outside the trash: set, cleared, or removed while the
-- message stays (a mark removed with its message was counted by the trigger above, and the
-- message is gone when this runs, so the join below skips it).
CREATE FUNCTION mailbox_counts_archive_marks_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  message_ids integer[];
  readers integer[];
  deltas integer[];
  r record;
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(message_id), array_agg(account_id), array_agg(1) INTO message_ids, readers, deltas
    FROM new_marks WHERE archived;
  ELSIF TG_OP = 'UPDATE' THEN
    SELECT array_agg(n.message_id), array_agg(n.account_id), array_agg(CASE WHEN n.archived THEN 1 ELSE -1 END)
    INTO message_ids, readers, deltas
    FROM old_marks o JOIN new_marks n ON n.message_id = o.message_id AND n.account_id = o.account_id
    WHERE o.archived <> n.archived;
  ELSE
    SELECT array_agg(message_id), array_agg(account_id), array_agg(-1) INTO message_ids, readers, deltas
    FROM old_marks WHERE archived;
  END IF;
  IF message_ids IS NULL THEN
    RETURN NULL;
  END IF;
  FOR r IN
    SELECT m.account_id, sum(c.delta)::int AS archived
    FROM unnest(message_ids, readers, deltas) AS c(message_id, account_id, delta)
    JOIN messages m ON m.id = c.message_id AND m.account_id = c.account_id AND m.trashed_at IS NULL
    GROUP BY m.account_id HAVING sum(c.delta) <> 0 ORDER BY m.account_id
  LOOP
    PERFORM mailbox_counts_add(r.account_id, 0, r.archived, 0);
  END LOOP;
  RETURN NULL;
END $$;
CREATE TRIGGER mailbox_counts_archive_marks_inserted AFTER INSERT ON message_states
  REFERENCING NEW TABLE AS new_marks FOR EACH STATEMENT EXECUTE FUNCTION mailbox_counts_archive_marks_changed();
CREATE TRIGGER mailbox_counts_archive_marks_updated AFTER UPDATE ON message_states
  REFERENCING OLD TABLE AS old_marks NEW TABLE AS new_marks FOR EACH STATEMENT EXECUTE FUNCTION mailbox_counts_archive_marks_changed();
CREATE TRIGGER mailbox_counts_archive_marks_deleted AFTER DELETE ON message_states
  REFERENCING OLD TABLE AS old_marks FOR EACH STATEMENT EXECUTE FUNCTION mailbox_counts_archive_marks_changed();

-- The counts of the mail already stored. Writers wait for the few moments this takes, so no
-- change slips between the count and the triggers.
LOCK TABLE messages, message_states IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO mailbox_counts (account_id, in_mailbox, archived, trashed)
SELECT m.account_id,
       count(*) FILTER (WHERE m.trashed_at IS NULL),
       count(*) FILTER (WHERE m.trashed_at IS NULL AND s.archived),
       count(*) FILTER (WHERE m.trashed_at IS NOT NULL)
FROM messages m LEFT JOIN message_states s ON s.message_id = m.id AND s.account_id = m.account_id
GROUP BY m.account_id;
