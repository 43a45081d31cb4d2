-- Protected operator desks (spec 4.6, 2.22; decisions.md "Protected operator desks"): the aliases
-- an operator made desks, and what their owners sent from them.

-- One row per desk; revoking deletes it. A desk is active while its alias is not burned.
CREATE TABLE desks (
  alias_id integer PRIMARY KEY REFERENCES aliases ON DELETE CASCADE,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  granted_at timestamptz NOT NULL
);
-- "Does the account own a desk" (an alias's canSend).
CREATE INDEX desks_account ON desks (account_id);

-- A Sent record is written `pending` before the relay is asked, then becomes `sent` or `failed`:
-- a crash between the two leaves it `pending`, never a send without a record. Kept 90 days.
CREATE TABLE desk_sent_mail (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  alias_id integer NOT NULL REFERENCES aliases ON DELETE CASCADE,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  recipient text NOT NULL,
  subject text NOT NULL,
  body text NOT NULL,
  -- The message of the desk's mailbox this replies to (kept if that message goes).
  reply_to_message_id integer,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'failed', 'sent')),
  -- The attempt: what the send limits count, and `sent_at` until the relay accepts.
  created_at timestamptz NOT NULL,
  sent_at timestamptz,
  -- The relay's refusal or the connection failure of a `failed` send (no credentials in it).
  failure text
);
-- The Sent list of a desk, newest first.
CREATE INDEX desk_sent_mail_alias ON desk_sent_mail (alias_id, created_at DESC, id DESC);
-- The send limits (the last hour of attempts) and the 90-day purge.
CREATE INDEX desk_sent_mail_created ON desk_sent_mail (created_at DESC, account_id);
