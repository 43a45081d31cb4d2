-- The full-text search index of the mailbox as its own table, words scoped to their account
-- (issue 5: `q` with one and with three terms, p99 <= 50 ms on a 200,000-message mailbox, its
-- exact `total` included).
--
-- Through the GIN index on `messages`, a search reads the posting lists of its words across
-- every account, then visits the heap page of every candidate; message rows are ~2 KB, so a
-- common word's 28,000 matches in one mailbox cost ~2 s to count. Here each lexeme is written
-- with its account id in front ('42:invoice'), so a word's posting list holds one account's
-- messages only, and the rows are narrow (what the list filters need besides the words), so the
-- matches sit on fewer pages, which stay cached.
--
-- It holds exactly the processed mail outside the trash: spec 4.5 rule 3, a trashed message
-- leaves the search index as a destroyed one does (`q` with trashed=true reads subject and
-- sender from messages); a restored one returns. Triggers keep it in the same transaction as
-- every change of `messages.search` (the pipeline's index step) and of `trashed_at`.

-- The words of a message, or of a query, within one account.
CREATE FUNCTION account_lexemes(account integer, words tsvector) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT regexp_replace(words::text, '(^| )''', '\1''' || account || ':', 'g')::tsvector
$$;
CREATE FUNCTION account_tsquery(account integer, query tsquery) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT regexp_replace(query::text, '(^|[ !(])''', '\1''' || account || ':', 'g')::tsquery
$$;

CREATE TABLE message_search (
  id integer PRIMARY KEY REFERENCES messages ON DELETE CASCADE,
  account_id integer NOT NULL,
  alias_id integer NOT NULL,
  received_at timestamptz NOT NULL,
  has_attachments boolean NOT NULL,
  -- account_lexemes(account_id, messages.search)
  search tsvector NOT NULL
);

CREATE FUNCTION message_search_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO message_search (id, account_id, alias_id, received_at, has_attachments, search)
  SELECT id, account_id, alias_id, received_at, has_attachments, account_lexemes(account_id, search)
  FROM inserted WHERE search IS NOT NULL AND trashed_at IS NULL;
  RETURN NULL;
END $$;
-- Messages arrive processed only in bulk loads; the pipeline fills `search` with an UPDATE.
CREATE TRIGGER message_search_inserted AFTER INSERT ON messages
  REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION message_search_inserted();

CREATE FUNCTION message_search_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.search IS NULL OR NEW.trashed_at IS NOT NULL THEN
    DELETE FROM message_search WHERE id = NEW.id;
  ELSE
    INSERT INTO message_search (id, account_id, alias_id, received_at, has_attachments, search)
    VALUES (NEW.id, NEW.account_id, NEW.alias_id, NEW.received_at, NEW.has_attachments, account_lexemes(NEW.account_id, NEW.search))
    ON CONFLICT (id) DO UPDATE SET has_attachments = excluded.has_attachments, search = excluded.search;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER message_search_changed AFTER UPDATE OF search, trashed_at, has_attachments ON messages
  FOR EACH ROW WHEN (OLD.search IS DISTINCT FROM NEW.search OR (OLD.trashed_at IS NULL) <> (NEW.trashed_at IS NULL)
                     OR OLD.has_attachments <> NEW.has_attachments)
  EXECUTE FUNCTION message_search_changed();
-- Destroyed messages leave it through the foreign key.

LOCK TABLE messages IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO message_search (id, account_id, alias_id, received_at, has_attachments, search)
SELECT id, account_id, alias_id, received_at, has_attachments, account_lexemes(account_id, search)
FROM messages WHERE search IS NOT NULL AND trashed_at IS NULL;

-- An account's matches of the words.
CREATE INDEX message_search_words ON message_search USING gin (search);
-- Newest first, walked when a word is common enough to fill a page soon. Without the account
-- id on purpose: the words already pick the account, and with it the planner ANDs the account's
-- whole mailbox into the bitmap of a rare word (an estimate that assumes the two independent).
CREATE INDEX message_search_received ON message_search (received_at DESC, id DESC);
-- The owner's archive marks, left out of a search and its total.
CREATE INDEX message_states_archived ON message_states (account_id, message_id) WHERE archived;
