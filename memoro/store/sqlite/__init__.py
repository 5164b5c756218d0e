"""The SQLite backend: the embedded default, one database file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from pathlib import Path

from memoro.store.base import Store
from memoro.store.blocks import SqlBlocks
from memoro.store.memory import budget, saved
from memoro.store.memory.bm25 import KeywordIndex
from memoro.store.memory.saved import Saver
from memoro.store.memory.vectors import VectorCache
from memoro.store.sqlite._db import SQLITE, Database
from memoro.store.sqlite.health import Health
from memoro.store.sqlite.history import History
from memoro.store.sqlite.jobs import Jobs
from memoro.store.sqlite.source import SqliteSnapshot, snapshot
from memoro.store.uploads import SqlUploads


class SqliteStore(SqlBlocks, History, Jobs, SqlUploads, Health, Store):
    """A Store on one SQLite file; safe to share between threads and with
    other processes on the same file. One writer at a time (BEGIN
    IMMEDIATE), so a write transaction needs no lock of its own."""

    dialect = SQLITE
    runs_jobs = True
    inline_reads = True

    def __init__(self, path: str | Path, *, cache_mb: int = budget.DEFAULT_MB) -> None:
        self.db = Database(path)
        self.budget = budget.Budget(cache_mb << 20)
        self.saver = Saver(self._keep_index)
        read = partial(snapshot, self.db)
        self.vectors = VectorCache(read, self.budget, self.saver)
        self.keywords = KeywordIndex(
            read, self.budget, on_load=self.vectors.prefetch, saver=self.saver
        )

    def _keep_index(self, user_id: str, kind: str, generation: int, data: memoryview) -> None:
        """Save a copy of a user's in-memory index (``memory/saved.py``)
        unless the user changed generation since it was built."""
        with self.db.write() as conn:
            if SqliteSnapshot(conn, user_id).generation() != generation:
                return
            conn.execute(
                "DELETE FROM search_indexes WHERE user_id = ? AND kind = ?", (user_id, kind)
            )
            for part, piece in enumerate(saved.parts(data)):
                conn.execute(
                    "INSERT INTO search_indexes VALUES (?, ?, ?, ?, ?)",
                    (user_id, kind, part, generation, piece),
                )
        self.db.checkpoint()  # the copy's pages leave the WAL

    @property
    def path(self) -> Path:
        return self.db.path

    @contextmanager
    def _read(self, user_id: str) -> Iterator[sqlite3.Connection]:
        yield self.db.connect()

    def _write(self, user_id: str) -> AbstractContextManager[sqlite3.Connection]:
        return self.db.write()

    def _queue(self, *, write: bool = True) -> AbstractContextManager[sqlite3.Connection]:
        return self.db.write() if write else self._read("")

    def _deleted(self, tables: Sequence[str]) -> None:
        self.db.checkpoint()  # the deleted text leaves the WAL too

    def checkpoint(self) -> bool:
        """Move the WAL into the database file and truncate the WAL (done
        after every delete-everything and purge)."""
        return self.db.checkpoint()

    def close(self) -> None:
        self.saver.close()
        self.vectors.forget()
        self.keywords.forget()
        self.db.close()


__all__ = ["SqliteStore"]
