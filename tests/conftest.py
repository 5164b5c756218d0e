"""Shared fixtures: every test gets a real, throwaway SQLite file."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx._config
import pytest

from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder

VECTORS = Path(__file__).parent / "vectors" / "block-text.json"

# httpx gives up on a server after 5 s by default; on a loaded machine a test
# server's first answer (imports on first use, a starved thread) can take
# longer, which is no failure of memoro's. Tests that are about a timeout
# pass their own.
for _part in ("connect", "read", "write", "pool"):
    setattr(httpx._config.DEFAULT_TIMEOUT_CONFIG, _part, 60.0)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the reliability benchmark's quick run at once when its test is
    selected: it is a process of its own and mostly waits on others, so it
    overlaps the rest of the suite (tests/test_reliability.py waits for it)."""
    if any(item.path.name == "test_reliability.py" for item in session.items):
        from tests import test_reliability

        results = Path(tempfile.mkdtemp(prefix="memoro-reliability-")) / "results.json"
        session.config.reliability_run = (  # type: ignore[attr-defined]
            test_reliability.start(results),
            results,
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the quick run if the session ends without waiting for it."""
    run = getattr(session.config, "reliability_run", None)
    if run is not None:
        from tests import test_reliability

        test_reliability.stop(run[0])


def block_vectors() -> list[dict[str, Any]]:
    vectors: list[dict[str, Any]] = json.loads(VECTORS.read_text("utf-8"))["vectors"]
    return vectors


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    """The embedded default's store on a real, throwaway SQLite file."""
    backend = SqliteStore(tmp_path / "memoro.db")
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A real PostgreSQL for the session, with its owner, worker and app roles."""
    from tests import postgres as pg

    yield from pg.start()


@pytest.fixture(scope="session")
def postgres(postgres_server: Any) -> tuple[str, str]:
    """(superuser URL, memoro's URL): memoro connects as the worker role,
    which serves and indexes, as a server running its own worker does; the
    app role of servers that leave indexing to workers is tested apart."""
    return postgres_server.admin, postgres_server.worker


@pytest.fixture(params=["sqlite", "postgres", "postgres-superuser"])
def block_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A store on every backend that has the block: the contract suite and
    the block's service rules run once per backend."""
    backend = _backend(request, tmp_path)
    yield backend
    backend.close()


@pytest.fixture
def block_memoro(block_store: Any, tmp_path: Path) -> Iterator[Memoro]:
    """The service on each backend, for the block's rules."""
    service = Memoro(block_store, Settings(home=tmp_path), embedder=None, worker=False)
    yield service
    service.close()


@pytest.fixture
def memoro(store: SqliteStore, tmp_path: Path) -> Iterator[Memoro]:
    """The service on a real store, keyword-only and without a background
    worker; tests about search or the worker make their own."""
    service = Memoro(store, Settings(home=tmp_path), embedder=None, worker=False)
    yield service
    service.close()


@pytest.fixture(params=["sqlite", "postgres", "postgres-superuser"])
def history(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memoro]:
    """The service on each backend, with a deterministic fake embedder and no
    background thread: tests index with ``index_pending()``."""
    backend = _backend(request, tmp_path)
    service = Memoro(backend, Settings(home=tmp_path), embedder=HashEmbedder(), worker=False)
    yield service
    service.close()


def _backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        return SqliteStore(tmp_path / "memoro.db")
    from memoro.store.postgres import PostgresStore
    from tests import postgres as pg

    admin, url = request.getfixturevalue("postgres")
    pg.clean(admin)
    # "postgres-superuser" connects as the superuser, which row-level security does
    # not restrict: every query must still keep to its own user by itself
    return PostgresStore(admin if request.param == "postgres-superuser" else url)


@pytest.fixture
def web_service(tmp_path: Path) -> Iterator[Memoro]:
    """The service behind a test server: fake embedder, no worker thread."""
    service = Memoro(
        SqliteStore(tmp_path / "memoro.db"),
        Settings(home=tmp_path),
        embedder=HashEmbedder(),
        worker=False,
    )
    yield service
    service.close()
