-- Three roles (docs/deploy.md): the owner migrates; members of memoro_worker
-- (the role `memoro worker`, `memoro status` and `memoro reindex` connect
-- as) work across users; any other role — the app role that serves
-- requests — sees only the user its transaction names, in every table, and
-- cannot read across users through any of memoro's functions.
--
-- memoro_worker is a role the administrator creates (a login role, or a group
-- granted to the worker's login); until it exists nobody is a worker.

CREATE FUNCTION memoro_is_worker() RETURNS boolean
LANGUAGE sql STABLE
AS $$ SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = 'memoro_worker'
                     AND pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')) $$;

-- The job queue and the per-user keyword statistics had no policy: the app
-- role now sees only its user's rows (it queues that user's jobs and keeps
-- that user's statistics); a worker sees every row. Not FORCEd, so the owner
-- still migrates and backfills them.
DO $$
DECLARE name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['jobs', 'history_users'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', name);
        EXECUTE format('CREATE POLICY one_user_or_worker ON %I'
            ' USING ((SELECT memoro_is_worker())'
            ' OR user_id = current_setting(''memoro.user_id'', true))'
            ' WITH CHECK ((SELECT memoro_is_worker())'
            ' OR user_id = current_setting(''memoro.user_id'', true))', name);
    END LOOP;
END $$;

-- The maintenance functions visit every user in turn, setting memoro.user_id
-- for each: only a worker may run them.
CREATE FUNCTION memoro_require_worker() RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    IF NOT memoro_is_worker() THEN
        RAISE EXCEPTION 'role % is not a member of memoro_worker, which maintenance across users needs',
            current_user USING ERRCODE = 'insufficient_privilege';
    END IF;
END $$;

CREATE OR REPLACE FUNCTION memoro_vector_models() RETURNS TABLE (model text, n bigint)
LANGUAGE plpgsql SET search_path = public
AS $$
DECLARE
    previous text := current_setting('memoro.user_id', true);
    u text;
BEGIN
    PERFORM memoro_require_worker();
    FOR u IN SELECT h.user_id FROM history_users h ORDER BY h.user_id LOOP
        PERFORM set_config('memoro.user_id', u, true);
        RETURN QUERY SELECT v.model, count(*) FROM vectors v WHERE v.user_id = u GROUP BY v.model;
    END LOOP;
    PERFORM set_config('memoro.user_id', coalesce(previous, ''), true);
END $$;

CREATE OR REPLACE FUNCTION memoro_chunks_missing(wanted text, most integer)
RETURNS TABLE (id bigint, user_id text, text text)
LANGUAGE plpgsql SET search_path = public
AS $$
DECLARE
    previous text := current_setting('memoro.user_id', true);
    u text;
    left_over integer := most;
    found integer;
BEGIN
    PERFORM memoro_require_worker();
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

CREATE OR REPLACE FUNCTION memoro_count_missing(wanted text)
RETURNS TABLE (missing bigint, total bigint)
LANGUAGE plpgsql SET search_path = public
AS $$
DECLARE
    previous text := current_setting('memoro.user_id', true);
    u text;
    m bigint;
    t bigint;
BEGIN
    PERFORM memoro_require_worker();
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
