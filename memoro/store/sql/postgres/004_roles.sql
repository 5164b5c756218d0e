-- Three roles (docs/deploy.md): the owner migrates; members of memoro_worker
-- (the role `memoro worker`, `memoro status` and `memoro reindex` connect
-- as) work across users; any other role — the app role that serves
-- requests — sees only the user its transaction names, in every table, and
-- cannot read across users through any of memoro's functions.
--
-- memoro_worker is a role the administrator creates (a login role, or a group
-- granted to the worker's login), best before migrating; until it exists
-- nobody is a worker (docs/deploy.md has the GRANT for one created later).

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
-- for each: only the owner and memoro_worker may run them (and through the
-- policy above, anyone else would find no user to visit but the one named).
REVOKE EXECUTE ON FUNCTION memoro_vector_models(), memoro_chunks_missing(text, integer),
    memoro_count_missing(text) FROM PUBLIC;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'memoro_worker') THEN
        GRANT EXECUTE ON FUNCTION memoro_vector_models(), memoro_chunks_missing(text, integer),
            memoro_count_missing(text) TO memoro_worker;
    END IF;
END $$;
