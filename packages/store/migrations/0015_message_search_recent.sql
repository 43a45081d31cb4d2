-- A search's first try (issue 5: `q` with one common word, 28,000 matches in a 200,000-message
-- mailbox, p99 71 ms against 50). Reading every match from the GIN index, then sorting them for
-- the newest 51, costs about twice what counting them does. For a word in a tenth of a mailbox
-- or more, walking the mailbox newest first (or oldest first) and testing each row's words finds
-- the page within a few hundred rows; the total is then counted alone (store/src/Messages.ts,
-- `list`). The walk reads this index, in the list's order, from the cursor on.
CREATE INDEX message_search_recent ON message_search (account_id, received_at, id) WHERE trashed_at IS NULL;
