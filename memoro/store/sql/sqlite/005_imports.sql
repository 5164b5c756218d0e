-- Imports uploaded over HTTP: the file, in parts, waits in the database for
-- a worker (so it survives a restart and any worker can read it), and the
-- import's progress and report stay for the user to read.
CREATE TABLE imports (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL,
    file_name   TEXT NOT NULL,
    format      TEXT NOT NULL,
    size        INTEGER NOT NULL DEFAULT 0,
    status      TEXT NOT NULL
                CHECK (status IN ('uploading', 'queued', 'running', 'done', 'failed')),
    read_bytes  INTEGER NOT NULL DEFAULT 0,
    report      TEXT,                 -- JSON, when done
    error       TEXT,
    created_at  TEXT NOT NULL,
    finished_at TEXT
);
CREATE INDEX imports_user ON imports (user_id, created_at);

CREATE TABLE import_parts (
    import_id TEXT NOT NULL REFERENCES imports (id),
    part      INTEGER NOT NULL,
    data      BLOB NOT NULL,
    PRIMARY KEY (import_id, part)
) WITHOUT ROWID;
