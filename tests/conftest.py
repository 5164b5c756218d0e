"""Shared fixtures: every test gets a real, throwaway SQLite file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder

VECTORS = Path(__file__).parent / "vectors" / "block-text.json"


def block_vectors() -> list[dict[str, Any]]:
    vectors: list[dict[str, Any]] = json.loads(VECTORS.read_text("utf-8"))["vectors"]
    return vectors


@pytest.fixture(params=["sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqliteStore]:
    """A store on every backend; the contract suite runs once per backend."""
    backend = SqliteStore(tmp_path / "memoro.db")
    yield backend
    backend.close()


@pytest.fixture
def memoro(store: SqliteStore, tmp_path: Path) -> Iterator[Memoro]:
    """The service on a real store, keyword-only and without a background
    worker; tests about search or the worker make their own."""
    service = Memoro(store, Settings(home=tmp_path), embedder=None, worker=False)
    yield service
    service.close()


@pytest.fixture
def history(store: SqliteStore, tmp_path: Path) -> Iterator[Memoro]:
    """The service with a deterministic fake embedder and no background
    thread: tests index with ``index_pending()``."""
    service = Memoro(store, Settings(home=tmp_path), embedder=HashEmbedder(), worker=False)
    yield service
    service.close()


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
