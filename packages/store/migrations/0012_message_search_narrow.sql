-- The search index (0010) with narrow rows kept together by account, and the only copy of the
-- words (issue 5: `q` with one common word, 28,000 matches in a 200,000-message mailbox, p99
-- 100 ms against 50; issue 4: the pipeline built every message's words twice, and indexed them
-- twice).
--
-- `total` counts the matches, and a count visits the heap page of every match: a GIN index has
-- no index-only scans, and PostgreSQL 18 checks every tuple's visibility on its page. So the
-- pages a count visits are what it costs.
--
-- Narrow rows. With each row carrying its ~1 KB of words inline, 7 rows shared a page, so a
-- common word's matches sat on ~28,000 pages. The words now live out of line in the TOAST
-- relation (STORAGE EXTERNAL, toast_tuple_target 128) and ~70 rows share a page; only a
-- phrase's recheck and a list read from messages (below) read them. PostgreSQL hands a new row
-- to the toaster only when it is over ~2 KB (TOAST_TUPLE_THRESHOLD), whatever
-- toast_tuple_target says, so `toast_pad`, 2,048 spaces stored compressed (~35 bytes), makes
-- every new row that large; an update of a row whose words are out of line keeps them there.
--
-- The planner does not know that testing a row's words fetches them. It prices reading a whole
-- partition as cheap (~1 s for a word in most of a mailbox): searches are planned with
-- enable_seqscan off (Messages.ts onSearchIndex). And it chose to walk 0010's index on
-- received_at newest first, testing each row, even for a rare word (~45 ms): that index is gone,
-- and a search reads its matches once, from the GIN index, for both its total and its page.
--
-- Kept together by account. Narrow rows alone still spread a mailbox over every page of the
-- table (messages of all accounts arrive interleaved): 12,000 pages for that word. Hash
-- partitions by account put a mailbox on 1/16 of them at most (3,500 pages), and a search reads
-- one partition (account_id = ... prunes the others). A row is found by (id, account_id); the
-- foreign key's cascade, which knows only the id, probes the 16 primary keys.
--
-- The owner's archive mark, copied in. A search leaves the archive out, and testing each match
-- against the owner's archived ids (a hashed NOT IN) took a third of a count's time; a column of
-- the row is read with it. message_states stays the truth; triggers copy its owner rows here.
--
-- One copy. `messages.search` and its GIN index are gone: the pipeline's index step writes the
-- account-scoped words straight into message_search, and what read `messages.search` (a list
-- read from `messages`: from:, to:, subject:, only excluded words) looks the message up here. A
-- trashed message keeps its row, with `trashed_at`, so that a restore finds its words again, but
-- leaves every index of the table (WHERE trashed_at IS NULL): searches cannot see it, as spec 4.5
-- rule 3 wants; a destroyed one leaves through the foreign key.

-- The same words, without a regular expression (half the CPU): in a tsvector's text every
-- lexeme begins with a quote at the start or after a space, and a lexeme holds no space.
CREATE OR REPLACE FUNCTION account_lexemes(account integer, words tsvector) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT replace(' ' || words::text, ' ''', ' ''' || account || ':')::tsvector
$$;

DROP TRIGGER message_search_inserted ON messages;
DROP FUNCTION message_search_inserted();
DROP TRIGGER message_search_changed ON messages;
DROP FUNCTION message_search_changed();

-- Rebuilt from messages.search, the trashed mail's words included. Writers wait for the few
-- moments this takes.
LOCK TABLE messages, message_states IN SHARE ROW EXCLUSIVE MODE;
DROP TABLE message_search;

CREATE TABLE message_search (
  id integer NOT NULL REFERENCES messages ON DELETE CASCADE,
  account_id integer NOT NULL,
  alias_id integer NOT NULL,
  received_at timestamptz NOT NULL,
  has_attachments boolean NOT NULL,
  -- as messages.trashed_at
  trashed_at timestamptz,
  -- message_states.archived of the owner (account_id)
  archived boolean NOT NULL DEFAULT false,
  -- account_lexemes(account_id, the message's words)
  search tsvector NOT NULL,
  toast_pad text NOT NULL DEFAULT repeat(' ', 2048),
  PRIMARY KEY (id, account_id)
) PARTITION BY HASH (account_id);
CREATE TABLE message_search_p0 PARTITION OF message_search FOR VALUES WITH (MODULUS 16, REMAINDER 0) WITH (toast_tuple_target = 128);
CREATE TABLE message_search_p1 PARTITION OF message_search FOR VALUES WITH (MODULUS 16, REMAINDER 1) WITH (toast_tuple_target = 128);
CREATE TABLE message_search_p2 PARTITION OF message_search FOR VALUES WITH (MODULUS 16, REMAINDER 2) WITH (toast_tuple_target = 128);
CREATE TABLE message_search_p3 PARTITION OF message_search FOR VALUES WITH (MODULUS 16, REMAINDER 3) WITH (toast_tuple_target = 128);
CREATE TABLE message_search_p4 PARTITION OF message_search FOR VALUES WITH (MODULUS 16, REMAINDER 4) WITH (toast_tuple_target = 128);
CREATE TABLE message_search_p5 PARTITION OF message_search FOR VALUES WITH (MODULUS 16, REMAINDER 5) WITH (toast_tuple_target = 128);
CREATE TABLE message_search_p6 PARTITION OF message_search FOR VALUES WITH (MODULUS 16, REMAINDER 6) WITH (toast_tuple_target = 128);
CREATE TABLE message_search_p7 PARTITION OF message_search FOR VALUES WITH (MODULUS 16, REMAINDER 7) WITH (toast_tuple_target = 128);
CREATE TABLE message_search_p8 PARTITION OF message_search FOR VALUES WITH (MODULUS 16, REMAINDER 8) WITH (toast_tuple_target = 128);
CREATE TABLE message_search_p9 PARTITION OF message_search FOR VALUES WITH (MODULUS 16, REMAINDER 9) WITH (toast_tuple_target = 128);
CREATE TABLE message_search_p10 PARTITION OF message_search FOR VALUES WITH (MODULUS 16, REMAINDER 10) WITH (toast_tuple_target = 128);
CREATE TABLE message_search_p11 PARTITION OF message_search FOR VALUES WITH (MODULUS 16, REMAINDER 11) WITH (toast_tuple_target = 128);
CREATE TABLE message_search_p12 PARTITION OF message_search FOR VALUES WITH (MODULUS 16, REMAINDER 12) WITH (toast_tuple_target = 128);
CREATE TABLE message_search_p13 PARTITION OF message_search FOR VALUES WITH (MODULUS 16, REMAINDER 13) WITH (toast_tuple_target = 128);
CREATE TABLE message_search_p14 PARTITION OF message_search FOR VALUES WITH (MODULUS 16, REMAINDER 14) WITH (toast_tuple_target = 128);
CREATE TABLE message_search_p15 PARTITION OF message_search FOR VALUES WITH (MODULUS 16, REMAINDER 15) WITH (toast_tuple_target = 128);
-- The words out of line, the pad in line. Set here, not in CREATE TABLE (STORAGE there needs
-- PostgreSQL 16): on the partitioned table it reaches every partition, the same schema.
ALTER TABLE message_search ALTER COLUMN search SET STORAGE EXTERNAL, ALTER COLUMN toast_pad SET STORAGE MAIN;

INSERT INTO message_search (id, account_id, alias_id, received_at, has_attachments, trashed_at, archived, search)
SELECT m.id, m.account_id, m.alias_id, m.received_at, m.has_attachments, m.trashed_at,
       EXISTS (SELECT 1 FROM message_states s WHERE s.message_id = m.id AND s.account_id = m.account_id AND s.archived),
       account_lexemes(m.account_id, m.search)
FROM messages m WHERE m.search IS NOT NULL;
ALTER TABLE messages DROP COLUMN search;

-- A message moves to the trash and back: its row follows, in and out of the indexes.
CREATE FUNCTION message_search_trashed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE message_search SET trashed_at = NEW.trashed_at WHERE id = NEW.id AND account_id = NEW.account_id;
  RETURN NULL;
END $$;
CREATE TRIGGER message_search_trashed AFTER UPDATE OF trashed_at ON messages
  FOR EACH ROW WHEN (OLD.trashed_at IS DISTINCT FROM NEW.trashed_at)
  EXECUTE FUNCTION message_search_trashed();

-- The owner marks a message archived, or not. It first waits for a pipeline still writing the
-- message's row here (the pipeline holds the messages row until it commits), so the update
-- below finds that row; and the pipeline reads the marks again, in a statement after it wrote
-- the row, so a mark set before it is not lost either. A reader's own marks on a shared mailbox
-- are not the owner's (account_id differs) and change nothing here.
CREATE FUNCTION message_search_archive_marked() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  mark message_states := CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
  marked boolean := CASE WHEN TG_OP = 'DELETE' THEN false ELSE NEW.archived END;
BEGIN
  PERFORM 1 FROM messages WHERE id = mark.message_id AND account_id = mark.account_id FOR SHARE;
  IF FOUND THEN
    UPDATE message_search SET archived = marked WHERE id = mark.message_id AND account_id = mark.account_id;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER message_search_archive_marked AFTER INSERT ON message_states
  FOR EACH ROW WHEN (NEW.archived) EXECUTE FUNCTION message_search_archive_marked();
CREATE TRIGGER message_search_archive_changed AFTER UPDATE OF archived ON message_states
  FOR EACH ROW WHEN (OLD.archived <> NEW.archived) EXECUTE FUNCTION message_search_archive_marked();
CREATE TRIGGER message_search_archive_unmarked AFTER DELETE ON message_states
  FOR EACH ROW WHEN (OLD.archived) EXECUTE FUNCTION message_search_archive_marked();

-- An account's matches of the words.
CREATE INDEX message_search_words ON message_search USING gin (search) WHERE trashed_at IS NULL;
