-- A reservation inserts five `reserved` candidates and a claim deletes the four it did not take:
-- neither changes anything an account snapshot holds (reserved candidates count nowhere), yet
-- each told every process to forget the account, a NOTIFY in the writing transaction (which
-- serializes the commits of every notifying transaction, fsync included). Inserted and deleted
-- aliases now notify only for rows that are not reserved; a claim still notifies through the
-- status change (reserved -> active).
CREATE FUNCTION burnbox_aliases_rows_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM burnbox_notify_accounts((SELECT string_agg(DISTINCT account_id::text, ',') FROM changed_rows WHERE status <> 'reserved'));
  RETURN NULL;
END
$$;

DROP TRIGGER aliases_inserted ON aliases;
DROP TRIGGER aliases_deleted ON aliases;
CREATE TRIGGER aliases_inserted AFTER INSERT ON aliases
  REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION burnbox_aliases_rows_changed();
CREATE TRIGGER aliases_deleted AFTER DELETE ON aliases
  REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION burnbox_aliases_rows_changed();
