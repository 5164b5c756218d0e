"""What the shared SQL code needs from a backend: a connection that runs
``?``-placeholder SQL, how the database stores times and JSON, and scoped
transactions. The logic written once over this (``blocks.py``, ``turns.py``,
``queue.py``, ``uploads.py``, ``migrations.py``) is the same on SQLite and
PostgreSQL; only search, locking and row-level security stay per backend."""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol


class Conn(Protocol):
    """A connection inside a transaction. Shared SQL uses ``?`` placeholders
    and reads result columns by name."""

    def execute(self, sql: str, params: Any = (), /) -> Any: ...

    def executemany(self, sql: str, params: Iterable[Sequence[Any]], /) -> Any: ...


@dataclass(frozen=True)
class Dialect:
    """How one database stores what the shared code writes."""

    name: str
    """The folder of this dialect's migrations (``sql/<name>``)."""
    time: Callable[[datetime], object]
    """A time as a query parameter."""
    read_time: Callable[[Any], datetime]
    """A time column as a datetime."""
    json: Callable[[object], object]
    """A JSON value as a query parameter."""
    read_json: Callable[[Any], Any]
    """A JSON column as Python values."""
    later: Callable[[float], tuple[str, tuple[object, ...]]]
    """SQL (and its parameters) for the time ``seconds`` from now, by the
    database's clock where it has one that all processes share."""
    migrations_table: str
    """The statement that creates the table of applied migrations."""


def utcnow() -> datetime:
    return datetime.now(UTC)


class SqlBackend(abc.ABC):
    """What a backend gives the shared store code: transactions scoped to
    one user, and transactions on the job queue."""

    dialect: ClassVar[Dialect]

    @abc.abstractmethod
    def _read(self, user_id: str) -> AbstractContextManager[Conn]:
        """A connection that sees ``user_id``'s rows (no write lock)."""

    @abc.abstractmethod
    def _write(self, user_id: str) -> AbstractContextManager[Conn]:
        """A write transaction on ``user_id``'s rows, serialized against the
        user's other writers; committed when the ``with`` block ends."""

    @abc.abstractmethod
    def _queue(self, *, write: bool = True) -> AbstractContextManager[Conn]:
        """A transaction on the job queue, across users."""

    def _notify(self, conn: Conn) -> None:  # noqa: B027 - a hook; SQLite has none
        """Tell other processes' workers a job was queued (at commit)."""

    def _deleted(self, tables: Sequence[str]) -> None:  # noqa: B027 - a hook
        """Called after a transaction deleted a user's text from ``tables``:
        make the deletion true on disk as far as the backend can."""
