-- Past conversations (C1–C8) and the job queue. User-owned tables carry the
-- same forced row-level security as the block. Jobs hold only ids and are
-- shared by every worker, so they have no policy.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE conversations (
    user_id    text NOT NULL,
    id         text NOT NULL,
    created_at timestamptz NOT NULL,
    deleted_at timestamptz,
    PRIMARY KEY (user_id, id)
);

CREATE TABLE turns (
    id              bigserial PRIMARY KEY,
    user_id         text NOT NULL,
    conversation_id text NOT NULL,
    seq             integer NOT NULL,
    question        text NOT NULL,
    answer          text NOT NULL,
    at              timestamptz NOT NULL,
    key             text,
    indexed_at      timestamptz,
    FOREIGN KEY (user_id, conversation_id) REFERENCES conversations (user_id, id),
    UNIQUE (user_id, conversation_id, seq),
    UNIQUE (user_id, key)
);

CREATE TABLE chunks (
    id      bigserial PRIMARY KEY,
    turn_id bigint NOT NULL REFERENCES turns (id),
    user_id text NOT NULL,
    ordinal integer NOT NULL,
    text    text NOT NULL,
    stems   tsvector NOT NULL,   -- memoro.history.terms stems, as 'simple' lexemes
    UNIQUE (turn_id, ordinal)
);
CREATE INDEX chunks_stems ON chunks USING gin (stems);
CREATE INDEX chunks_user ON chunks (user_id, turn_id);

CREATE TABLE vectors (
    id        bigserial PRIMARY KEY,
    chunk_id  bigint NOT NULL REFERENCES chunks (id),
    user_id   text NOT NULL,
    model     text NOT NULL,
    part      integer NOT NULL,
    embedding vector NOT NULL
);
CREATE INDEX vectors_user ON vectors (user_id, model);
CREATE INDEX vectors_chunk ON vectors (chunk_id);

CREATE TABLE jobs (
    id           bigserial PRIMARY KEY,
    kind         text NOT NULL,
    user_id      text NOT NULL,
    payload      jsonb NOT NULL,
    status       text NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'running', 'failed')),
    attempts     integer NOT NULL DEFAULT 0,
    run_after    timestamptz NOT NULL,
    locked_by    text,
    locked_until timestamptz,
    last_error   text,
    created_at   timestamptz NOT NULL
);
CREATE INDEX jobs_ready ON jobs (status, id);

DO $$
DECLARE name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['conversations', 'turns', 'chunks', 'vectors'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', name);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', name);
        EXECUTE format('CREATE POLICY one_user ON %I'
            ' USING (user_id = current_setting(''memoro.user_id'', true))'
            ' WITH CHECK (user_id = current_setting(''memoro.user_id'', true))', name);
    END LOOP;
END $$;

-- Maintenance across users (status, reindex) goes through these doors, owned
-- by the migrating role, instead of weakening the policies.
CREATE FUNCTION memoro_vector_models() RETURNS TABLE (model text, n bigint)
LANGUAGE sql SECURITY DEFINER SET search_path = public
AS $$ SELECT model, count(*) FROM vectors GROUP BY model $$;

CREATE FUNCTION memoro_chunks_missing(wanted text, most integer)
RETURNS TABLE (id bigint, user_id text, text text)
LANGUAGE sql SECURITY DEFINER SET search_path = public
AS $$ SELECT c.id, c.user_id, c.text FROM chunks c WHERE NOT EXISTS
      (SELECT 1 FROM vectors v WHERE v.chunk_id = c.id AND v.model = wanted)
      ORDER BY c.id LIMIT most $$;

CREATE FUNCTION memoro_count_missing(wanted text) RETURNS TABLE (missing bigint, total bigint)
LANGUAGE sql SECURITY DEFINER SET search_path = public
AS $$ SELECT (SELECT count(*) FROM chunks c WHERE NOT EXISTS
        (SELECT 1 FROM vectors v WHERE v.chunk_id = c.id AND v.model = wanted)),
      (SELECT count(*) FROM chunks) $$;

CREATE FUNCTION memoro_chunk_user(chunk bigint) RETURNS text
LANGUAGE sql SECURITY DEFINER SET search_path = public
AS $$ SELECT user_id FROM chunks WHERE id = chunk $$;
