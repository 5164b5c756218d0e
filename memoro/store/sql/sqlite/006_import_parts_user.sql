-- Every row names its user, as on PostgreSQL: an upload's parts are read and
-- deleted by import and user together.
ALTER TABLE import_parts ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
UPDATE import_parts SET user_id = (SELECT i.user_id FROM imports i WHERE i.id = import_parts.import_id);
