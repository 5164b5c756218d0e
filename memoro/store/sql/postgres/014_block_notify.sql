-- Every change to a block, by whichever server, worker or SQL session,
-- announces itself at commit on the channel memoro_blocks, so servers that
-- keep blocks in memory for the prompt fetch drop the user's copy
-- (memoro.store.postgres.blocks_cache). The payload is a digest of the
-- user's id, not the id: any session may LISTEN. A TRUNCATE announces '*'.
CREATE FUNCTION memoro_block_changed() RETURNS trigger
LANGUAGE plpgsql SET search_path = public
AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('memoro_blocks', '*');
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        PERFORM pg_notify('memoro_blocks', encode(sha256(convert_to(OLD.user_id, 'UTF8')), 'hex'));
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM pg_notify('memoro_blocks', encode(sha256(convert_to(NEW.user_id, 'UTF8')), 'hex'));
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_blocks_changed AFTER INSERT OR UPDATE OR DELETE ON memory_blocks
    FOR EACH ROW EXECUTE FUNCTION memoro_block_changed();
CREATE TRIGGER memory_blocks_emptied AFTER TRUNCATE ON memory_blocks
    FOR EACH STATEMENT EXECUTE FUNCTION memoro_block_changed();
