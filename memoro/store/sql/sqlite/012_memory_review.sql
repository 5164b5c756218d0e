-- Memory review (M12): a model rereads a user's block and recent turns and
-- proposes a better block. The proposal is the user's data (exported,
-- erased, cleared with the block); review_state is where the user's reviews
-- stand: turns up to reviewed_to are settled, new_turns arrived since the
-- last review ran, proposed_at says a proposal waits, and running_by holds
-- the review now running, if any, until running_until (one review of a
-- user at a time, in any process).
CREATE TABLE memory_proposals (
    user_id       TEXT PRIMARY KEY,
    text          TEXT NOT NULL CHECK (length(text) > 0),
    based_on      TEXT NOT NULL,          -- the ETag of the block it was made from
    removed_lines TEXT NOT NULL,          -- JSON: the lines it removes from that block
    added_lines   TEXT NOT NULL,          -- JSON: the lines it adds
    created_at    TEXT NOT NULL,
    turns_read    INTEGER NOT NULL,
    turns_unread  INTEGER NOT NULL,
    up_to_turn    INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE review_state (
    user_id       TEXT PRIMARY KEY,
    reviewed_to   INTEGER NOT NULL DEFAULT 0,
    new_turns     INTEGER NOT NULL DEFAULT 0,
    reviewed_at   TEXT,
    failures      INTEGER NOT NULL DEFAULT 0,    -- failed reviews in a row
    proposed_at   TEXT,                          -- set while a proposal waits
    retry_at      TEXT,
    running_by    TEXT,
    running_until TEXT
) WITHOUT ROWID;
CREATE INDEX review_state_due ON review_state (new_turns);

-- every user who has turns is due once enough have arrived
INSERT INTO review_state (user_id, new_turns) SELECT user_id, count(*) FROM turns GROUP BY user_id;

-- a write a review proposed says so
ALTER TABLE memory_audit ADD COLUMN source TEXT CHECK (source IN ('review'));
