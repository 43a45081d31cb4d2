-- The search words' GIN indexes with a 1 MB pending list rather than 4 MB (issue #36: disk per
-- stored message).
--
-- A GIN index with fastupdate (the default) queues new entries in a pending list and moves them
-- into its tree when the list outgrows gin_pending_list_limit (4 MB); the list's pages are then
-- reused, never given back, and every search of the index reads the whole list. Each of the 16
-- partitions has its own mailbox index, so the lists take up to 64 MB of disk whatever is stored:
-- after 4,000 messages of 1 KB to one account (bench:ingest-cost, COST_BODIES=64) the words index
-- was 1,204 bytes a message, of which ~1,050 its list; with 1 MB, 479, and the WAL a message the
-- same (11,927 -> 11,913 bytes). Without the list (fastupdate off) the tree is as small as a fresh
-- build (~620 bytes for a 5 KB message of prose), but each message's ~200 words go into it one by
-- one: ten times the WAL in a trial on the same words. A merge of the list is done by the
-- statement that overflows it: a quarter of the list, a quarter of that statement's pause.
DO $$
DECLARE
  partition_index regclass;
BEGIN
  -- Storage parameters are set on each partition's index: a partitioned index has none of its own.
  FOR partition_index IN
    SELECT h.inhrelid::regclass FROM pg_inherits h
    WHERE h.inhparent IN ('message_search_words'::regclass, 'message_search_archived_words'::regclass)
  LOOP
    EXECUTE format('ALTER INDEX %s SET (gin_pending_list_limit = 1024)', partition_index);
  END LOOP;
END $$;
