"""The PostgreSQL backend: the same contract as SQLite, with row-level
security as a second wall between users (past conversations and the queue
live in ``postgres_history.py``).

Every transaction sets ``memoro.user_id`` (SET LOCAL) before it touches a
user's rows, and every user-owned table has a forced policy on it, so a query
that forgot its user filter still sees only that user's rows — and with no
user set, none. memoro must connect as a role without BYPASSRLS (not a
superuser).

Needs ``pip install 'memoro[postgres]'`` (psycopg 3 with its pool).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from memoro.errors import ConfigError, MigrationError, StoreError

try:
    import psycopg
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ConfigError("PostgreSQL needs: pip install 'memoro[postgres]'") from exc

from memoro.history import terms
from memoro.models import AuditEntry, AuditRecord, Operation, StoredBlock, Writer
from memoro.store import migrations
from memoro.store.postgres_health import PgHealth
from memoro.store.postgres_history import PgHistory, insert_postings
from memoro.store.postgres_uploads import PgUploads

log = logging.getLogger("memoro.store")

POOL_TIMEOUT = 10.0
"""Seconds a request waits for a database connection before it fails."""


def migrate(url: str) -> None:
    """Apply the PostgreSQL migrations, once, under an advisory lock (run it
    as the role that owns memoro's tables)."""
    known = migrations.load("postgres")
    try:
        _apply(url, known)
    except psycopg.Error as exc:
        raise MigrationError(f"cannot migrate the PostgreSQL database: {exc}") from exc


def _apply(url: str, known: list[migrations.Migration]) -> None:
    with psycopg.connect(url, autocommit=False) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('memoro.migrate'))")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)"
        )
        applied = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
        if applied and max(applied) > len(known):
            raise MigrationError(
                f"the database has schema version {max(applied)}, newer than this memoro"
                f" knows ({len(known)}); upgrade memoro"
            )
        for migration in known:
            if migration.version not in applied:
                conn.execute(migration.sql.encode())
                if migration.name == "keywords":
                    _backfill_keywords(conn)
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (%s, %s, now())",
                    (migration.version, migration.name),
                )


_OWNED = ("conversations", "turns", "chunks", "postings", "vectors")


def _backfill_keywords(conn: psycopg.Connection[Any]) -> None:
    """Terms, postings and per-user statistics for chunks indexed before
    migration 3 (term ids are computed in Python, so SQL alone cannot); the
    vectors of deleted conversations go, as a deletion now does at once."""
    # The owner of FORCE'd tables is held by their policies; lift that for
    # this transaction only, so the backfill reads and writes every user.
    for table in _OWNED:
        conn.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
    rows = conn.execute(
        "SELECT c.id, c.user_id, c.text, cv.deleted_at IS NULL FROM chunks c"
        " JOIN turns t ON t.id = c.turn_id"
        " JOIN conversations cv ON cv.user_id = t.user_id AND cv.id = t.conversation_id"
    ).fetchall()
    for chunk_id, user_id, text, visible in rows:
        found = terms.chunk_terms(text)
        conn.execute(
            "UPDATE chunks SET terms = %s, length = %s WHERE id = %s",
            (found.ids.tolist(), found.length, chunk_id),
        )
        if visible:
            insert_postings(conn, user_id, chunk_id, found)
    conn.execute(
        "DELETE FROM vectors v USING chunks c, turns t, conversations cv"
        " WHERE v.chunk_id = c.id AND t.id = c.turn_id AND cv.user_id = t.user_id"
        " AND cv.id = t.conversation_id AND cv.deleted_at IS NOT NULL"
    )
    conn.execute(
        "INSERT INTO history_users SELECT c.user_id,"
        " count(*) FILTER (WHERE cv.deleted_at IS NULL),"
        " coalesce(sum(c.length) FILTER (WHERE cv.deleted_at IS NULL), 0)"
        " FROM chunks c JOIN turns t ON t.id = c.turn_id"
        " JOIN conversations cv ON cv.user_id = t.user_id AND cv.id = t.conversation_id"
        " GROUP BY c.user_id"
    )
    for table in _OWNED:
        conn.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")


def _block(row: dict[str, Any] | None) -> StoredBlock | None:
    if row is None:
        return None
    return StoredBlock(row["user_id"], row["text"], row["updated_at"], Writer(row["updated_by"]))


class _BlockTransaction:
    def __init__(self, conn: psycopg.Connection[dict[str, Any]], user_id: str) -> None:
        self._conn = conn
        self._user_id = user_id
        self.deleted = False

    def current(self) -> StoredBlock | None:
        row = self._conn.execute(
            "SELECT * FROM memory_blocks WHERE user_id = %s", (self._user_id,)
        ).fetchone()
        return _block(row)

    def put(self, text: str, audit: AuditRecord) -> StoredBlock:
        at = datetime.now(UTC)
        self._conn.execute(
            "INSERT INTO memory_blocks (user_id, text, updated_at, updated_by)"
            " VALUES (%s, %s, %s, %s) ON CONFLICT (user_id) DO UPDATE SET"
            " text = excluded.text, updated_at = excluded.updated_at,"
            " updated_by = excluded.updated_by",
            (self._user_id, text, at, audit.writer.value),
        )
        self._record(audit, at)
        return StoredBlock(self._user_id, text, at, audit.writer)

    def delete(self, audit: AuditRecord) -> None:
        self._conn.execute("DELETE FROM memory_blocks WHERE user_id = %s", (self._user_id,))
        self._conn.execute(
            "UPDATE memory_audit SET removed_lines = '[]', added_lines = '[]' WHERE user_id = %s",
            (self._user_id,),
        )
        self._record(audit, datetime.now(UTC))
        self.deleted = True

    def restore(self, block: StoredBlock | None, audit: Sequence[AuditEntry]) -> bool:
        if (
            self.current() is not None
            or self._conn.execute(
                "SELECT 1 FROM memory_audit WHERE user_id = %s LIMIT 1", (self._user_id,)
            ).fetchone()
        ):
            return False
        if block is not None:
            self._conn.execute(
                "INSERT INTO memory_blocks (user_id, text, updated_at, updated_by)"
                " VALUES (%s, %s, %s, %s)",
                (self._user_id, block.text, block.updated_at, block.updated_by.value),
            )
        for entry in audit:
            self._record(entry.record(), entry.at)
        return True

    def _record(self, audit: AuditRecord, at: datetime) -> None:
        self._conn.execute(
            "INSERT INTO memory_audit (user_id, at, writer, operation, removed_lines,"
            " added_lines, removed_count, added_count)"
            " VALUES (%s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s)",
            (
                self._user_id,
                at,
                audit.writer.value,
                audit.operation.value,
                json.dumps(list(audit.removed_lines), ensure_ascii=False),
                json.dumps(list(audit.added_lines), ensure_ascii=False),
                audit.removed_count,
                audit.added_count,
            ),
        )


class PostgresStore(PgHistory, PgUploads, PgHealth):
    """The Store on PostgreSQL."""

    def __init__(
        self, url: str, *, min_size: int = 1, max_size: int = 10, timeout: float = POOL_TIMEOUT
    ) -> None:
        self.url = url
        try:
            self.pool: ConnectionPool[psycopg.Connection[dict[str, Any]]] = ConnectionPool(
                url,
                min_size=min_size,
                max_size=max_size,
                kwargs={"row_factory": dict_row, "autocommit": False},
                # a connection broken by a database restart or failover is
                # replaced before use, not handed to a request
                check=ConnectionPool.check_connection,
                timeout=timeout,
                open=True,
            )
            self.pool.wait(timeout=30)
            with self.pool.connection() as conn:
                role = conn.execute(
                    "SELECT rolname, rolsuper OR rolbypassrls AS bypass FROM pg_roles"
                    " WHERE rolname = current_user"
                ).fetchone()
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to PostgreSQL: {exc}") from exc
        self._check_schema()
        with self.connection() as conn:
            found = conn.execute("SELECT memoro_is_worker() AS worker").fetchone()
        self.runs_jobs = bool(found and found["worker"])
        """Whether this role may run the job queue and maintenance across
        users (a member of memoro_worker, docs/deploy.md)."""
        if role and role["bypass"]:
            log.warning(
                "memoro connects to PostgreSQL as %r, which bypasses row-level security:"
                " the second wall between users is down; connect as a role without"
                " SUPERUSER and BYPASSRLS (docs/deploy.md)",
                role["rolname"],
            )

    def _check_schema(self) -> None:
        """Migrate a database that has no memoro tables yet (when this role
        may); refuse one whose schema is older or newer than this memoro."""
        known = len(migrations.load("postgres"))
        try:
            with self.pool.connection() as conn:
                present = conn.execute(
                    "SELECT to_regclass('schema_migrations') IS NOT NULL AS present"
                ).fetchone()
                found = None
                if present and present["present"]:
                    found = conn.execute(
                        "SELECT coalesce(max(version), 0) AS v FROM schema_migrations"
                    ).fetchone()
                version = found["v"] if found else None
        except psycopg.Error as exc:
            self.pool.close()
            raise StoreError(f"cannot read memoro's schema version: {exc}") from exc
        if version is None:
            try:
                migrate(self.url)
            except MigrationError as exc:
                self.pool.close()
                raise MigrationError(
                    "the database has no memoro tables and this role cannot create them:"
                    f" run `memoro migrate` as the role that should own them ({exc})"
                ) from exc
        elif version != known:
            self.pool.close()
            raise MigrationError(
                f"the database has schema version {version} and this memoro needs {known}: "
                + (
                    "run `memoro migrate` as the role that owns the tables"
                    if version < known
                    else "upgrade memoro"
                )
            )

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        """A pooled connection; an unreachable database is a StoreError
        (HTTP 503, a one-line CLI error), never a driver traceback."""
        try:
            with self.pool.connection() as conn:
                yield conn
        except psycopg.OperationalError as exc:
            raise StoreError(f"PostgreSQL is unavailable: {exc}") from exc

    @contextmanager
    def transaction(self, user_id: str) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        """A transaction that sees only ``user_id``'s rows."""
        with self.connection() as conn, conn.transaction():
            conn.execute("SELECT set_config('memoro.user_id', %s, true)", (user_id,))
            yield conn

    def read_block(self, user_id: str) -> StoredBlock | None:
        with self.transaction(user_id) as conn:
            row = conn.execute(
                "SELECT * FROM memory_blocks WHERE user_id = %s", (user_id,)
            ).fetchone()
        return _block(row)

    @contextmanager
    def block_transaction(self, user_id: str) -> Iterator[_BlockTransaction]:
        with self.transaction(user_id) as conn:
            # serializes writers of one user even while the row does not exist
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (user_id,))
            tx = _BlockTransaction(conn, user_id)
            yield tx
        if tx.deleted:
            self.vacuum(("memory_blocks", "memory_audit"))

    def list_audit(self, user_id: str, *, limit: int = 100) -> list[AuditEntry]:
        with self.transaction(user_id) as conn:
            rows = conn.execute(
                "SELECT * FROM memory_audit WHERE user_id = %s ORDER BY id DESC LIMIT %s",
                (user_id, limit),
            ).fetchall()
        return [
            AuditEntry(
                id=row["id"],
                user_id=row["user_id"],
                at=row["at"],
                writer=Writer(row["writer"]),
                operation=Operation(row["operation"]),
                removed_lines=tuple(row["removed_lines"]),
                added_lines=tuple(row["added_lines"]),
                removed_count=row["removed_count"],
                added_count=row["added_count"],
            )
            for row in rows
        ]

    def close(self) -> None:
        self.pool.close()
