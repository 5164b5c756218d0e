-- Conversation search within a time window (after / before) reads the ids of
-- a user's turns in that window: a range of this index, not every turn row.
CREATE INDEX turns_user_at ON turns (user_id, at) INCLUDE (id);
