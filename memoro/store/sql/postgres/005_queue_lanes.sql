-- Fair indexing: a turn recorded in a live conversation (lane 0) is claimed
-- before any bulk import's (lane 1), and bulk jobs are claimed round-robin
-- across users, so one user's import never makes another user wait.
ALTER TABLE jobs ADD COLUMN lane smallint NOT NULL DEFAULT 0;
DROP INDEX jobs_ready;
CREATE INDEX jobs_ready ON jobs (status, lane, id);
CREATE INDEX jobs_users ON jobs (status, lane, user_id, id);
-- a command waiting for one user's turns counts that user's jobs
CREATE INDEX jobs_user ON jobs (user_id, status);
