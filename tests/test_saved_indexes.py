"""Saved copies of large users' in-memory search indexes, on both backends:
a server that starts (or any other server) reads a large user's copy on its
first search instead of building the index from every chunk, finds exactly
what a full build finds, adds what was indexed since, and never reads a copy
that a deletion made stale — the deletion removes it (C4, C6). The worker
keeps the copies current after indexing (C2), a purge (C6) and a reindex (C8)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memoro.history import worker
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
    (each a server starting); a user of 40 chunks counts as large, a copy
    is stored in parts of 4 KB (of 4 MB in earnest), and vectors are sealed
    16 at a time (``vectors.SEGMENT``), as a large user's are."""
    monkeypatch.setattr(saved, "SAVE_MIN", 40)
    monkeypatch.setattr(saved, "PART_BYTES", 4096)
    monkeypatch.setattr(vectors, "SEGMENT", 16)
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
        # every other answer long enough that its question's own terms count
        answer = f"noted {i}" + " and the reply goes on at length" * 10 * (i % 2)
        service.store.record_turns(USER, [NewTurn(f"c{i % 5}", f"{text} {i}", answer)])
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


def _drop_copies(service: Memoro) -> None:
    store: Any = service.store
    with store._write(USER) as conn:
        conn.execute("DELETE FROM search_indexes WHERE user_id = ?", (USER,))


def test_indexing_keeps_a_large_users_copies_so_no_first_search_builds(
    opener: Callable[[], Memoro], monkeypatch: pytest.MonkeyPatch
) -> None:
    indexer = opener()
    _record(indexer, 0, 60)  # indexed by the worker; nobody has searched
    indexer.store.saver.flush()  # type: ignore[attr-defined]
    embedder = HashEmbedder()
    assert _saved_kinds(indexer) == ["keywords", f"vectors {embedder.model_id}"]

    with monkeypatch.context() as patched:
        _no_full_build(patched)
        from_copy = _results(opener())
    rebuilt = opener()
    _drop_copies(rebuilt)
    assert from_copy == _results(rebuilt)  # the same as a build from every row


def test_a_purge_saves_the_copies_again_at_the_new_generation(
    opener: Callable[[], Memoro], monkeypatch: pytest.MonkeyPatch
) -> None:
    indexer = opener()
    _record(indexer, 0, 60)
    assert indexer.delete_conversation(USER, "c1")
    assert _saved_kinds(indexer) == []  # the deletion took the copies with it
    indexer.index_pending()  # the purge
    indexer.store.saver.flush()  # type: ignore[attr-defined]
    assert len(_saved_kinds(indexer)) == 2

    with monkeypatch.context() as patched:
        _no_full_build(patched)
        hits = opener().search(USER, "heron kestrel boat", limit=50)
    assert hits and {h.conversation_id for h in hits} <= {"c0", "c2", "c3", "c4"}


def test_a_reindex_saves_the_copies_of_the_users_it_changed(
    opener: Callable[[], Memoro], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first = opener()
    _record(first, 0, 60)
    other = HashEmbedder("test/other")
    switched = Memoro(first.store, Settings(home=tmp_path), embedder=other, worker=False)
    assert switched.reindex(drop_other_models=True) == 60  # drops the old model's vectors
    first.store.saver.flush()  # type: ignore[attr-defined]
    assert _saved_kinds(first) == ["keywords", f"vectors {other.model_id}"]

    def refuse(*args: Any) -> None:
        raise AssertionError("the keyword index was built from every chunk")

    monkeypatch.setattr(bm25.KeywordIndex, "_load", staticmethod(refuse))
    assert opener().store.keyword_search(USER, "heron", 5)  # the copy is current


def test_a_small_uncached_user_is_not_prepared(opener: Callable[[], Memoro]) -> None:
    service = opener()
    _record(service, 0, 10)
    store: Any = service.store
    assert not store.prepare_search(USER, HashEmbedder().model_id)
    assert USER not in store.keywords._users  # nothing built, nothing held
    service.search(USER, "heron", limit=5)
    assert store.prepare_search(USER, HashEmbedder().model_id)  # cached: kept current


def test_a_busy_worker_prepares_a_changed_user_before_it_runs_out_of_jobs(
    opener: Callable[[], Memoro], monkeypatch: pytest.MonkeyPatch
) -> None:
    service = opener()
    prepared: list[int] = []
    store: Any = service.store
    real = store.prepare_search

    def counting(user_id: str, model: str | None) -> bool:
        prepared.append(store.count_jobs()["pending"])
        return bool(real(user_id, model))

    monkeypatch.setattr(store, "prepare_search", counting)
    monkeypatch.setattr(worker, "PREPARE_EVERY", 0.0)
    service.worker.batch = 5
    _record(service, 0, 20)
    assert prepared[0] > 0  # while jobs were still waiting
    assert prepared[-1] == 0  # and once the queue was empty


def test_a_failed_preparation_loses_no_job(
    opener: Callable[[], Memoro], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    service = opener()
    store: Any = service.store

    def broken(user_id: str, model: str | None) -> bool:
        raise RuntimeError("disk full")

    monkeypatch.setattr(store, "prepare_search", broken)
    _record(service, 0, 12)
    assert store.count_jobs() == {"pending": 0, "running": 0, "failed": 0}
    assert "preparing the search indexes" in caplog.text
    assert len(service.search(USER, "heron", limit=20)) > 0
