-- The worker and app roles' rights on memoro's tables (docs/deploy.md,
-- section 2), run as memoro_owner after every `memoro migrate`: tables a
-- migration added get them too. Safe to run again.
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO memoro_worker, memoro_app;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO memoro_worker, memoro_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
  GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO memoro_worker, memoro_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE ON SEQUENCES TO memoro_worker, memoro_app;
-- PostgreSQL 17 and later: memoro may VACUUM right after a deletion
SELECT current_setting('server_version_num')::int >= 170000 AS has_maintain \gset
\if :has_maintain
GRANT MAINTAIN ON ALL TABLES IN SCHEMA public TO memoro_worker;
GRANT MAINTAIN ON memory_blocks, memory_audit, memory_proposals TO memoro_app;
\endif
