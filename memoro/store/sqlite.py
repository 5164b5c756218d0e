"""The SQLite backend: one database file, WAL mode, one connection per thread,
write transactions taken with BEGIN IMMEDIATE so writers queue instead of
failing. ``secure_delete`` overwrites deleted content, so a cleared block
leaves no bytes behind in the file (M9)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from memoro.errors import MigrationError, StoreError
from memoro.models import AuditEntry, AuditRecord, Operation, StoredBlock, Writer
from memoro.store import migrations

_PRAGMAS = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = FULL",
    "PRAGMA foreign_keys = ON",
    "PRAGMA secure_delete = ON",
)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _block(row: sqlite3.Row | None) -> StoredBlock | None:
    if row is None:
        return None
    return StoredBlock(
        user_id=row["user_id"],
        text=row["text"],
        updated_at=datetime.fromisoformat(row["updated_at"]),
        updated_by=Writer(row["updated_by"]),
    )


class _BlockTransaction:
    def __init__(self, conn: sqlite3.Connection, user_id: str) -> None:
        self._conn = conn
        self._user_id = user_id

    def current(self) -> StoredBlock | None:
        row = self._conn.execute(
            "SELECT * FROM memory_blocks WHERE user_id = ?", (self._user_id,)
        ).fetchone()
        return _block(row)

    def put(self, text: str, audit: AuditRecord) -> StoredBlock:
        at = _now()
        self._conn.execute(
            "INSERT INTO memory_blocks (user_id, text, updated_at, updated_by)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (user_id) DO UPDATE SET"
            " text = excluded.text, updated_at = excluded.updated_at,"
            " updated_by = excluded.updated_by",
            (self._user_id, text, at, audit.writer.value),
        )
        self._record(audit, at)
        return StoredBlock(self._user_id, text, datetime.fromisoformat(at), audit.writer)

    def delete(self, audit: AuditRecord) -> None:
        self._conn.execute("DELETE FROM memory_blocks WHERE user_id = ?", (self._user_id,))
        self._conn.execute(
            "UPDATE memory_audit SET removed_lines = '[]', added_lines = '[]' WHERE user_id = ?",
            (self._user_id,),
        )
        self._record(audit, _now())

    def _record(self, audit: AuditRecord, at: str) -> None:
        self._conn.execute(
            "INSERT INTO memory_audit (user_id, at, writer, operation, removed_lines,"
            " added_lines, removed_count, added_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
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


class SqliteStore:
    """A Store on one SQLite file; safe to share between threads and with
    other processes on the same file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._migrate()

    # -- connections -------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        try:
            conn = sqlite3.connect(
                self.path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            conn.row_factory = sqlite3.Row
            for pragma in _PRAGMAS:
                conn.execute(pragma)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the database {self.path}: {exc}") from exc
        self._local.conn = conn
        with self._lock:
            self._all.append(conn)
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot start a write on {self.path}: {exc}") from exc
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise StoreError(f"cannot commit to {self.path}: {exc}") from exc

    def _migrate(self) -> None:
        known = migrations.load("sqlite")
        with self._write() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            applied = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            if applied and max(applied) > len(known):
                raise MigrationError(
                    f"{self.path} has schema version {max(applied)}, newer than this"
                    f" memoro knows ({len(known)}); upgrade memoro"
                )
            for migration in known:
                if migration.version in applied:
                    continue
                for statement in _statements(migration.sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                    (migration.version, migration.name, _now()),
                )

    # -- Store -------------------------------------------------------------

    def read_block(self, user_id: str) -> StoredBlock | None:
        row = (
            self._connect()
            .execute("SELECT * FROM memory_blocks WHERE user_id = ?", (user_id,))
            .fetchone()
        )
        return _block(row)

    @contextmanager
    def block_transaction(self, user_id: str) -> Iterator[_BlockTransaction]:
        with self._write() as conn:
            yield _BlockTransaction(conn, user_id)

    def list_audit(self, user_id: str, *, limit: int = 100) -> list[AuditEntry]:
        rows = self._connect().execute(
            "SELECT * FROM memory_audit WHERE user_id = ? ORDER BY id DESC LIMIT ?",
            (user_id, limit),
        )
        return [
            AuditEntry(
                id=row["id"],
                user_id=row["user_id"],
                at=datetime.fromisoformat(row["at"]),
                writer=Writer(row["writer"]),
                operation=Operation(row["operation"]),
                removed_lines=tuple(json.loads(row["removed_lines"])),
                added_lines=tuple(json.loads(row["added_lines"])),
                removed_count=row["removed_count"],
                added_count=row["added_count"],
            )
            for row in rows
        ]

    def checkpoint(self) -> None:
        """Move the WAL into the database file and truncate the WAL."""
        self._connect().execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()


def _statements(script: str) -> Iterator[str]:
    """Split a migration script into complete statements."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statement = buffer.strip()
            buffer = ""
            if statement:
                yield statement
    if buffer.strip() and not all(
        ln.strip().startswith("--") or not ln.strip() for ln in buffer.splitlines()
    ):
        raise MigrationError(f"incomplete SQL statement in migration: {buffer.strip()[:80]}")
