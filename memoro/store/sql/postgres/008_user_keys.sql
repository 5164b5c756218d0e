-- The user in every key of the large tables (turns, chunks, vectors; postings
-- and conversations already have it): a table hash-partitioned by user_id,
-- or distributed by user_id with Citus, needs its primary key, unique keys
-- and foreign keys to hold the partition column. Lookups by id alone keep an
-- index of their own.
ALTER TABLE vectors DROP CONSTRAINT vectors_chunk_id_fkey;
ALTER TABLE chunks DROP CONSTRAINT chunks_turn_id_fkey;

ALTER TABLE turns DROP CONSTRAINT turns_pkey;
ALTER TABLE turns ADD PRIMARY KEY (user_id, id);
CREATE INDEX turns_id ON turns (id);

ALTER TABLE chunks DROP CONSTRAINT chunks_pkey;
ALTER TABLE chunks ADD PRIMARY KEY (user_id, id);
CREATE INDEX chunks_id ON chunks (id);
ALTER TABLE chunks DROP CONSTRAINT chunks_turn_id_ordinal_key;
ALTER TABLE chunks ADD UNIQUE (user_id, turn_id, ordinal);
ALTER TABLE chunks ADD FOREIGN KEY (user_id, turn_id) REFERENCES turns (user_id, id);

ALTER TABLE vectors DROP CONSTRAINT vectors_pkey;
ALTER TABLE vectors ADD PRIMARY KEY (user_id, id);
ALTER TABLE vectors ADD FOREIGN KEY (user_id, chunk_id) REFERENCES chunks (user_id, id);
