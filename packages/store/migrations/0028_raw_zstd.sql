-- Raw bytes zstd-compressed (issue #36): message_raw.raw holds the zstd frame of the bytes as
-- received when `zstd`, else (rows stored before this migration) the bytes themselves. Readers
-- decompress (BlobStore); `burnbox admin storage compact` converts the old rows in the background.
ALTER TABLE message_raw ADD COLUMN zstd boolean NOT NULL DEFAULT false;
-- zstd's output does not compress again: PostgreSQL's pglz would only spend time trying. (Rows
-- already stored keep their pglz-compressed values until converted.)
ALTER TABLE message_raw ALTER COLUMN raw SET STORAGE EXTERNAL;

-- The background conversion of what was stored before (issue #36 item 7): raw bytes compressed,
-- each webhook text_body its text part makes again dropped (webhook_text_body NULL), and the HTML
-- as received dropped where no reader falls back to it (html_original NULL). It walks
-- the messages that existed at this migration in id order, a small batch per transaction;
-- `after_id` is where it stopped, so it resumes there. One row.
CREATE TABLE storage_compaction (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  up_to integer NOT NULL,
  after_id integer NOT NULL DEFAULT 0,
  raws_compressed bigint NOT NULL DEFAULT 0,
  raw_bytes_before bigint NOT NULL DEFAULT 0,
  raw_bytes_after bigint NOT NULL DEFAULT 0,
  texts_dropped bigint NOT NULL DEFAULT 0,
  html_originals_dropped bigint NOT NULL DEFAULT 0,
  started_at timestamptz,
  updated_at timestamptz,
  finished_at timestamptz
);
INSERT INTO storage_compaction (up_to) SELECT coalesce(max(id), 0) FROM messages;
