-- No per-account serialization on the accept path (issue 36 item 2). The group commit's statement
-- updated, for every batch, the account's row (storage used), each alias's row (received, unread,
-- storage, last received) and, through the insert triggers of 0007 and 0025, the account's
-- mailbox_counts row and each alias's alias_counts row, holding all of them until its commit: two
-- batches of one account (the two batches in flight, or two ingest processes) ran one after the
-- other, each waiting for the other's WAL flush.
--
-- Now every insert into `messages` appends what it adds to those counters here, one row per
-- (account, alias) and statement, without a lock (and without foreign keys, whose checks would
-- share-lock the hot rows). A counter is its row plus the sum of its rows here, read in one
-- statement (store/src/messages/MailCounts.ts, the one reader), so it is exact at every moment
-- and after any crash: the deltas commit with the messages. MailCounts' fold moves them into the
-- rows (each delta deleted and added in one statement, only for targets it could lock without
-- waiting), run by ingest about every second and by the timers job every minute.
CREATE TABLE mail_count_deltas (
  account_id integer NOT NULL,
  alias_id integer NOT NULL,
  -- messages added outside the trash (each also unread, as ingest counts it) and in the trash
  in_mailbox integer NOT NULL,
  trashed integer NOT NULL,
  bytes bigint NOT NULL,
  last_received_at timestamptz NOT NULL
);
CREATE INDEX mail_count_deltas_account ON mail_count_deltas (account_id);
CREATE INDEX mail_count_deltas_alias ON mail_count_deltas (alias_id);

-- A row may now be below what it counts (a message destroyed before its delta was folded takes its
-- bytes off the row): the counter is the row plus its deltas, never the row alone.
ALTER TABLE accounts DROP CONSTRAINT IF EXISTS accounts_storage_used_bytes_check;

-- The insert triggers of 0007 and 0025 upserted the counts rows (locking them until commit): the
-- one insert trigger appends instead. The counts rows are created here when missing (ON CONFLICT
-- DO NOTHING takes no lock on a row that exists), so the trash and delete triggers always find
-- them; the existence test reads without waiting for a writer of the row.
DROP TRIGGER mailbox_counts_messages_inserted ON messages;
DROP FUNCTION mailbox_counts_messages_inserted();
DROP TRIGGER messages_alias_counts_inserted ON messages;
DROP FUNCTION alias_counts_messages_inserted();

CREATE FUNCTION mail_count_deltas_messages_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO mailbox_counts (account_id)
  SELECT DISTINCT i.account_id FROM inserted i WHERE NOT EXISTS (SELECT 1 FROM mailbox_counts c WHERE c.account_id = i.account_id)
  ORDER BY 1 ON CONFLICT DO NOTHING;
  INSERT INTO alias_counts (alias_id)
  SELECT DISTINCT i.alias_id FROM inserted i WHERE NOT EXISTS (SELECT 1 FROM alias_counts c WHERE c.alias_id = i.alias_id)
  ORDER BY 1 ON CONFLICT DO NOTHING;
  INSERT INTO mail_count_deltas (account_id, alias_id, in_mailbox, trashed, bytes, last_received_at)
  SELECT account_id, alias_id, count(*) FILTER (WHERE trashed_at IS NULL), count(*) FILTER (WHERE trashed_at IS NOT NULL),
         sum(size_bytes), max(received_at)
  FROM inserted GROUP BY account_id, alias_id;
  -- The accounts' snapshots (GET /me, /storage) are read again after this commits (0011), as
  -- when the accounts row was updated here.
  PERFORM burnbox_notify_accounts((SELECT string_agg(DISTINCT account_id::text, ',') FROM inserted));
  RETURN NULL;
END $$;
CREATE TRIGGER mail_count_deltas_messages_inserted AFTER INSERT ON messages
  REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION mail_count_deltas_messages_inserted();

-- Storage quota leases: room under an account's quota that one batch lane of one ingest process
-- (`holder`) may fill without asking anyone, so batches of one account never wait for each other.
-- A lane's accept statement takes its batch's bytes off its own lease row in the same transaction
-- as the messages, so for every account: storage used + every live lease <= quota, as granted
-- under the account's `quota` advisory lock (burnbox_quota_lease). UNLOGGED: a lease means
-- nothing after PostgreSQL restarts (every lane asks again), and writing one costs no WAL flush.
-- A lease lapses at `expires_at` for its holder; the others count it 10 seconds longer, for a
-- statement that checked it just before. A lease is good only under the quota it was granted
-- under (`quota`): when the plan's quota changes, the holder's statement no longer spends it, and
-- the next grant or eviction on the account drops it.
CREATE UNLOGGED TABLE quota_leases (
  account_id integer NOT NULL,
  holder text NOT NULL,
  bytes bigint NOT NULL,
  quota bigint NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (account_id, holder)
);

-- Grants `holder` a lease of at least `want` bytes (up to `chunk` or a quarter of the room) under
-- `quota_bytes`, replacing its previous one (and dropping every lease granted under another
-- quota), when the account's storage used and the other holders' live leases leave room; else
-- none (0: the caller makes room by eviction). Takes the account's `quota` lock (lock space
-- from platform/AccountLocks.ts), and then reads in fresh snapshots (a VOLATILE function's
-- statements each take one), so it sees every lease granted and every batch committed meanwhile.
CREATE FUNCTION burnbox_quota_lease(lock_space int4, account int4, lane text, want bigint, chunk bigint, quota_bytes bigint, lifetime interval)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  used bigint;
  others bigint;
  granted bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(lock_space, account);
  DELETE FROM quota_leases q WHERE q.account_id = account AND q.quota <> quota_bytes;
  used := coalesce((SELECT storage_used_bytes FROM accounts WHERE id = account), 0)
        + coalesce((SELECT sum(bytes) FROM mail_count_deltas WHERE account_id = account), 0);
  others := coalesce((SELECT sum(bytes) FROM quota_leases
                      WHERE account_id = account AND holder <> lane AND expires_at + interval '10 seconds' > clock_timestamp()), 0);
  -- at most a quarter of the room left (and `chunk`), so leases shrink as the account fills
  granted := least(greatest(want, least(chunk, (quota_bytes - used - others) / 4)), quota_bytes - used - others);
  IF granted < want THEN
    granted := 0;
  END IF;
  INSERT INTO quota_leases (account_id, holder, bytes, quota, expires_at) VALUES (account, lane, granted, quota_bytes, clock_timestamp() + lifetime)
  ON CONFLICT (account_id, holder) DO UPDATE SET bytes = excluded.bytes, quota = excluded.quota, expires_at = excluded.expires_at;
  RETURN granted;
END
$$;
