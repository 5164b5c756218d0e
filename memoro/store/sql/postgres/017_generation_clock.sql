-- A user's generation (history_users.generation) tells in-memory search
-- indexes on every server and saved copies that they are stale. It is now
-- taken from one sequence that only moves forward, and every user with
-- chunks has one, so a user erased and then back (the same id, nothing left
-- in between) never takes a generation an index of their old rows was built
-- at. The function lets every role draw from it without a grant.
CREATE SEQUENCE memoro_generations;
CREATE FUNCTION memoro_next_generation() RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = public
AS $$ SELECT nextval('memoro_generations') $$;

SELECT setval('memoro_generations', (SELECT coalesce(max(generation), 0) + 1 FROM history_users));
ALTER TABLE chunks NO FORCE ROW LEVEL SECURITY;
INSERT INTO history_users (user_id) SELECT DISTINCT user_id FROM chunks
    ON CONFLICT (user_id) DO NOTHING;
ALTER TABLE chunks FORCE ROW LEVEL SECURITY;
UPDATE history_users SET generation = currval('memoro_generations') WHERE generation = 0;
