-- Saved copies of large users' in-memory search indexes
-- (memoro.store.memory.saved): read on a user's first search instead of
-- building the index from every chunk. A copy is of one generation of the
-- user (history_state.removed_gen); a removal deletes the user's copies.
-- A copy is stored in parts of a few MB, so no statement or buffer ever
-- holds a whole one.
CREATE TABLE search_indexes (
    user_id    TEXT NOT NULL,
    kind       TEXT NOT NULL,
    part       INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    data       BLOB NOT NULL,
    PRIMARY KEY (user_id, kind, part)
);
