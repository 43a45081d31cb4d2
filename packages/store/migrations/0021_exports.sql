-- Mailbox exports (spec 2.18, 3.4, 4.7; issue #33): one row per requested export, built by the
-- worker's `exports` job into a ZIP kept as a large object (BlobStore), downloadable for 24 hours.
--
-- `status`: pending (queued), processing (a worker holds it until `lease_until`; a worker that
-- died leaves the lease to run out and the next sweep takes the export again), ready, failed,
-- expired (its bytes deleted). `suspended_at`: the account lost `bulkExport` (a downgrade); the
-- export is neither built nor expired until an upgrade clears it, and the download window
-- (`expires_at`) moves on by the time it was held.
CREATE TABLE exports (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  -- The one mailbox exported, or null for every mailbox the account reads; its address is kept
  -- so the export still names it after the alias burns.
  alias_id integer REFERENCES aliases ON DELETE SET NULL,
  alias text,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'processing', 'ready', 'failed', 'expired')),
  error text,
  -- Progress: messages written of the messages the export holds (known once it starts).
  messages_done integer NOT NULL DEFAULT 0,
  messages_total integer,
  attempts integer NOT NULL DEFAULT 0,
  lease_until timestamptz,
  -- The ZIP: its large object while being written and once ready, its size and SHA-256.
  blob_oid oid,
  size_bytes bigint,
  sha256 text,
  created_at timestamptz NOT NULL,
  ready_at timestamptz,
  expires_at timestamptz,
  suspended_at timestamptz
);
-- An account's exports, newest first (GET /exports), and the one-at-a-time rule.
CREATE INDEX exports_account ON exports (account_id, id DESC);
CREATE UNIQUE INDEX exports_one_running ON exports (account_id) WHERE status IN ('pending', 'processing');
-- What the job takes (pending, or processing with a lapsed lease) and what the sweep expires.
CREATE INDEX exports_to_build ON exports (id) WHERE status IN ('pending', 'processing');
CREATE INDEX exports_to_expire ON exports (expires_at) WHERE status = 'ready';
