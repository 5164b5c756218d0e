-- The queue at a glance for monitoring (/metrics): counts and ages by
-- status, never a user, a payload or an error text. SECURITY DEFINER, so a
-- server on the app role — whose policy shows it only its user's jobs —
-- still reports the whole queue; anyone may run it.
CREATE FUNCTION memoro_queue_stats(
    OUT status text,
    OUT jobs bigint,
    OUT oldest_seconds double precision,
    OUT oldest_live_seconds double precision
) RETURNS SETOF record
LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT
AS $$
    SELECT j.status, count(*),
           extract(epoch FROM now() - min(j.created_at))::double precision,
           extract(epoch FROM now() - min(j.created_at)
                   FILTER (WHERE j.lane = 0 AND j.kind = 'index_turn'))::double precision
    FROM jobs j
    GROUP BY j.status
$$;
