-- An alias's unread count, off its hot row for the pipeline (issue 34). Ingest counts every
-- accepted message unread on its aliases row (received_count, storage_used_bytes and
-- unread_count, one UPDATE per batch), and the pipeline's rules step takes one back for mail a
-- rule reads or trashes. Written on the same aliases row, that step made each pipeline batch wait
-- for ingest's batch on the alias (and hold the row until its own commit): at 500 msg/s on one
-- alias the pipeline fell behind. The step appends its correction here instead, one row per
-- batch and alias, which waits for no one.
--
-- An alias's unread count is aliases.unread_count plus the sum of its rows here (one statement
-- reads both, so it is exact at any moment); the alias-timers job folds the rows into
-- aliases.unread_count every minute, deleting them and adding their sum in one transaction.
-- No foreign key: its check would share-lock the aliases row from the pipeline; the fold deletes
-- the rows of an alias that is gone.
CREATE TABLE alias_unread_deltas (
  alias_id integer NOT NULL,
  delta integer NOT NULL
);
CREATE INDEX alias_unread_deltas_alias ON alias_unread_deltas (alias_id);
