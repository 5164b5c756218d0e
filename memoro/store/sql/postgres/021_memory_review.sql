-- Memory review (M12): a model rereads a user's block and recent turns and
-- proposes a better block. The proposal is the user's data (exported,
-- erased, cleared with the block), behind the same forced policy as the
-- block; review_state is where the user's reviews stand — turns up to
-- reviewed_to are settled, new_turns arrived since the last review ran,
-- proposed_at says a proposal waits, and running_by holds the review now
-- running, if any, until running_until (one review of a user at a time,
-- across every server and worker). Like the job
-- queue, it is the app role's for its user and a worker's for every user
-- (the worker finds the users due for a review there).
CREATE TABLE memory_proposals (
    user_id       text PRIMARY KEY,
    text          text NOT NULL CHECK (length(text) > 0),
    based_on      text NOT NULL,
    removed_lines jsonb NOT NULL,
    added_lines   jsonb NOT NULL,
    created_at    timestamptz NOT NULL,
    turns_read    integer NOT NULL,
    turns_unread  integer NOT NULL,
    up_to_turn    bigint NOT NULL
);
ALTER TABLE memory_proposals ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_proposals FORCE ROW LEVEL SECURITY;
CREATE POLICY one_user ON memory_proposals
    USING (user_id = current_setting('memoro.user_id', true))
    WITH CHECK (user_id = current_setting('memoro.user_id', true));
-- no sample of what a user's proposal says outlives it (migration 10)
ALTER TABLE memory_proposals ALTER COLUMN text SET STATISTICS 0;
ALTER TABLE memory_proposals ALTER COLUMN removed_lines SET STATISTICS 0;
ALTER TABLE memory_proposals ALTER COLUMN added_lines SET STATISTICS 0;

CREATE TABLE review_state (
    user_id       text PRIMARY KEY,
    reviewed_to   bigint NOT NULL DEFAULT 0,
    new_turns     integer NOT NULL DEFAULT 0,
    reviewed_at   timestamptz,
    failures      integer NOT NULL DEFAULT 0,
    proposed_at   timestamptz,
    retry_at      timestamptz,
    running_by    text,
    running_until timestamptz
);
CREATE INDEX review_state_due ON review_state (new_turns);
ALTER TABLE review_state ENABLE ROW LEVEL SECURITY;
CREATE POLICY one_user_or_worker ON review_state
    USING ((SELECT memoro_is_worker()) OR user_id = current_setting('memoro.user_id', true))
    WITH CHECK ((SELECT memoro_is_worker()) OR user_id = current_setting('memoro.user_id', true));

-- every user who has turns is due once enough have arrived
ALTER TABLE turns NO FORCE ROW LEVEL SECURITY;
INSERT INTO review_state (user_id, new_turns) SELECT user_id, count(*) FROM turns GROUP BY user_id;
ALTER TABLE turns FORCE ROW LEVEL SECURITY;

-- a write a review proposed says so
ALTER TABLE memory_audit ADD COLUMN source text CHECK (source IN ('review'));

-- Memory reviews at a glance for monitoring (memoro status, /metrics):
-- counts only, never a user or what a proposal says. SECURITY DEFINER, so a
-- server on the app role reports every user's, as memoro_queue_stats does.
CREATE FUNCTION memoro_review_stats(
    OUT proposals bigint,
    OUT reviewed_users bigint,
    OUT failing_users bigint,
    OUT failures bigint
) RETURNS record
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT
AS $$
    SELECT count(*) FILTER (WHERE r.proposed_at IS NOT NULL),
           count(*) FILTER (WHERE r.reviewed_at IS NOT NULL),
           count(*) FILTER (WHERE r.failures > 0),
           coalesce(sum(r.failures), 0)::bigint
    FROM review_state r
$$;
