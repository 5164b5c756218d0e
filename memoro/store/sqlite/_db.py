"""SQLite connections: one per thread, WAL mode, durable commits, write
transactions taken with BEGIN IMMEDIATE so writers queue instead of failing,
and ``secure_delete`` so deleted text is overwritten in the file."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memoro.errors import DiskFull, MigrationError, StoreError
from memoro.private import create_file, make_folder
from memoro.store import backfill, migrations
from memoro.store.dialect import Dialect

log = logging.getLogger("memoro.store")

BUSY_TIMEOUT = 30.0
"""Seconds a statement waits for another connection's lock."""
MIGRATION_WAIT = 3600.0
"""Seconds a process opening the file waits for another one's migration."""
WAL_WARN_EVERY = 600.0
"""Seconds between two warnings that the WAL still could not be truncated."""

_PRAGMAS = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = FULL",
    "PRAGMA foreign_keys = ON",
    "PRAGMA secure_delete = ON",
)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def iso(at: datetime) -> str:
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def _later(seconds: float) -> tuple[str, tuple[object, ...]]:
    # one file on one machine: the process clock is the database's clock
    return "?", (iso(datetime.now(UTC) + timedelta(seconds=seconds)),)


def _read_json(value: str | bytes) -> object:
    return json.loads(value)


SQLITE = Dialect(
    name="sqlite",
    time=iso,
    read_time=datetime.fromisoformat,
    json=lambda value: json.dumps(value, ensure_ascii=False),
    read_json=_read_json,
    later=_later,
    migrations_table="CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
)


class Database:
    """A SQLite file shared safely between threads and processes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        make_folder(self.path.parent)
        create_file(self.path)  # owner-only; SQLite gives its -wal and -shm the same mode
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._checkpoints = _Checkpoints()
        self._migrate()

    def connect(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        conn = self._open()
        self._local.conn = conn
        with self._lock:
            self._all.append(conn)
        return conn

    def _open(self) -> sqlite3.Connection:
        """A new connection with memoro's settings. Turning a new file to WAL
        needs the file to itself, and SQLite answers "locked" at once rather
        than through the busy handler while another process holds it (two
        processes opening a new database together; one migrating it): so
        that is waited for, as long as the busy timeout."""
        deadline = time.monotonic() + BUSY_TIMEOUT
        while True:
            conn = None
            try:
                conn = sqlite3.connect(
                    self.path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
                )
                conn.row_factory = sqlite3.Row
                for pragma in _PRAGMAS:
                    conn.execute(pragma)
                return conn
            except sqlite3.Error as exc:
                if conn is not None:
                    conn.close()
                busy = isinstance(exc, sqlite3.OperationalError) and (
                    "locked" in str(exc) or "busy" in str(exc)
                )
                if not busy or time.monotonic() > deadline:
                    raise StoreError(f"cannot open the database {self.path}: {exc}") from exc
                time.sleep(0.02)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: commit on success, roll back on any error."""
        conn = self.connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot start a write on {self.path}: {exc}") from exc
        try:
            yield conn
        except sqlite3.Error as exc:
            _roll_back(conn)
            raise _failed(self.path, "write to", exc) from exc
        except BaseException:
            _roll_back(conn)
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _roll_back(conn)
            raise _failed(self.path, "commit to", exc) from exc

    def checkpoint(self) -> bool:
        """Move the WAL into the database file and truncate the WAL to zero
        bytes. After a deletion this is what makes it true on disk: the
        WAL still holds the pages as they were before secure_delete zeroed
        them. False when readers or a writer kept it from finishing for the
        30 s the busy handler waits; the next checkpoint finishes the job.

        Checkpoints asked for at once in this process are run one at a
        time, and one that began after a caller asked covers that caller
        too; another process's checkpoint running meanwhile (SQLite refuses
        a second one at once, without waiting) is waited for."""
        checkpoints = self._checkpoints
        with checkpoints.asking:
            checkpoints.asked += 1
            ticket = checkpoints.asked
        with checkpoints.running:
            if checkpoints.done >= ticket:  # began after we asked: it covered us
                return checkpoints.truncated
            with checkpoints.asking:
                covers = checkpoints.asked
            truncated = self._truncate()
            checkpoints.done, checkpoints.truncated = covers, truncated
            checkpoints.say(self.path, truncated)
        return truncated

    def _truncate(self) -> bool:
        conn = self.connect()
        deadline = time.monotonic() + BUSY_TIMEOUT
        pause = 0.005
        while True:
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            if not busy:
                return True
            if time.monotonic() + pause > deadline:  # the busy handler waited it out
                return False
            log.debug("another checkpoint of %s is running: trying again", self.path)
            time.sleep(pause)
            pause = min(2 * pause, 0.5)

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()

    def _up_to_date(self) -> bool:
        """Whether the file has this memoro's schema already: one read,
        without the write lock or the migration scripts."""
        try:
            row = self.connect().execute("SELECT max(version) FROM schema_migrations").fetchone()
        except sqlite3.Error:  # a new file: no table yet
            return False
        return bool(row[0] == migrations.count("sqlite"))

    def _migrate(self) -> None:
        if self._up_to_date():
            return

        def run(migration: migrations.Migration) -> None:
            for statement in _statements(migration.sql):
                conn.execute(statement)
            if migration.name == "question_terms":
                backfill.question_terms(conn, by_user=False)

        # another process may be upgrading the file (a migration that
        # computes every chunk's terms again holds the write lock for
        # minutes): wait for it rather than fail after the busy timeout
        deadline = time.monotonic() + MIGRATION_WAIT
        waited = False
        while True:
            try:
                with self.write() as conn:
                    migrations.apply(conn, SQLITE, run, where=str(self.path))
                return
            except StoreError as exc:
                locked = isinstance(exc.__cause__, sqlite3.OperationalError) and (
                    "locked" in str(exc.__cause__)
                )
                if not locked or time.monotonic() > deadline:
                    raise
                if not waited:
                    log.warning("waiting for another memoro process to upgrade %s", self.path)
                    waited = True


class _Checkpoints:
    """Where a database's checkpoints stand in this process: how many were
    asked for, how many the last finished one covered, and since when the
    WAL has stayed untruncated (said once, then every WAL_WARN_EVERY)."""

    def __init__(self) -> None:
        self.asking = threading.Lock()
        self.running = threading.Lock()
        self.asked = 0
        self.done = 0
        self.truncated = True
        self.failing_since: float | None = None
        self.warned_at: float | None = None

    def say(self, path: Path, truncated: bool) -> None:
        now = time.monotonic()
        if truncated:
            if self.warned_at is not None:
                log.info("the WAL of %s is truncated again: no deleted text is left in it", path)
            self.failing_since = self.warned_at = None
            return
        if self.failing_since is None:
            self.failing_since = now
        if self.warned_at is not None and now - self.warned_at < WAL_WARN_EVERY:
            log.debug("the WAL of %s could not be truncated yet: a reader is busy", path)
            return
        self.warned_at = now
        log.warning(
            "the WAL of %s could not be truncated for %.0f s: a reader or writer kept it busy"
            " (a long read, a backup, an open sqlite3 shell?). Text deleted meanwhile may"
            " remain in %s-wal until a checkpoint succeeds: memoro tries again at each"
            " deletion (SQLite does when the file's last connection closes) and says so once"
            " it has",
            path,
            now - self.failing_since + BUSY_TIMEOUT,
            path,
        )


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
    leftover = [ln for ln in buffer.splitlines() if ln.strip() and not ln.strip().startswith("--")]
    if leftover:
        raise MigrationError(f"incomplete SQL statement in migration: {leftover[0][:80]}")


def _roll_back(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:  # SQLite may have rolled back already (a full disk)
        conn.execute("ROLLBACK")


def _failed(path: Path, doing: str, exc: sqlite3.Error) -> StoreError:
    if getattr(exc, "sqlite_errorname", "") == "SQLITE_FULL":
        return DiskFull(
            f"the disk of the database {path} is full: nothing was stored (free some space)"
        )
    return StoreError(f"cannot {doing} {path}: {exc}")
