"""Saved copies of large users' in-memory search indexes, on both backends:
a server that starts (or any other server) reads a large user's copy on its
first search instead of building the index from every chunk, finds exactly
what a full build finds, adds what was indexed since, and never reads a copy
that a deletion made stale — the deletion removes it (C4, C6)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memoro.models import NewTurn
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.memory import bm25, saved, vectors
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder

USER = "ann"
QUERIES = ("heron lake", "kestrel", "order 4471", "the blue boat")


@pytest.fixture(params=["sqlite", "postgres"])
def opener(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[], Memoro]]:
    """Opens the service on one database, as many times as a test likes
    (each a server starting); a user of 40 chunks counts as large, and a
    copy is stored in parts of 4 KB (of 4 MB in earnest)."""
    monkeypatch.setattr(saved, "SAVE_MIN", 40)
    monkeypatch.setattr(saved, "PART_BYTES", 4096)
    if request.param == "sqlite":

        def store() -> Any:
            return SqliteStore(tmp_path / "memoro.db")
    else:
        from memoro.store.postgres import PostgresStore
        from tests import postgres as pg

        admin, url = request.getfixturevalue("postgres")
        pg.clean(admin)

        def store() -> Any:
            return PostgresStore(url)

    opened: list[Memoro] = []

    def open_service() -> Memoro:
        service = Memoro(store(), Settings(home=tmp_path), embedder=HashEmbedder(), worker=False)
        opened.append(service)
        return service

    yield open_service
    for service in opened:
        service.close()


def _record(service: Memoro, first: int, count: int) -> None:
    words = ("heron", "lake", "kestrel", "blue", "boat", "order", "4471", "reed")
    for i in range(first, first + count):
        text = " ".join(words[(i * k) % len(words)] for k in range(1, 6))
        service.store.record_turns(USER, [NewTurn(f"c{i % 5}", f"{text} {i}", f"noted {i}")])
    service.index_pending()


def _results(service: Memoro) -> list[list[tuple[int, float]]]:
    store: Any = service.store
    embedder = HashEmbedder()
    found = []
    for q in QUERIES:
        found.append([(c, round(s, 5)) for c, _, s in store.keyword_search(USER, q, 100)])
        top = store.semantic(USER, embedder.model_id, embedder.embed_query(q)).top(100)
        found.append([(c, round(s, 5)) for c, _, s in top])
        found.append([(t.turn_id, round(t.score, 5)) for t in service.search(USER, q, limit=20)])
    return found


def _copies(service: Memoro, sql: str) -> list[tuple[Any, ...]]:
    """Rows of a query of ``USER``'s saved copies, as tuples on both backends."""
    store: Any = service.store
    with store._read(USER) as conn:
        rows = conn.execute(sql, (USER,)).fetchall()
    return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in rows]


def _saved_kinds(service: Memoro) -> list[str]:
    found = _copies(
        service,
        "SELECT kind, count(*) FROM search_indexes WHERE user_id = ? GROUP BY kind ORDER BY kind",
    )
    assert all(parts > 1 for _, parts in found)  # stored in parts
    return [kind for kind, _ in found]


def _no_full_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make a build from every chunk, or a read of every vector, fail."""

    def refuse(*args: Any) -> None:
        raise AssertionError("the index was built from every chunk, not read from its copy")

    monkeypatch.setattr(bm25.KeywordIndex, "_load", staticmethod(refuse))
    batches = vectors.VectorCache._batches

    def only_new(rows: Any, model: str, after: int) -> Any:
        assert after > 0, "every vector was read, not the copy"
        return batches(rows, model, after)

    monkeypatch.setattr(vectors.VectorCache, "_batches", staticmethod(only_new))


def test_a_starting_server_reads_a_large_users_copy_and_finds_the_same(
    opener: Callable[[], Memoro], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = opener()
    _record(first, 0, 60)
    built = _results(first)
    first.store.saver.flush()  # type: ignore[attr-defined]
    embedder = HashEmbedder()
    assert _saved_kinds(first) == ["keywords", f"vectors {embedder.model_id}"]
    _record(first, 60, 7)  # indexed after the copy was saved
    grown = _results(first)
    assert grown != built

    _no_full_build(monkeypatch)
    assert _results(opener()) == grown


def test_a_deletion_removes_the_copies_and_a_stale_one_is_never_saved(
    opener: Callable[[], Memoro],
) -> None:
    first = opener()
    _record(first, 0, 60)
    _results(first)
    store: Any = first.store
    store.saver.flush()
    assert len(_saved_kinds(first)) == 2
    [(generation, copy)] = _copies(
        first,
        "SELECT generation, data FROM search_indexes WHERE user_id = ?"
        " AND kind = 'keywords' AND part = 0",
    )

    assert first.delete_conversation(USER, "c1")
    assert _saved_kinds(first) == []
    store._keep_index(
        USER, "keywords", generation, memoryview(bytes(copy))
    )  # built before the deletion
    assert _saved_kinds(first) == []

    again = opener()
    hits = again.search(USER, "heron kestrel boat", limit=50)
    assert hits and all(h.conversation_id != "c1" for h in hits)
    assert {h.conversation_id for h in hits} <= {"c0", "c2", "c3", "c4"}
    again.store.saver.flush()  # type: ignore[attr-defined]
    assert len(_saved_kinds(again)) == 2  # built again, at the new generation
    assert _results(again) == _results(first)


def test_a_small_user_is_not_saved(opener: Callable[[], Memoro]) -> None:
    service = opener()
    _record(service, 0, 10)
    _results(service)
    service.store.saver.flush()  # type: ignore[attr-defined]
    assert _saved_kinds(service) == []


def test_a_damaged_copy_is_built_again_not_an_error(opener: Callable[[], Memoro]) -> None:
    first = opener()
    _record(first, 0, 60)
    built = _results(first)
    first.store.saver.flush()  # type: ignore[attr-defined]
    store: Any = first.store
    with store._write(USER) as conn:  # the last part of every copy cut short
        conn.execute(
            "UPDATE search_indexes SET data = substr(data, 1, 100) WHERE user_id = ?"
            " AND part = (SELECT max(part) FROM search_indexes s WHERE s.user_id = ?"
            " AND s.kind = search_indexes.kind)",
            (USER, USER),
        )
    assert _results(opener()) == built
