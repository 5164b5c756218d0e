"""Where a reliability check runs: a fresh SQLite home, or a throwaway
PostgreSQL (pgserver) emptied between checks, with what a check needs to
reach it — the settings of a process, a store, a count, the files on disk."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder

TABLES = (
    "memory_blocks, memory_audit, vectors, chunks, turns, conversations, jobs, history_users,"
    " search_indexes, import_parts, imports, user_epochs"
)


@dataclass
class Row:
    check: str
    tried: int = 0
    failed: int = 0
    notes: list[str] = field(default_factory=list)

    def fail(self, why: str) -> None:
        self.failed += 1
        if len(self.notes) < 5:
            self.notes.append(why)


@dataclass
class Place:
    label: str
    home: Path
    url: str | None = None
    """memoro's PostgreSQL URL (the worker role); None for SQLite."""
    admin: str | None = None
    app: str | None = None
    data_dir: Path | None = None
    _homes: list[Path] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        """The settings of a memoro process working here."""
        env = {"MEMORO_HOME": str(self.home), "MEMORO_EMBEDDER": "keyword"}
        if self.url:
            env["MEMORO_DATABASE_URL"] = self.url
        return env

    def store(self, **options: Any) -> Any:
        if self.url is None:
            return SqliteStore(self.home / "memoro.db")
        from memoro.store.postgres import PostgresStore

        return PostgresStore(self.url, **options)

    def memoro(self, embedder: Any = None) -> Memoro:
        return Memoro(self.store(), Settings(home=self.home), embedder=embedder, worker=False)

    def indexer(self) -> Memoro:
        return self.memoro(HashEmbedder())

    def fresh(self) -> None:
        """Empty, for the next check."""
        if self.url is None:
            self.home = Path(tempfile.mkdtemp(prefix="memoro-reliability-"))
            self._homes.append(self.home)
        else:
            with psycopg.connect(self.admin or "", autocommit=True) as conn:
                conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY")

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        """Rows from the database, read past row-level security."""
        if self.url is None:
            with closing(
                sqlite3.connect(f"file:{self.home / 'memoro.db'}?mode=ro", uri=True)
            ) as db:
                return [tuple(r) for r in db.execute(sql).fetchall()]
        with psycopg.connect(self.admin or "") as conn:
            return [tuple(r) for r in conn.execute(sql.encode()).fetchall()]

    def count(self, sql: str) -> int:
        return int(self.rows(sql)[0][0])

    def settled(self, seconds: float = 30) -> None:
        """Wait until no other session is connected (PostgreSQL): a client
        killed right after sending COMMIT leaves a server process that may
        still finish it, so what it wrote is only known once that is gone."""
        if self.url is None:
            return
        deadline = time.monotonic() + seconds
        while self.count(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
            " AND datname = current_database() AND pid <> pg_backend_pid()"
        ):
            if time.monotonic() > deadline:
                raise SystemExit("a killed client's sessions did not end")
            time.sleep(0.01)

    def drained(self, seconds: float = 300) -> None:
        """Wait until every job but the failed ones is done."""
        deadline = time.monotonic() + seconds
        while self.count("SELECT count(*) FROM jobs WHERE status <> 'failed'"):
            if time.monotonic() > deadline:
                raise SystemExit("the job queue did not drain")
            time.sleep(0.05)

    def files(self) -> list[Path]:
        """Every file the database keeps its data in."""
        root = self.data_dir if self.data_dir is not None else self.home
        return [p for p in sorted(root.rglob("*")) if p.is_file()]

    def files_with(self, markers: list[bytes]) -> dict[bytes, list[str]]:
        found: dict[bytes, list[str]] = {}
        for path in self.files():
            try:
                data = path.read_bytes()
            except OSError:  # removed while we walked
                continue
            for marker in markers:
                if marker in data:
                    found.setdefault(marker, []).append(path.name)
        return found

    def cleanup(self) -> None:
        for home in self._homes:
            shutil.rmtree(home, ignore_errors=True)


@contextmanager
def place(spec: str) -> Iterator[Place]:
    """``sqlite`` or ``pgserver`` (a local PostgreSQL set up as docs/deploy.md
    says, with ``wal_recycle = off`` as section 4 asks)."""
    home = Path(tempfile.mkdtemp(prefix="memoro-reliability-"))
    if spec == "sqlite":
        where = Place("SQLite", home, _homes=[home])
        try:
            yield where
        finally:
            where.cleanup()
        return
    if spec != "pgserver":
        raise SystemExit("--database: sqlite or pgserver (the checks read the server's files)")
    from memoro.store.postgres.local import running

    with running() as server:
        with psycopg.connect(server.admin, autocommit=True) as conn:
            data_dir = Path(str(conn.execute("SHOW data_directory").fetchone()[0]))  # type: ignore[index]
            conn.execute("ALTER SYSTEM SET wal_recycle = off")
            conn.execute("SELECT pg_reload_conf()")
        where = Place("PostgreSQL", home, server.worker, server.admin, server.app, data_dir, [home])
        try:
            yield where
        finally:
            where.cleanup()
