-- Past conversations (C1–C8): conversations, finished turns, their chunks
-- with their keyword terms, the vectors, and the durable job queue.

CREATE TABLE conversations (
    user_id    TEXT NOT NULL,
    id         TEXT NOT NULL,
    created_at TEXT NOT NULL,
    deleted_at TEXT,                -- set on delete: excluded from search at once (C6)
    PRIMARY KEY (user_id, id)
) WITHOUT ROWID;

CREATE TABLE turns (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id         TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    seq             INTEGER NOT NULL,   -- order within the conversation
    question        TEXT NOT NULL,
    answer          TEXT NOT NULL,
    at              TEXT NOT NULL,
    key             TEXT,               -- caller's idempotency key (imports)
    indexed_at      TEXT,
    FOREIGN KEY (user_id, conversation_id) REFERENCES conversations (user_id, id),
    UNIQUE (user_id, conversation_id, seq),
    UNIQUE (user_id, key)
);

CREATE TABLE chunks (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id         INTEGER NOT NULL REFERENCES turns (id),
    user_id         TEXT NOT NULL,
    ordinal         INTEGER NOT NULL,
    text            TEXT NOT NULL,
    terms           BLOB NOT NULL,      -- keyword terms and counts (memoro.history.terms)
    length          INTEGER NOT NULL,   -- how many terms, for BM25
    UNIQUE (turn_id, ordinal)
);
CREATE INDEX chunks_user ON chunks (user_id, turn_id);

CREATE TABLE vectors (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_id  INTEGER NOT NULL REFERENCES chunks (id),
    user_id   TEXT NOT NULL,
    model     TEXT NOT NULL,            -- the model that made it (C8)
    part      INTEGER NOT NULL,         -- several per chunk when the model reads less (C7)
    embedding BLOB NOT NULL             -- float32, little-endian
);
CREATE INDEX vectors_user ON vectors (user_id, model, id);
CREATE INDEX vectors_chunk ON vectors (chunk_id);

-- Bumped whenever a user's chunks or vectors are removed or hidden, so the
-- in-memory keyword and vector indexes know to reload.
CREATE TABLE history_state (
    user_id       TEXT PRIMARY KEY,
    removed_gen   INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    kind         TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    payload      TEXT NOT NULL,        -- JSON of ids only, never user text
    status       TEXT NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'running', 'failed')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    run_after    TEXT NOT NULL,
    locked_by    TEXT,
    locked_until TEXT,
    last_error   TEXT,
    created_at   TEXT NOT NULL
);
CREATE INDEX jobs_ready ON jobs (status, id);
