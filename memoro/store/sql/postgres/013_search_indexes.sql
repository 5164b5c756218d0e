-- Saved copies of large users' in-memory search indexes
-- (memoro.store.memory.saved): read on a user's first search on a server
-- instead of building the index from every chunk. A copy is of one
-- generation of the user (history_users.generation); a removal deletes the
-- user's copies. A copy is stored in parts of a few MB, so no connection's
-- buffers ever grow to hold a whole one; the arrays do not compress, so
-- PostgreSQL does not try.
CREATE TABLE search_indexes (
    user_id    text NOT NULL,
    kind       text NOT NULL,
    part       integer NOT NULL,
    generation bigint NOT NULL,
    data       bytea NOT NULL,
    PRIMARY KEY (user_id, kind, part)
);
ALTER TABLE search_indexes ALTER COLUMN data SET STORAGE EXTERNAL;
ALTER TABLE search_indexes ALTER COLUMN data SET STATISTICS 0;
ALTER TABLE search_indexes ENABLE ROW LEVEL SECURITY;
ALTER TABLE search_indexes FORCE ROW LEVEL SECURITY;
CREATE POLICY one_user ON search_indexes
    USING (user_id = current_setting('memoro.user_id', true))
    WITH CHECK (user_id = current_setting('memoro.user_id', true));
