-- Keyword and semantic search read each user's chunks into the same
-- in-memory indexes as SQLite (memoro.store.memory), which compute BM25's
-- statistics themselves: the postings table (two thirds of the database) and
-- the per-user counts go. A chunk keeps its terms packed as on SQLite
-- (8-byte term ids, then 4-byte counts, little-endian); ``memoro migrate``
-- fills them for existing chunks in the same transaction as this file.
-- history_users.generation counts the removals of a user's chunks or vectors,
-- so a server holding the user's index in memory knows to read it again.
DROP TABLE postings;
ALTER TABLE chunks DROP COLUMN terms;
ALTER TABLE chunks ADD COLUMN terms bytea;
ALTER TABLE history_users DROP COLUMN chunks;
ALTER TABLE history_users DROP COLUMN length;
ALTER TABLE history_users ADD COLUMN generation bigint NOT NULL DEFAULT 0;
