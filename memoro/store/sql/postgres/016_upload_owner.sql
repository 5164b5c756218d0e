-- An upload's parts name their upload together with its user: a foreign key
-- is checked without row-level security, so one naming the upload alone let
-- a role that may insert parts attach them to another user's upload (whose
-- random id it had to know). Now the upload must be the inserting user's own.
ALTER TABLE imports ADD UNIQUE (user_id, id);
ALTER TABLE import_parts DROP CONSTRAINT import_parts_import_id_fkey;
ALTER TABLE import_parts ADD FOREIGN KEY (user_id, import_id) REFERENCES imports (user_id, id);
