-- What a request serves of a message's body is made in the pipeline's mail threads, never at
-- request time on the main thread (issue #15): a hostile HTML held the API while it was
-- sanitized again to load remote images, or read for a webhook's text_body.
-- html_sanitized_remote: the rendering with remote images loaded; NULL when there are none (the
-- blocked rendering, html_sanitized, is the same) or the HTML is past the limits.
-- webhook_text_body: the reader text as a webhook payload carries it (spec 6.3, at most 32 KiB).
-- Both NULL in rows processed before this migration: they are served from what those rows
-- have, and only small HTML is read again (RequestTimeHtmlMaxChars).
ALTER TABLE messages ADD COLUMN html_sanitized_remote text, ADD COLUMN webhook_text_body text;
