-- Keyword search as BM25 with each user's own statistics (C4), ranked as on
-- SQLite. A chunk's terms (memoro.history.terms ids) become postings keyed by
-- user first, so one user's postings of one term are one range of the
-- primary key, and no user's search ever reads another user's postings.
-- This replaces ts_rank over a tsvector: ts_rank has no document frequencies
-- and ranked worse (LoCoMo keyword R@10 0.738 against 0.816).
-- Existing chunks get their terms from ``memoro migrate`` (Python computes
-- them) in the same transaction as this file. From now on, deleting a
-- conversation removes its postings and vectors at once (the purge removes
-- the rest), so searches read neither table through a visibility join.
DROP INDEX chunks_stems;
ALTER TABLE chunks DROP COLUMN stems;
ALTER TABLE chunks ADD COLUMN terms bigint[];   -- distinct term ids; NULL until computed
ALTER TABLE chunks ADD COLUMN length integer;   -- how many terms the chunk has

CREATE TABLE postings (
    user_id  text NOT NULL,
    term     bigint NOT NULL,
    chunk_id bigint NOT NULL,
    tf       integer NOT NULL,
    length   integer NOT NULL,   -- the chunk's, so scoring never reads chunks
    -- INCLUDE makes scoring an index-only scan (3x faster at 30k chunks)
    PRIMARY KEY (user_id, term, chunk_id) INCLUDE (tf, length)
);
ALTER TABLE postings ENABLE ROW LEVEL SECURITY;
ALTER TABLE postings FORCE ROW LEVEL SECURITY;
CREATE POLICY one_user ON postings
    USING (user_id = current_setting('memoro.user_id', true))
    WITH CHECK (user_id = current_setting('memoro.user_id', true));

-- Semantic ranking groups one user's windows by chunk: walk them in that
-- order within the user, never the whole table through vectors_chunk.
DROP INDEX vectors_user;
CREATE INDEX vectors_user ON vectors (user_id, model, chunk_id);

-- One row per user with past conversations: BM25's chunk count and total
-- length over the visible chunks. Like jobs it holds only ids and counts and
-- has no policy: maintenance across users walks the users through it.
CREATE TABLE history_users (
    user_id text PRIMARY KEY,
    chunks  bigint NOT NULL DEFAULT 0,
    length  bigint NOT NULL DEFAULT 0
);

-- Maintenance across users (status, reindex) visits one user at a time,
-- under that user's policy, instead of reading across users through SECURITY
-- DEFINER functions: with FORCE ROW LEVEL SECURITY the tables' owner is held
-- by the policies too (only a superuser or a BYPASSRLS role is not), so those
-- saw nothing on a managed PostgreSQL whose owner is no superuser.
DROP FUNCTION memoro_vector_models();
DROP FUNCTION memoro_chunks_missing(text, integer);
DROP FUNCTION memoro_count_missing(text);
DROP FUNCTION memoro_chunk_user(bigint);

CREATE FUNCTION memoro_vector_models() RETURNS TABLE (model text, n bigint)
LANGUAGE plpgsql SET search_path = public
AS $$
DECLARE
    previous text := current_setting('memoro.user_id', true);
    u text;
BEGIN
    FOR u IN SELECT h.user_id FROM history_users h ORDER BY h.user_id LOOP
        PERFORM set_config('memoro.user_id', u, true);
        RETURN QUERY SELECT v.model, count(*) FROM vectors v WHERE v.user_id = u GROUP BY v.model;
    END LOOP;
    PERFORM set_config('memoro.user_id', coalesce(previous, ''), true);
END $$;

CREATE FUNCTION memoro_chunks_missing(wanted text, most integer)
RETURNS TABLE (id bigint, user_id text, text text)
LANGUAGE plpgsql SET search_path = public
AS $$
DECLARE
    previous text := current_setting('memoro.user_id', true);
    u text;
    left_over integer := most;
    found integer;
BEGIN
    FOR u IN SELECT h.user_id FROM history_users h ORDER BY h.user_id LOOP
        EXIT WHEN left_over <= 0;
        PERFORM set_config('memoro.user_id', u, true);
        RETURN QUERY SELECT c.id, c.user_id, c.text FROM chunks c
            JOIN turns t ON t.id = c.turn_id
            JOIN conversations cv ON cv.user_id = t.user_id AND cv.id = t.conversation_id
            WHERE c.user_id = u AND cv.deleted_at IS NULL AND NOT EXISTS
            (SELECT 1 FROM vectors v WHERE v.chunk_id = c.id AND v.model = wanted)
            ORDER BY c.id LIMIT left_over;
        GET DIAGNOSTICS found = ROW_COUNT;
        left_over := left_over - found;
    END LOOP;
    PERFORM set_config('memoro.user_id', coalesce(previous, ''), true);
END $$;

CREATE FUNCTION memoro_count_missing(wanted text) RETURNS TABLE (missing bigint, total bigint)
LANGUAGE plpgsql SET search_path = public
AS $$
DECLARE
    previous text := current_setting('memoro.user_id', true);
    u text;
    m bigint;
    t bigint;
BEGIN
    missing := 0;
    total := 0;
    FOR u IN SELECT h.user_id FROM history_users h LOOP
        PERFORM set_config('memoro.user_id', u, true);
        SELECT count(*) FILTER (WHERE NOT EXISTS
                   (SELECT 1 FROM vectors v WHERE v.chunk_id = c.id AND v.model = wanted)),
               count(*)
          INTO m, t FROM chunks c
          JOIN turns tu ON tu.id = c.turn_id
          JOIN conversations cv ON cv.user_id = tu.user_id AND cv.id = tu.conversation_id
         WHERE c.user_id = u AND cv.deleted_at IS NULL;
        missing := missing + m;
        total := total + t;
    END LOOP;
    PERFORM set_config('memoro.user_id', coalesce(previous, ''), true);
    RETURN NEXT;
END $$;
