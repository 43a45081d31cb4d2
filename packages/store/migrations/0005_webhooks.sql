-- Webhooks (spec 2.21, 4.9, 6): endpoints, their deliveries and attempt history, the service's
-- Ed25519 signing keys, and account notices (how an owner learns an endpoint was disabled).

CREATE TABLE webhooks (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  name text NOT NULL,
  url text NOT NULL,
  subscription jsonb NOT NULL,
  spki_pin text,
  include_text_body boolean NOT NULL DEFAULT false,
  include_message_restored boolean NOT NULL DEFAULT false,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'disabled')),
  failure_count integer NOT NULL DEFAULT 0,
  -- The HMAC secret, AES-256-GCM under a key derived from BURNBOX_SECRET (it must be usable,
  -- so it cannot be a digest). After a rotation the previous one signs until it expires.
  secret_version integer NOT NULL DEFAULT 1,
  secret_encrypted text NOT NULL,
  previous_secret_encrypted text,
  previous_secret_expires_at timestamptz,
  last_success_at timestamptz,
  last_failure_at timestamptz,
  failure_since timestamptz,
  disabled_at timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  -- A deleted endpoint is gone from the API at once; the row stays while its delivery log does.
  deleted_at timestamptz
);
CREATE INDEX webhooks_account ON webhooks (account_id, id) WHERE deleted_at IS NULL;

-- One row per (endpoint, event): the durable delivery job. Workers claim due rows with
-- FOR UPDATE SKIP LOCKED; a 'delivering' row whose claim is older than the lease belongs to a
-- worker that died and is claimed again, so no event is lost.
CREATE TABLE webhook_deliveries (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  webhook_id integer NOT NULL REFERENCES webhooks ON DELETE CASCADE,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  event_id text NOT NULL,
  event_type text NOT NULL,
  -- The exact body bytes, written once: every attempt and redelivery sends these.
  payload bytea,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivering', 'succeeded', 'failed', 'abandoned')),
  attempt_count integer NOT NULL DEFAULT 0,
  cycle_attempt_count integer NOT NULL DEFAULT 0,
  last_http_status integer,
  last_error text,
  latency_ms integer,
  response_snippet text,
  next_attempt_at timestamptz NOT NULL,
  claimed_at timestamptz,
  last_attempt_at timestamptz,
  delivered_at timestamptz,
  created_at timestamptz NOT NULL,
  -- Set when the payload and log were purged (30 days): the row answers 410 to redelivery.
  purged_at timestamptz,
  UNIQUE (webhook_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status IN ('pending', 'delivering');
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, id DESC);
CREATE INDEX webhook_deliveries_account ON webhook_deliveries (account_id, id DESC);
CREATE INDEX webhook_deliveries_purge ON webhook_deliveries (created_at);

CREATE TABLE webhook_attempts (
  delivery_id bigint NOT NULL REFERENCES webhook_deliveries ON DELETE CASCADE,
  attempt integer NOT NULL,
  status text NOT NULL CHECK (status IN ('succeeded', 'failed')),
  http_status integer,
  error_code text,
  latency_ms integer NOT NULL,
  response_snippet text,
  attempted_at timestamptz NOT NULL,
  PRIMARY KEY (delivery_id, attempt)
);

-- The service's Ed25519 keys (`v1a` signatures), published at /.well-known/service-webhooks.json.
-- The private key is AES-256-GCM under BURNBOX_SECRET. Exactly one key is current; a rotated
-- key stays published (and keeps signing) as previous for seven days.
CREATE TABLE webhook_signing_keys (
  kid text PRIMARY KEY,
  public_key bytea NOT NULL,
  private_key_encrypted text NOT NULL,
  status text NOT NULL CHECK (status IN ('current', 'previous')),
  created_at timestamptz NOT NULL,
  retired_at timestamptz
);
CREATE UNIQUE INDEX webhook_signing_keys_one_current ON webhook_signing_keys ((true)) WHERE status = 'current';

-- Things the service tells an account owner (for now: `webhook.disabled`). Shown to the owner
-- by the bootstrap/notification surface; kept until read and then for 90 days.
CREATE TABLE account_notices (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  kind text NOT NULL,
  data jsonb NOT NULL,
  created_at timestamptz NOT NULL,
  read_at timestamptz
);
CREATE INDEX account_notices_account ON account_notices (account_id, id DESC);
