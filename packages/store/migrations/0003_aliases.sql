-- Aliases and candidate reservations. A reserved candidate is an alias row in status
-- 'reserved' (never shown by the API); claiming turns it into 'active' and keeps its id, so
-- the candidate id the client saw is the alias id. A released or expired candidate row is
-- deleted; an address that was ever claimed stays forever, so it is never handed out again.

CREATE TABLE alias_reservations (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  token_digest bytea NOT NULL UNIQUE,
  expires_at timestamptz NOT NULL,
  ended_at timestamptz
);
CREATE INDEX alias_reservations_account ON alias_reservations (account_id) WHERE ended_at IS NULL;

CREATE TABLE aliases (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  domain_id integer NOT NULL REFERENCES domains,
  local_part text NOT NULL,
  local_key text NOT NULL,
  style text NOT NULL CHECK (style IN ('words', 'pronounceable', 'numeric')),
  status text NOT NULL CHECK (status IN ('reserved', 'active', 'paused', 'burned')),
  reservation_id integer REFERENCES alias_reservations ON DELETE SET NULL,
  label text,
  note text,
  received_count integer NOT NULL DEFAULT 0,
  rejected_count integer NOT NULL DEFAULT 0,
  unread_count integer NOT NULL DEFAULT 0,
  storage_used_bytes bigint NOT NULL DEFAULT 0,
  push_enabled boolean NOT NULL DEFAULT false,
  last_received_at timestamptz,
  claimed_at timestamptz,
  paused_at timestamptz,
  burned_at timestamptz,
  plan_paused boolean NOT NULL DEFAULT false,
  self_destruct_at timestamptz,
  self_destruct_suspended boolean NOT NULL DEFAULT false,
  expiring_notified_at timestamptz,
  UNIQUE (domain_id, local_key)
);
CREATE INDEX aliases_account ON aliases (account_id, id) WHERE status <> 'reserved';
CREATE INDEX aliases_reservation ON aliases (reservation_id) WHERE status = 'reserved';
CREATE INDEX aliases_claims_per_day ON aliases (account_id, claimed_at) WHERE claimed_at IS NOT NULL;
CREATE INDEX aliases_timers ON aliases (self_destruct_at)
  WHERE self_destruct_at IS NOT NULL AND status IN ('active', 'paused') AND NOT self_destruct_suspended;

-- The durable event outbox: written in the same transaction as the state change it reports;
-- webhook delivery reads it.
CREATE TABLE events (
  id text PRIMARY KEY CHECK (id ~ '^evt_[0-9A-HJKMNP-TV-Z]{26}$'),
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  alias_id integer REFERENCES aliases ON DELETE SET NULL,
  type text NOT NULL,
  time timestamptz NOT NULL,
  data jsonb NOT NULL,
  dispatched_at timestamptz
);
CREATE INDEX events_undispatched ON events (time) WHERE dispatched_at IS NULL;
CREATE INDEX events_account ON events (account_id, time);
