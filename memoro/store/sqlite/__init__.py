"""The SQLite backend: the embedded default, one database file."""

from __future__ import annotations

from pathlib import Path

from memoro.store.sqlite._db import Database
from memoro.store.sqlite.blocks import Blocks
from memoro.store.sqlite.bm25 import KeywordIndex
from memoro.store.sqlite.health import Health
from memoro.store.sqlite.history import History
from memoro.store.sqlite.jobs import Jobs
from memoro.store.sqlite.uploads import Uploads
from memoro.store.sqlite.vectors import VectorCache


class SqliteStore(Blocks, History, Jobs, Uploads, Health):
    """A Store on one SQLite file; safe to share between threads and with
    other processes on the same file."""

    def __init__(self, path: str | Path) -> None:
        self.db = Database(path)
        self.vectors = VectorCache(self.db)
        self.keywords = KeywordIndex(self.db)

    @property
    def path(self) -> Path:
        return self.db.path

    def checkpoint(self) -> bool:
        """Move the WAL into the database file and truncate the WAL (done
        after every delete-everything and purge)."""
        return self.db.checkpoint()

    def close(self) -> None:
        self.vectors.forget()
        self.keywords.forget()
        self.db.close()


__all__ = ["SqliteStore"]
