-- The outbox's undispatched events, kept apart from the events themselves (issue #36): marking an
-- event dispatched rewrote its whole row (the payload's data, ~1 KB) with new index entries, 10.7 %
-- of the WAL per stored message, and left a dead row version behind. Now an event row is written
-- once and never updated; its id waits here until dispatch takes it (DELETE ... RETURNING, a few
-- dozen bytes of WAL). An event is dispatched exactly when its id is no longer here.
-- events.dispatched_at stays for rows dispatched before this migration and for webhook.test
-- events (written dispatched); new events leave it NULL.
CREATE TABLE events_pending (
  time timestamptz NOT NULL,
  id text NOT NULL,
  PRIMARY KEY (time, id)
);

-- Every writer of events (the pipeline's store statement, appendEvents) gets its ids queued in
-- the same statement, without knowing of this table.
CREATE FUNCTION events_pending_appended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO events_pending (time, id) SELECT time, id FROM appended WHERE dispatched_at IS NULL;
  RETURN NULL;
END $$;
CREATE TRIGGER events_pending_appended AFTER INSERT ON events
  REFERENCING NEW TABLE AS appended FOR EACH STATEMENT EXECUTE FUNCTION events_pending_appended();

INSERT INTO events_pending (time, id) SELECT time, id FROM events WHERE dispatched_at IS NULL;
DROP INDEX events_undispatched;
