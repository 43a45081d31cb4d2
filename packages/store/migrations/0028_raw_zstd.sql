-- Raw bytes zstd-compressed (issue #36): message_raw.raw holds the zstd frame of the bytes as
-- received when `zstd`, else (rows stored before this migration) the bytes themselves. Readers
-- decompress (BlobStore); `burnbox admin storage compact` converts the old rows in the background.
ALTER TABLE message_raw ADD COLUMN zstd boolean NOT NULL DEFAULT false;
-- zstd's output does not compress again: PostgreSQL's pglz would only spend time trying. (Rows
-- already stored keep their pglz-compressed values until converted.)
ALTER TABLE message_raw ALTER COLUMN raw SET STORAGE EXTERNAL;
