-- Shared mailboxes (spec 2.7, 2.17, 4.4; decisions.md "Sharing a mailbox"): shares of an alias
-- with guest accounts, the handles accounts are known by across the boundary, and the grants
-- (guest webhooks and guest API tokens) an owner oversees.

-- Every handle ever given out, kept when its account goes, so a handle is never reused.
-- accounts.handle (0001) is the account's current one, null until it takes part in sharing.
CREATE TABLE issued_handles (
  handle text PRIMARY KEY,
  issued_at timestamptz NOT NULL
);

-- One row per invitation. `status`: pending (invited), active (accepted), declined, ended (the
-- owner ended it, or the alias burned), left (the guest left). A live share (pending or active)
-- is held while `suspended_at` is set: the owner's plan dropped to free; an upgrade clears it.
CREATE TABLE shares (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  alias_id integer NOT NULL REFERENCES aliases ON DELETE CASCADE,
  owner_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  guest_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  role text NOT NULL CHECK (role IN ('collaborator', 'viewer')),
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'active', 'declined', 'ended', 'left')),
  created_at timestamptz NOT NULL,
  accepted_at timestamptz,
  suspended_at timestamptz,
  ended_at timestamptz,
  -- Why an ended share ended, for the owner's records; the guest is told only `share_ended`.
  ended_by text CHECK (ended_by IN ('owner', 'burn'))
);
-- At most one live share per mailbox and guest.
CREATE UNIQUE INDEX shares_live ON shares (alias_id, guest_id) WHERE status IN ('pending', 'active');
-- What a guest reaches (MailboxAccess reads it on every message request) and is invited to.
CREATE INDEX shares_guest ON shares (guest_id, alias_id) WHERE status IN ('pending', 'active');
-- An owner's shares, for the plan effect.
CREATE INDEX shares_owner ON shares (owner_id) WHERE status IN ('pending', 'active');
-- Stopped shares a guest is told about (GET /share-grants/revoked).
CREATE INDEX shares_guest_stopped ON shares (guest_id, id) WHERE status IN ('ended', 'left');

-- A guest webhook or guest API token reaching a shared mailbox (spec 2.17), one row per
-- (share, subject). A revoked grant stays revoked: re-registering does not restore it.
CREATE TABLE share_grants (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  share_id integer NOT NULL REFERENCES shares ON DELETE CASCADE,
  alias_id integer NOT NULL REFERENCES aliases ON DELETE CASCADE,
  guest_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('webhook', 'api_token')),
  webhook_id integer REFERENCES webhooks ON DELETE CASCADE,
  api_token_id integer REFERENCES api_tokens ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  acknowledged_at timestamptz,
  revoked_at timestamptz,
  revoked_by text CHECK (revoked_by IN ('owner', 'guest', 'system')),
  CHECK ((kind = 'webhook') = (webhook_id IS NOT NULL) AND (kind = 'api_token') = (api_token_id IS NOT NULL))
);
CREATE UNIQUE INDEX share_grants_webhook ON share_grants (alias_id, webhook_id) WHERE webhook_id IS NOT NULL;
CREATE UNIQUE INDEX share_grants_token ON share_grants (alias_id, api_token_id) WHERE api_token_id IS NOT NULL;
CREATE INDEX share_grants_guest ON share_grants (guest_id, id);
