-- The personal memory block (one row per user, M1/M6) and its audit log (M9).
CREATE TABLE memory_blocks (
    user_id    TEXT PRIMARY KEY,
    text       TEXT NOT NULL CHECK (length(text) > 0),
    updated_at TEXT NOT NULL,
    updated_by TEXT NOT NULL CHECK (updated_by IN ('model', 'user'))
) WITHOUT ROWID;

CREATE TABLE memory_audit (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id       TEXT NOT NULL,
    at            TEXT NOT NULL,
    writer        TEXT NOT NULL CHECK (writer IN ('model', 'user')),
    operation     TEXT NOT NULL CHECK (operation IN ('write', 'delete')),
    removed_lines TEXT NOT NULL DEFAULT '[]',
    added_lines   TEXT NOT NULL DEFAULT '[]',
    removed_count INTEGER NOT NULL,
    added_count   INTEGER NOT NULL
);

CREATE INDEX memory_audit_user ON memory_audit (user_id, id);
