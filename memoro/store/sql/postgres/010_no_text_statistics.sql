-- ANALYZE keeps samples of column values in pg_statistic (most common
-- values, histograms), where text a user deleted would outlive the rows it
-- came from. No plan of memoro's depends on the distribution of text, so no
-- column that holds what a user wrote or named is sampled at all.
ALTER TABLE memory_blocks ALTER COLUMN text SET STATISTICS 0;
ALTER TABLE memory_audit ALTER COLUMN removed_lines SET STATISTICS 0;
ALTER TABLE memory_audit ALTER COLUMN added_lines SET STATISTICS 0;
ALTER TABLE conversations ALTER COLUMN id SET STATISTICS 0;
ALTER TABLE conversations ALTER COLUMN title SET STATISTICS 0;
ALTER TABLE turns ALTER COLUMN conversation_id SET STATISTICS 0;
ALTER TABLE turns ALTER COLUMN question SET STATISTICS 0;
ALTER TABLE turns ALTER COLUMN answer SET STATISTICS 0;
ALTER TABLE turns ALTER COLUMN key SET STATISTICS 0;
ALTER TABLE chunks ALTER COLUMN text SET STATISTICS 0;
ALTER TABLE imports ALTER COLUMN file_name SET STATISTICS 0;
ALTER TABLE imports ALTER COLUMN error SET STATISTICS 0;
ALTER TABLE imports ALTER COLUMN report SET STATISTICS 0;
ALTER TABLE import_parts ALTER COLUMN data SET STATISTICS 0;
ALTER TABLE jobs ALTER COLUMN payload SET STATISTICS 0;
ALTER TABLE jobs ALTER COLUMN last_error SET STATISTICS 0;
