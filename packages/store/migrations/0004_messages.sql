-- Messages. A row is committed with its raw bytes in the same transaction as the SMTP 250 (or
-- the 202 of test injection), in processing_status 'stub': the row itself is the durable
-- pipeline job. Workers claim stubs with FOR UPDATE SKIP LOCKED and reclaim 'processing' rows
-- whose worker died, so no stored message is left unprocessed.

CREATE TABLE messages (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  alias_id integer NOT NULL REFERENCES aliases ON DELETE CASCADE,
  source text NOT NULL CHECK (source IN ('smtp', 'test')),
  recipient text NOT NULL,
  envelope_from text,
  client_address text,
  client_helo text,
  received_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  size_bytes integer NOT NULL CHECK (size_bytes >= 0),
  processing_status text NOT NULL DEFAULT 'stub' CHECK (processing_status IN ('stub', 'processing', 'processed', 'failed')),
  processing_started_at timestamptz,
  processing_attempts integer NOT NULL DEFAULT 0,
  processed_at timestamptz,
  failure_reason text,
  sender_name text,
  sender_address text NOT NULL DEFAULT '',
  subject text NOT NULL DEFAULT '',
  snippet text NOT NULL DEFAULT '',
  text_body text,
  html_original text,
  html_sanitized text,
  remote_image_count integer NOT NULL DEFAULT 0,
  headers jsonb NOT NULL DEFAULT '{}',
  auth jsonb NOT NULL DEFAULT '{"spf": null, "dkim": null, "dmarc": null}',
  spam_score real,
  otp_codes jsonb NOT NULL DEFAULT '[]',
  verification_links jsonb NOT NULL DEFAULT '[]',
  has_attachments boolean NOT NULL DEFAULT false,
  search tsvector,
  trashed_at timestamptz,
  trash_purge_at timestamptz
);
CREATE INDEX messages_pipeline ON messages (id) WHERE processing_status IN ('stub', 'processing');
CREATE INDEX messages_expiry ON messages (expires_at);
CREATE INDEX messages_account_received ON messages (account_id, received_at DESC, id DESC);
CREATE INDEX messages_alias_received ON messages (alias_id, received_at DESC, id DESC);
CREATE INDEX messages_search ON messages USING gin (search);

-- The exact bytes as received, kept apart so message rows stay small.
CREATE TABLE message_raw (
  message_id integer PRIMARY KEY REFERENCES messages ON DELETE CASCADE,
  raw bytea NOT NULL
);

CREATE TABLE attachments (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  message_id integer NOT NULL REFERENCES messages ON DELETE CASCADE,
  position integer NOT NULL,
  filename text NOT NULL,
  mime_type text NOT NULL,
  size_bytes integer NOT NULL,
  dangerous boolean NOT NULL,
  previewable boolean NOT NULL,
  content_id text,
  content bytea NOT NULL,
  UNIQUE (message_id, position)
);

-- Reader state belongs to the reader, not the message (architecture.md).
CREATE TABLE message_states (
  message_id integer NOT NULL REFERENCES messages ON DELETE CASCADE,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  is_read boolean NOT NULL DEFAULT false,
  starred boolean NOT NULL DEFAULT false,
  pinned boolean NOT NULL DEFAULT false,
  archived boolean NOT NULL DEFAULT false,
  PRIMARY KEY (message_id, account_id)
);
CREATE INDEX message_states_pinned ON message_states (message_id) WHERE pinned;

CREATE TABLE message_tags (
  message_id integer NOT NULL REFERENCES messages ON DELETE CASCADE,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  tag_id integer NOT NULL REFERENCES tags ON DELETE CASCADE,
  PRIMARY KEY (message_id, account_id, tag_id)
);
