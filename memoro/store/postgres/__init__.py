"""The PostgreSQL backend: the same contract as SQLite, with row-level
security as a second wall between users.

Every transaction sets ``memoro.user_id`` (SET LOCAL) before it touches a
user's rows, and every user-owned table has a forced policy on it, so a query
that forgot its user filter still sees only that user's rows — and with no
user set, none. memoro must connect as a role without BYPASSRLS (not a
superuser).

Needs ``pip install 'memoro[postgres]'`` (psycopg 3 with its pool).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from memoro.errors import ConfigError, DiskFull, MigrationError, StoreError

try:
    import psycopg
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ConfigError("PostgreSQL needs: pip install 'memoro[postgres]'") from exc

from memoro.models import StoredBlock, UserDeletion
from memoro.store import migrations
from memoro.store.base import Known, Store
from memoro.store.blocks import SqlBlocks, SqlBlockTransaction, block_from_row
from memoro.store.dialect import Conn
from memoro.store.memory import budget
from memoro.store.memory.source import Changes, Since
from memoro.store.postgres._db import ALIVE, JOBS_CHANNEL, PG, PgConn, migrate, one_line
from memoro.store.postgres.blocks_cache import BlockCache
from memoro.store.postgres.health import PgHealth
from memoro.store.postgres.history import PgHistory
from memoro.store.postgres.jobs import PgJobs
from memoro.store.postgres.search import PgSearch
from memoro.store.postgres.source import PgSnapshot, changes, in_one_round_trip, snapshot
from memoro.store.reviews import SqlReviews
from memoro.store.uploads import SqlUploads
from memoro.store.users import SqlUsers

log = logging.getLogger("memoro.store")

POOL_TIMEOUT = 10.0
"""Seconds a request waits for a database connection before it fails."""
CONNECT_TIMEOUT = int(ALIVE["connect_timeout"])
"""Seconds opening the store, or the pool, waits for a connection (a host
that does not answer at all)."""
CLOSE_TIMEOUT = CONNECT_TIMEOUT + 2.0
"""Seconds closing waits for the pool's threads: a connection attempt under
way ends within CONNECT_TIMEOUT, and then they stop."""


def _reachable(url: str) -> None:
    """Connect once, or raise StoreError saying why in one line."""
    try:
        with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT):
            pass
    except psycopg.Error as exc:
        raise StoreError(f"cannot connect to PostgreSQL: {one_line(exc)}") from None


class PostgresStore(
    SqlBlocks, SqlReviews, PgHistory, PgSearch, PgJobs, SqlUploads, SqlUsers, PgHealth, Store
):
    """The Store on PostgreSQL: a pool of connections, each transaction
    scoped to one user by row-level security."""

    dialect = PG

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = POOL_TIMEOUT,
        cache_mb: int = budget.DEFAULT_MB,
    ) -> None:
        self.url = url
        _reachable(url)  # one clear error at once, before a pool retries and logs for 30 s
        self.blocks = BlockCache(url)
        self._open_indexes(self._snapshot, cache_mb, self._keep_index, self._changes_since)
        try:
            self.pool: ConnectionPool[psycopg.Connection[dict[str, Any]]] = ConnectionPool(
                url,
                min_size=min_size,
                max_size=max_size,
                kwargs={"row_factory": dict_row, "autocommit": False, **ALIVE},
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
        known = migrations.count("postgres")
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
        except psycopg.errors.DiskFull as exc:
            raise DiskFull(
                "the disk of the PostgreSQL database is full: nothing was stored (free some space)"
            ) from exc
        except psycopg.OperationalError as exc:
            raise StoreError(f"PostgreSQL is unavailable: {exc}") from exc

    @contextmanager
    def transaction(self, user_id: str) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        """A transaction that sees only ``user_id``'s rows."""
        with self.connection() as conn, conn.transaction():
            conn.execute("SELECT set_config('memoro.user_id', %s, true)", (user_id,))
            yield conn

    def read_block(self, user_id: str) -> StoredBlock | None:
        # one statement in its own implicit transaction (the prompt fetch's
        # read): one round trip after the pool's check, where a transaction
        # takes four (migration 11)
        with self.connection() as conn:
            conn.autocommit = True
            try:
                row = conn.execute("SELECT * FROM memoro_read_block(%s)", (user_id,)).fetchone()
            finally:
                conn.autocommit = False
        return block_from_row(PG, row)

    def prompt_block(self, user_id: str) -> StoredBlock | None:
        known = self.blocks.get(user_id)
        return known.block if known else self.blocks.read(user_id, self.read_block)

    def prompt_block_now(self, user_id: str) -> Known | None:
        return self.blocks.get(user_id)

    @contextmanager
    def block_transaction(
        self, user_id: str, *, epoch: int | None = None
    ) -> Iterator[SqlBlockTransaction]:
        try:
            with super().block_transaction(user_id, epoch=epoch) as tx:
                yield tx
        finally:  # after the commit: this process's next fetch reads it
            self.blocks.changed(user_id)

    def delete_user(self, user_id: str) -> UserDeletion:
        try:
            return super().delete_user(user_id)
        finally:  # after the commit: this process's next fetch reads it
            self.blocks.changed(user_id)

    @contextmanager
    def _snapshot(self, user_id: str) -> Iterator[PgSnapshot]:
        """One read-only snapshot of ``user_id``'s rows (the in-memory
        indexes read a generation and rows that agree)."""
        with self.connection() as conn, snapshot(conn, user_id) as rows:
            yield rows

    def _changes_since(self, user_id: str, since: Since) -> Changes:
        """What a cached user gained since ``since``, in one round trip."""
        with self.connection() as conn:
            return changes(conn, user_id, since)

    @contextmanager
    def pipelined(self, user_id: str) -> Iterator[psycopg.Connection[dict[str, Any]]]:
        """A read-only snapshot of ``user_id``'s rows whose statements are
        all sent at once and answered in one round trip when the block ends
        (the pool's check of the connection is one more): fetch results only
        after it. For a few reads whose parameters are known in advance."""
        with self.connection() as conn, in_one_round_trip(conn, user_id):
            yield conn

    @contextmanager
    def _read(self, user_id: str) -> Iterator[Conn]:
        with self.transaction(user_id) as conn:
            yield PgConn(conn)

    @contextmanager
    def _write(self, user_id: str) -> Iterator[Conn]:
        with self.transaction(user_id) as conn:
            # serializes one user's writers, even while the rows do not exist,
            # so one user's new chunk and vector ids grow in commit order: the
            # in-memory indexes read "ids above the last seen" (source.py)
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (user_id,))
            yield PgConn(conn)

    @contextmanager
    def _queue(self, *, write: bool = True) -> Iterator[Conn]:
        with self.connection() as conn, conn.transaction():
            yield PgConn(conn)

    def _notify(self, conn: Conn) -> None:
        conn.execute(f"NOTIFY {JOBS_CHANNEL}")  # delivered at commit, to every listener

    def _deleted(self, tables: Sequence[str]) -> None:
        self.vacuum(tables)

    def vacuum(self, tables: Sequence[str]) -> None:
        """VACUUM ``tables`` after a deletion, so that the deleted rows go from
        pages and indexes now, not when autovacuum comes by. Their bytes
        stay in the files until overwritten: docs/deploy.md says what remains
        where and how an operator finishes the job. PostgreSQL skips, with a
        warning, a table this role may not vacuum (it needs MAINTAIN, 17+)."""
        try:
            with self.connection() as conn:
                conn.autocommit = True  # VACUUM cannot run in a transaction
                try:
                    conn.execute(f"VACUUM (SKIP_LOCKED) {', '.join(tables)}")
                finally:
                    conn.autocommit = False
        except (psycopg.Error, StoreError) as exc:
            log.warning("VACUUM after a deletion failed: %s", exc)

    def close(self) -> None:
        self.blocks.close()
        self._close_indexes()
        self.pool.close(timeout=CLOSE_TIMEOUT)


__all__ = ["PostgresStore", "migrate"]
