-- An event no webhook endpoint receives is deleted once dispatched (issue #36: disk per stored
-- message; store/src/webhooks/Deliveries.ts dispatchBatch): nothing reads it after dispatch (a
-- delivery carries its own payload; sharing revocations read the events of pending deliveries),
-- and it stayed forever, past its mail's retention, ~1.5 KB a message.
--
-- The background conversion (`burnbox admin storage compact`, StorageCompaction) deletes those
-- dispatched before this migration: it walks the events that existed here in id order, a batch
-- per transaction, `events_after_id` where it stopped. Empty: no event to walk.
ALTER TABLE storage_compaction
  ADD COLUMN events_up_to text NOT NULL DEFAULT '',
  ADD COLUMN events_after_id text NOT NULL DEFAULT '',
  ADD COLUMN events_deleted bigint NOT NULL DEFAULT 0;
UPDATE storage_compaction SET events_up_to = coalesce((SELECT max(id) FROM events), '');
