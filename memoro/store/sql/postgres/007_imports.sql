-- Imports uploaded over HTTP: the file, in parts, waits in the database for
-- a worker (so it survives a restart and any worker can read it), and the
-- import's progress and report stay for the user to read. Both tables are
-- one user's rows, behind the same forced policy as the user's turns.
CREATE TABLE imports (
    id          text PRIMARY KEY,
    user_id     text NOT NULL,
    file_name   text NOT NULL,
    format      text NOT NULL,
    size        bigint NOT NULL DEFAULT 0,
    status      text NOT NULL
                CHECK (status IN ('uploading', 'queued', 'running', 'done', 'failed')),
    read_bytes  bigint NOT NULL DEFAULT 0,
    report      jsonb,
    error       text,
    created_at  timestamptz NOT NULL,
    finished_at timestamptz
);
CREATE INDEX imports_user ON imports (user_id, created_at);

CREATE TABLE import_parts (
    import_id text NOT NULL REFERENCES imports (id),
    user_id   text NOT NULL,
    part      integer NOT NULL,
    data      bytea NOT NULL,
    PRIMARY KEY (import_id, part)
);

DO $$
DECLARE name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['imports', 'import_parts'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', name);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', name);
        EXECUTE format('CREATE POLICY one_user ON %I'
            ' USING (user_id = current_setting(''memoro.user_id'', true))'
            ' WITH CHECK (user_id = current_setting(''memoro.user_id'', true))', name);
    END LOOP;
END $$;
