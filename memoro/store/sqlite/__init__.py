"""The SQLite backend: the embedded default, one database file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from memoro.models import StoredBlock
from memoro.store.base import Known, Store
from memoro.store.blocks import SqlBlocks
from memoro.store.memory import budget
from memoro.store.reviews import SqlReviews
from memoro.store.sqlite._db import SQLITE, Database
from memoro.store.sqlite.health import Health
from memoro.store.sqlite.history import History
from memoro.store.sqlite.jobs import Jobs
from memoro.store.uploads import SqlUploads
from memoro.store.users import SqlUsers

if TYPE_CHECKING:
    from memoro.store.memory.source import Snapshot


class SqliteStore(SqlBlocks, SqlReviews, History, Jobs, SqlUploads, SqlUsers, Health, Store):
    """A Store on one SQLite file; safe to share between threads and with
    other processes on the same file. One writer at a time (BEGIN
    IMMEDIATE), so a write transaction needs no lock of its own."""

    dialect = SQLITE
    runs_jobs = True

    def __init__(self, path: str | Path, *, cache_mb: int = budget.DEFAULT_MB) -> None:
        self.db = Database(path)
        self._open_indexes(self._snapshot, cache_mb, self._keep_index)

    def _snapshot(self, user_id: str) -> AbstractContextManager[Snapshot]:
        # the indexes' one read of a user: loaded with the first search
        from memoro.store.sqlite.source import snapshot

        return snapshot(self.db, user_id)

    def prompt_block(self, user_id: str) -> StoredBlock | None:
        return self.read_block(user_id)

    def prompt_block_now(self, user_id: str) -> Known:
        # a WAL reader never waits for a writer: one row, microseconds
        return Known(self.read_block(user_id))

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
        self._close_indexes()
        self.db.close()


__all__ = ["SqliteStore"]
