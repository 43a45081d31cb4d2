-- Every process keeps recent account snapshots (GET /me, GET /storage) in memory. These
-- triggers tell all of them, at commit, which accounts changed: the accounts row itself
-- (storage, plan, overrides, settings), or how many of its aliases are active. The payload is
-- a comma-separated list of account ids, or '*' for "forget everything" (a plan's entitlements
-- changed, or too many accounts for one notification).

CREATE FUNCTION burnbox_notify_accounts(ids text) RETURNS void LANGUAGE sql AS $$
  SELECT pg_notify('burnbox_accounts', CASE WHEN length(ids) > 7000 THEN '*' ELSE ids END)
  WHERE ids IS NOT NULL
$$;

-- Inserted, updated or deleted rows of accounts (by id) or aliases (by account_id).
CREATE FUNCTION burnbox_rows_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'accounts' THEN
    PERFORM burnbox_notify_accounts((SELECT string_agg(DISTINCT id::text, ',') FROM changed_rows));
  ELSE
    PERFORM burnbox_notify_accounts((SELECT string_agg(DISTINCT account_id::text, ',') FROM changed_rows));
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER accounts_changed AFTER UPDATE ON accounts
  REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION burnbox_rows_changed();

-- Aliases: inserted or deleted rows, and updates that change a status (counters such as
-- rejected_count or the alias's storage do not show in an account snapshot).
CREATE FUNCTION burnbox_aliases_status_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM burnbox_notify_accounts((
    SELECT string_agg(DISTINCT n.account_id::text, ',')
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE n.status IS DISTINCT FROM o.status OR n.account_id IS DISTINCT FROM o.account_id));
  RETURN NULL;
END
$$;

CREATE TRIGGER aliases_inserted AFTER INSERT ON aliases
  REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION burnbox_rows_changed();
CREATE TRIGGER aliases_deleted AFTER DELETE ON aliases
  REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION burnbox_rows_changed();
CREATE TRIGGER aliases_status_changed AFTER UPDATE ON aliases
  REFERENCING NEW TABLE AS new_rows OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION burnbox_aliases_status_changed();

CREATE FUNCTION burnbox_plans_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('burnbox_accounts', '*');
  RETURN NULL;
END
$$;

CREATE TRIGGER plans_changed AFTER INSERT OR UPDATE OR DELETE ON plans
  FOR EACH STATEMENT EXECUTE FUNCTION burnbox_plans_changed();
