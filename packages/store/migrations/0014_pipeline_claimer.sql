-- Which process claimed a message for the pipeline: the application_name its connections carry
-- (burnbox/<pid>/<random>, one per process; store/src/Database.ts). A claim whose process has no
-- connection left to PostgreSQL (it crashed, or was killed) is taken over at once, instead of
-- after the claim timeout (worker/src/Pipeline.ts). NULL: a claim by a process without such a
-- name, taken over by the timeout alone.
ALTER TABLE messages ADD COLUMN processing_worker text;
