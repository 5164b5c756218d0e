-- Keyword search weighs a turn's question (the user's message) on its own
-- (memoro.store.keywords): a chunk's terms carry the question's words again
-- as question terms, and question_length says how many of its terms are the
-- question's. The migration computes both for chunks indexed before it (in
-- Python, memoro.store.backfill); saved copies of in-memory indexes are
-- dropped (by the migration hook, which may read every user), to be built
-- again with them.
ALTER TABLE chunks ADD COLUMN question_length integer NOT NULL DEFAULT 0;
