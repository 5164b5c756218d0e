-- A user's generation (history_state.removed_gen) tells in-memory search
-- indexes and saved copies that they are stale. It is now taken from one
-- clock that only moves forward, and every user with chunks has one, so a
-- user erased and then back (the same id, nothing left in between) never
-- takes a generation an index of their old rows was built at.
CREATE TABLE generation_clock (n INTEGER NOT NULL);
INSERT INTO generation_clock SELECT coalesce(max(removed_gen), 0) + 1 FROM history_state;
INSERT INTO history_state (user_id, removed_gen) SELECT DISTINCT user_id, 0 FROM chunks WHERE true
    ON CONFLICT (user_id) DO NOTHING;
UPDATE history_state SET removed_gen = (SELECT n FROM generation_clock) WHERE removed_gen = 0;
