-- Rate-limit counters need no crash durability: losing them on a crash only forgets the
-- current windows. Unlogged tables skip the WAL, so counting costs no disk flush.
ALTER TABLE rate_windows SET UNLOGGED;
