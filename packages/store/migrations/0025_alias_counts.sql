-- Per-mailbox (alias) counts of its messages outside the trash and in it (issue 31): a guest's
-- GET /messages `total` over the mailboxes shared with it, read without counting their rows.
-- Exactly as mailbox_counts (0007) does per account, these are kept by triggers in the same
-- transaction as every change to `messages` (ingest, trash, restore, destroy, eviction, purge,
-- cascades). Reader marks are not here: a guest's archive marks are its own, and its list
-- subtracts them (a count over its marks, MessageList.ts).
--
-- Lock order: triggers of one event fire in name order, and these are named after
-- mailbox_counts' (messages_alias_counts_* > mailbox_counts_*), so a statement takes its
-- alias's row here only while it holds its account's row in mailbox_counts: two writers of one
-- alias meet on the account's row first, and these rows add no new wait cycle.
CREATE TABLE alias_counts (
  alias_id integer PRIMARY KEY REFERENCES aliases ON DELETE CASCADE,
  -- messages not in the trash
  in_mailbox integer NOT NULL DEFAULT 0,
  -- messages in the trash
  trashed integer NOT NULL DEFAULT 0
);

-- Messages arrive: one row per alias and statement, in alias order (two such statements never
-- wait on each other's counts in a cycle).
CREATE FUNCTION alias_counts_messages_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO alias_counts AS c (alias_id, in_mailbox, trashed)
  SELECT alias_id, count(*) FILTER (WHERE trashed_at IS NULL), count(*) FILTER (WHERE trashed_at IS NOT NULL)
  FROM inserted GROUP BY alias_id ORDER BY alias_id
  ON CONFLICT (alias_id) DO UPDATE
  SET in_mailbox = c.in_mailbox + excluded.in_mailbox, trashed = c.trashed + excluded.trashed;
  RETURN NULL;
END $$;
CREATE TRIGGER messages_alias_counts_inserted AFTER INSERT ON messages
  REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION alias_counts_messages_inserted();

-- Messages destroyed (delete, empty trash, eviction, retention purge, cascades; an alias's own
-- row may be gone already with its alias, and then there is nothing to update).
CREATE FUNCTION alias_counts_messages_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  FOR r IN
    SELECT alias_id, count(*) FILTER (WHERE trashed_at IS NULL)::int AS in_mailbox,
           count(*) FILTER (WHERE trashed_at IS NOT NULL)::int AS trashed
    FROM deleted GROUP BY alias_id ORDER BY alias_id
  LOOP
    UPDATE alias_counts SET in_mailbox = in_mailbox - r.in_mailbox, trashed = trashed - r.trashed WHERE alias_id = r.alias_id;
  END LOOP;
  RETURN NULL;
END $$;
CREATE TRIGGER messages_alias_counts_deleted AFTER DELETE ON messages
  REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT EXECUTE FUNCTION alias_counts_messages_deleted();

-- Trash and restore (one row at a time, at most 100 per request).
CREATE FUNCTION alias_counts_message_trash_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE back integer := CASE WHEN NEW.trashed_at IS NULL THEN 1 ELSE -1 END;
BEGIN
  UPDATE alias_counts SET in_mailbox = in_mailbox + back, trashed = trashed - back WHERE alias_id = NEW.alias_id;
  RETURN NULL;
END $$;
CREATE TRIGGER messages_alias_counts_trash_changed AFTER UPDATE OF trashed_at ON messages
  FOR EACH ROW WHEN ((OLD.trashed_at IS NULL) <> (NEW.trashed_at IS NULL)) EXECUTE FUNCTION alias_counts_message_trash_changed();

-- The guest's archive marks on its shared mailboxes' mail outside the trash, which its `total`
-- subtracts, are counted on this index and message_states_archived alone (index-only, a hash join
-- of ids), not on the mail's rows: a mailbox's messages lie one or two to a heap page, so reading
-- them for alias_id and trashed_at cost a page each (~40 ms for 6,000 in bench:sharing).
CREATE INDEX messages_alias_mailbox ON messages (alias_id, id) WHERE trashed_at IS NULL;

-- The counts of the mail already stored. Writers wait for the few moments this takes, so no
-- change slips between the count and the triggers.
LOCK TABLE messages IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO alias_counts (alias_id, in_mailbox, trashed)
SELECT alias_id, count(*) FILTER (WHERE trashed_at IS NULL), count(*) FILTER (WHERE trashed_at IS NOT NULL)
FROM messages GROUP BY alias_id;
