-- The personal memory block (one row per user, M1/M6) and its audit log (M9),
-- with row-level security as a second wall between users (D2): every query
-- sees only the rows of the user set for its transaction (memoro.user_id).
CREATE TABLE memory_blocks (
    user_id    text PRIMARY KEY,
    text       text NOT NULL CHECK (length(text) > 0),
    updated_at timestamptz NOT NULL,
    updated_by text NOT NULL CHECK (updated_by IN ('model', 'user'))
);

CREATE TABLE memory_audit (
    id            bigserial PRIMARY KEY,
    user_id       text NOT NULL,
    at            timestamptz NOT NULL,
    writer        text NOT NULL CHECK (writer IN ('model', 'user')),
    operation     text NOT NULL CHECK (operation IN ('write', 'delete')),
    removed_lines jsonb NOT NULL DEFAULT '[]',
    added_lines   jsonb NOT NULL DEFAULT '[]',
    removed_count integer NOT NULL,
    added_count   integer NOT NULL
);
CREATE INDEX memory_audit_user ON memory_audit (user_id, id);

ALTER TABLE memory_blocks ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_blocks FORCE ROW LEVEL SECURITY;
CREATE POLICY one_user ON memory_blocks
    USING (user_id = current_setting('memoro.user_id', true))
    WITH CHECK (user_id = current_setting('memoro.user_id', true));

ALTER TABLE memory_audit ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_audit FORCE ROW LEVEL SECURITY;
CREATE POLICY one_user ON memory_audit
    USING (user_id = current_setting('memoro.user_id', true))
    WITH CHECK (user_id = current_setting('memoro.user_id', true));
