#!/bin/bash
# The part of the official postgres image's entrypoint that compose.yaml
# relies on, for the test image (postgres.Containerfile): on an empty PGDATA,
# initdb with POSTGRES_USER/POSTGRES_PASSWORD (password auth from other
# hosts), create POSTGRES_DB and run /docker-entrypoint-initdb.d/*.sh and
# *.sql against it; then run postgres on every address. Any other command
# (psql, pg_isready…) runs as it is.
set -Eeo pipefail
if [ "${1:-postgres}" != postgres ]; then
    exec "$@"
fi
shift || true
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
    mkdir -p "$PGDATA" && chmod 0700 "$PGDATA"
    initdb --username="$user" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") \
        --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 \
        -D "$PGDATA" >/dev/null
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    export POSTGRES_USER=$user POSTGRES_DB=$db
    if [ "$db" != postgres ]; then
        psql -v ON_ERROR_STOP=1 --username "$user" --dbname postgres \
            -c "CREATE DATABASE \"$db\"" >/dev/null
    fi
    for f in /docker-entrypoint-initdb.d/*; do
        case "$f" in
            *.sh) echo "running $f"; if [ -x "$f" ]; then "$f"; else . "$f"; fi ;;
            *.sql) echo "running $f"; psql -v ON_ERROR_STOP=1 --username "$user" --dbname "$db" -f "$f" ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    echo "PostgreSQL init process complete; ready for start up."
fi
exec postgres -c listen_addresses='*' "$@"
