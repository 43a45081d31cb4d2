-- Foundation: plans, accounts, browser sessions, API tokens, receiving domains, tags and the
-- shared rate-limit windows. Case-insensitive uniqueness uses *_key columns folded by the
-- application (full Unicode lower-casing), not lower(), which the C locale limits to ASCII.

CREATE TABLE plans (
  code text PRIMARY KEY CHECK (code IN ('free', 'premium', 'pro')),
  entitlements jsonb NOT NULL
);

CREATE TABLE accounts (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  email text NOT NULL,
  email_key text NOT NULL UNIQUE,
  password_hash text NOT NULL,
  plan text NOT NULL REFERENCES plans (code),
  overrides jsonb NOT NULL DEFAULT '{}',
  is_admin boolean NOT NULL DEFAULT false,
  handle text UNIQUE,
  mailbox_density text NOT NULL DEFAULT 'default' CHECK (mailbox_density IN ('default', 'comfortable', 'compact')),
  storage_used_bytes bigint NOT NULL DEFAULT 0 CHECK (storage_used_bytes >= 0),
  aliases_lifetime_claimed integer NOT NULL DEFAULT 0,
  push_enabled boolean NOT NULL DEFAULT false,
  push_nudge_dismissed boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL
);

CREATE TABLE sessions (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  digest bytea NOT NULL UNIQUE,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX sessions_account ON sessions (account_id);

CREATE TABLE api_tokens (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  name text NOT NULL,
  scopes text[] NOT NULL,
  prefix text NOT NULL,
  digest bytea NOT NULL UNIQUE,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended', 'revoked')),
  created_at timestamptz NOT NULL,
  last_used_at timestamptz,
  expires_at timestamptz,
  revoked_at timestamptz
);
CREATE INDEX api_tokens_account ON api_tokens (account_id, id);

CREATE TABLE domains (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name text NOT NULL UNIQUE,
  state text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'retired')),
  tier text NOT NULL DEFAULT 'public' CHECK (tier IN ('public', 'premium_only')),
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tags (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  name text NOT NULL,
  name_key text NOT NULL,
  color text CHECK (color ~ '^#[0-9A-F]{6}$'),
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (account_id, name_key)
);

-- Fixed windows shared by every process: per-token minute/day request limits, failed-login
-- throttling. One row per key and window start; old windows are swept.
CREATE TABLE rate_windows (
  key text NOT NULL,
  window_start timestamptz NOT NULL,
  count integer NOT NULL,
  PRIMARY KEY (key, window_start)
);
CREATE INDEX rate_windows_sweep ON rate_windows (window_start);
