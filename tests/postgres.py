"""A real PostgreSQL with pgvector for the tests: one server per test session
(``memoro.store.postgres.local``), set up as on a managed PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg

from memoro.store.postgres.local import OWNER_ROLE, LocalPostgres, as_role, in_database, running

__all__ = ["OWNER_ROLE", "as_role", "clean", "in_database", "start"]


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
