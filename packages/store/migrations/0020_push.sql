-- Browser push (spec 2.20, 4.1; decisions.md "Browser push"; issue #32): an account's push
-- subscriptions, a guest's own push preference on a shared mailbox, and the durable queue of
-- pushes to send (one row per subscription and message, or a test push).

CREATE TABLE push_subscriptions (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  -- The push service's URL: never answered; the API shows endpoint_hash (SHA-256, hex).
  endpoint text NOT NULL,
  endpoint_hash text NOT NULL CHECK (endpoint_hash ~ '^[0-9a-f]{64}$'),
  content_encoding text NOT NULL CHECK (content_encoding IN ('aes128gcm', 'aesgcm')),
  p256dh text NOT NULL,
  auth text NOT NULL,
  enabled boolean NOT NULL DEFAULT true,
  created_at timestamptz NOT NULL,
  last_success_at timestamptz,
  last_failure_at timestamptz,
  UNIQUE (account_id, endpoint_hash)
);

-- A guest's own preference on a mailbox shared with it (spec 2.7 pushEnabled; never the owner's).
ALTER TABLE shares ADD COLUMN push_enabled boolean NOT NULL DEFAULT false;

-- The pushes to send. next_attempt_at NULL is due now (a row the pipeline's trigger queued);
-- a failed attempt sets it later; a sent push, or one given up, is deleted. A worker claims rows
-- FOR UPDATE SKIP LOCKED and stamps claimed_at; a claim older than the lease is taken again.
CREATE TABLE push_deliveries (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  subscription_id integer NOT NULL REFERENCES push_subscriptions ON DELETE CASCADE,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  -- NULL: a test push (POST /push/subscriptions/{id}/test).
  message_id integer REFERENCES messages ON DELETE CASCADE,
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  claimed_at timestamptz,
  created_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX push_deliveries_message ON push_deliveries (subscription_id, message_id) WHERE message_id IS NOT NULL;
CREATE INDEX push_deliveries_due ON push_deliveries (next_attempt_at NULLS FIRST, id);
CREATE INDEX push_deliveries_account_tests ON push_deliveries (account_id) WHERE message_id IS NULL;

-- A message the pipeline processed queues a push to every enabled subscription of its owner
-- (account push on, the alias's pushEnabled on) and of each live guest whose own preference is
-- on: in the pipeline's own statement, so a push is queued exactly when the message is stored.
-- Two index lookups a message when nobody has push on; a queued push wakes the senders.
CREATE FUNCTION push_message_processed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  queued integer;
BEGIN
  INSERT INTO push_deliveries (subscription_id, account_id, message_id, created_at)
  SELECT ps.id, ps.account_id, NEW.id, coalesce(NEW.processed_at, now())
  FROM aliases al
  JOIN accounts a ON a.id = al.account_id AND a.push_enabled
  JOIN push_subscriptions ps ON ps.account_id = al.account_id AND ps.enabled
  WHERE al.id = NEW.alias_id AND al.push_enabled
  UNION ALL
  SELECT ps.id, ps.account_id, NEW.id, coalesce(NEW.processed_at, now())
  FROM shares s
  JOIN accounts a ON a.id = s.guest_id AND a.push_enabled
  JOIN push_subscriptions ps ON ps.account_id = s.guest_id AND ps.enabled
  WHERE s.alias_id = NEW.alias_id AND s.push_enabled AND s.status = 'active' AND s.suspended_at IS NULL
  ON CONFLICT DO NOTHING;
  GET DIAGNOSTICS queued = ROW_COUNT;
  IF queued > 0 THEN
    PERFORM pg_notify('burnbox_push', '');
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER push_message_processed AFTER UPDATE OF processing_status ON messages
  FOR EACH ROW WHEN (NEW.processing_status = 'processed' AND OLD.processing_status IS DISTINCT FROM 'processed')
  EXECUTE FUNCTION push_message_processed();
