-- Mail rules (decisions.md "Mail rules", behind the plan's mailRuleCount). The pipeline's store
-- statement walks an account's running rules for each new message (store/src/rules/RuleWalk.ts),
-- so the match texts are kept lowered (lower(), as the walk lowers the message) and the
-- actions are kept both as given (`actions`, the resource) and as the marks they set.
CREATE TABLE mail_rules (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  -- null: every mailbox of the account
  alias_id integer REFERENCES aliases ON DELETE CASCADE,
  name text NOT NULL,
  enabled boolean NOT NULL,
  position integer NOT NULL CHECK (position >= 0),
  match jsonb NOT NULL,
  actions jsonb NOT NULL,
  stop boolean NOT NULL,
  -- beyond the first mailRuleCount rules in position order: kept, not run (a downgrade)
  beyond_cap boolean NOT NULL DEFAULT false,
  match_from text,
  match_to text,
  match_subject text,
  match_body text,
  match_has_attachment boolean,
  match_has_otp boolean,
  sets_read boolean NOT NULL,
  sets_starred boolean NOT NULL,
  sets_pinned boolean NOT NULL,
  sets_archived boolean NOT NULL,
  sets_trash boolean NOT NULL,
  tag_ids integer[] NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
-- GET /rules and the cap's ranking: an account's rules in position order.
CREATE INDEX mail_rules_account ON mail_rules (account_id, position, id);
-- The pipeline's walk: an account's rules that run.
CREATE INDEX mail_rules_running ON mail_rules (account_id, position, id) WHERE enabled AND NOT beyond_cap;
