"""A real PostgreSQL with pgvector for the tests: one server per test session
(``memoro.store.postgres.local``), set up as on a managed PostgreSQL."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from memoro.store.postgres.local import OWNER_ROLE, LocalPostgres, as_role, in_database, running

__all__ = ["OWNER_ROLE", "as_role", "clean", "in_database", "messages", "start"]


def start() -> Iterator[LocalPostgres]:
    """A fresh, migrated server with its three roles."""
    with running() as server:
        yield server


def clean(admin: str) -> None:
    """Empty every table between tests."""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            "TRUNCATE memory_blocks, memory_audit, vectors, chunks, turns, conversations,"
            " jobs, history_users, import_parts, imports, search_indexes, user_epochs,"
            " memory_proposals, review_state RESTART IDENTITY"
        )


@contextmanager
def messages(store: Any, kind: str) -> Iterator[list[int]]:
    """Counts the server's messages of ``kind`` (libpq's protocol trace
    names them: "ReadyForQuery" ends a round trip, "DataRow" is a row sent)
    on the connections a PostgresStore ``store`` hands out."""
    counted = [0]
    original = store.connection

    @contextmanager
    def traced() -> Iterator[Any]:
        with original() as conn, tempfile.TemporaryFile("w+") as trace:
            conn.pgconn.trace(trace.fileno())
            try:
                yield conn
            finally:
                conn.pgconn.untrace()
                trace.seek(0)
                counted[0] += sum(kind in line for line in trace)

    store.connection = traced
    try:
        yield counted
    finally:
        del store.connection
