-- The block in one statement (the prompt fetch, on every turn of every chat):
-- the user is set and the row read inside one call, so a server reads it in
-- a single round trip instead of BEGIN, set_config, SELECT and COMMIT. The
-- function runs with its caller's rights: the same forced policy decides.
CREATE FUNCTION memoro_read_block(wanted text) RETURNS SETOF memory_blocks
LANGUAGE plpgsql SET search_path = public
AS $$
BEGIN
    PERFORM set_config('memoro.user_id', wanted, true);
    RETURN QUERY SELECT * FROM memory_blocks WHERE user_id = wanted;
END $$;
