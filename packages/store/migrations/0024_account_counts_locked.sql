-- Lifetime claims are counted in a row of their own, not on the account's row: storing mail
-- updates that row for every batch, and a claim that waited for it did so holding the account's
-- alias counts lock, so every other claim of the account waited too.
CREATE TABLE alias_claim_counts (
  account_id integer PRIMARY KEY REFERENCES accounts ON DELETE CASCADE,
  lifetime integer NOT NULL
);
INSERT INTO alias_claim_counts (account_id, lifetime)
  SELECT id, aliases_lifetime_claimed FROM accounts WHERE aliases_lifetime_claimed > 0;
ALTER TABLE accounts DROP COLUMN aliases_lifetime_claimed;

-- A claim's counting rules (active aliases, claims today, lifetime claims, under the plan the
-- account has) are read under the account's `aliasCounts` advisory lock (platform/AccountLocks.ts
-- passes its key space). This function takes the lock and then reads them: a VOLATILE function's
-- statements each take a fresh snapshot, so the counts include every claim, resume or plan change
-- that committed while this one waited for the lock, although the calling statement's own snapshot
-- is older. So a claim is one statement, and the lock is held for that statement and its commit
-- only, with nothing of the application's running inside it.
CREATE FUNCTION burnbox_alias_counts_locked(lock_space int4, account int4, since timestamptz)
RETURNS TABLE (active int, today int, lifetime int, plan text, overrides jsonb)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(lock_space, account);
  RETURN QUERY
    SELECT (SELECT count(*)::int FROM aliases WHERE account_id = a.id AND status = 'active'),
           (SELECT count(*)::int FROM aliases WHERE account_id = a.id AND claimed_at >= since),
           coalesce((SELECT c.lifetime FROM alias_claim_counts c WHERE c.account_id = a.id), 0), a.plan, a.overrides
    FROM accounts a WHERE a.id = account;
END
$$;

-- The same for a reservation: the account's live reservations, counted under its `reservations`
-- lock, so a reservation is one statement and the lock is held for it and its commit alone.
CREATE FUNCTION burnbox_live_reservations_locked(lock_space int4, account int4, at timestamptz)
RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(lock_space, account);
  RETURN (SELECT count(*)::int FROM alias_reservations WHERE account_id = account AND ended_at IS NULL AND expires_at > at);
END
$$;

-- The active aliases of an account, counted under the lock by every claim and resume: from an
-- index of the active ones alone, not every claimed alias the account ever had (a CI fleet burns
-- thousands a day).
CREATE INDEX aliases_active ON aliases (account_id) WHERE status = 'active';
