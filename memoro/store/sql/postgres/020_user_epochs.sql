-- Which life of a user id a piece of work began in. Work that stores a
-- user's rows over many transactions (an import, `memoro watch`) takes the
-- user's epoch when it starts and every one of its writes checks it, in the
-- same transaction and under the user's write lock, which the erase takes
-- too; erasing the user deletes the row, so those writes are refused from
-- then on, while work started after the erase gets a new epoch (from
-- memoro_generations, which only moves forward).
CREATE TABLE user_epochs (
    user_id text PRIMARY KEY,
    epoch   bigint NOT NULL
);
ALTER TABLE user_epochs ENABLE ROW LEVEL SECURITY;
ALTER TABLE user_epochs FORCE ROW LEVEL SECURITY;
CREATE POLICY one_user ON user_epochs
    USING (user_id = current_setting('memoro.user_id', true))
    WITH CHECK (user_id = current_setting('memoro.user_id', true));
