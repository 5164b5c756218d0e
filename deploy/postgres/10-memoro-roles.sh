#!/bin/sh
# memoro's extension, roles and schema rights (docs/deploy.md, section 2).
# The postgres image runs this once, as its superuser, when it initializes an
# empty data directory (mounted into /docker-entrypoint-initdb.d by
# compose.yaml). None of the roles is a superuser or bypasses row-level
# security; the passwords come from the environment.
set -e
: "${MEMORO_OWNER_PASSWORD:?set MEMORO_OWNER_PASSWORD}"
: "${MEMORO_WORKER_PASSWORD:?set MEMORO_WORKER_PASSWORD}"
: "${MEMORO_APP_PASSWORD:?set MEMORO_APP_PASSWORD}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v owner_password="$MEMORO_OWNER_PASSWORD" \
    -v worker_password="$MEMORO_WORKER_PASSWORD" \
    -v app_password="$MEMORO_APP_PASSWORD" <<'SQL'
CREATE EXTENSION IF NOT EXISTS vector;
CREATE ROLE memoro_owner  LOGIN PASSWORD :'owner_password'  NOSUPERUSER NOBYPASSRLS;
CREATE ROLE memoro_worker LOGIN PASSWORD :'worker_password' NOSUPERUSER NOBYPASSRLS;
CREATE ROLE memoro_app    LOGIN PASSWORD :'app_password'    NOSUPERUSER NOBYPASSRLS;
GRANT CREATE, USAGE ON SCHEMA public TO memoro_owner;
GRANT USAGE ON SCHEMA public TO memoro_worker, memoro_app;
SQL
