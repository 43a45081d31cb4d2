-- Reading mail (issue 5): remote-image preferences per reader and sender, and the indexes the
-- trash and the tag counts are read through.

-- A reader's "always load remote images from this sender" (spec 2.16). The sender is the
-- message's sender address, lowercased.
CREATE TABLE remote_image_preferences (
  account_id integer NOT NULL REFERENCES accounts ON DELETE CASCADE,
  sender text NOT NULL,
  always_load boolean NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (account_id, sender)
);

-- POST /messages/trash/empty and trashed=true listings: an account's trash, oldest first.
CREATE INDEX messages_account_trash ON messages (account_id, trashed_at, id) WHERE trashed_at IS NOT NULL;
-- The purge of trashed messages whose trash_purge_at passed.
CREATE INDEX messages_trash_purge ON messages (trash_purge_at) WHERE trash_purge_at IS NOT NULL;
-- TagWithCount.messageCount.
CREATE INDEX message_tags_tag ON message_tags (tag_id);
