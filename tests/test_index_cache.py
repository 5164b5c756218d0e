"""The in-memory search indexes both backends search in (exercised on
SQLite; PostgreSQL runs the same code): one byte budget for every user's
keyword postings and vectors (least recently searched dropped first), and
compact vectors whose search still ranks exactly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memoro.errors import ConfigError
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.memory import bm25, int8, vectors
from memoro.store.memory.budget import Budget
from memoro.store.memory.source import Since
from memoro.store.memory.vectors import Quantized, Rows, Scorer, _Groups
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder

USERS = ("u1", "u2", "u3")


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Memoro]:
    store = SqliteStore(tmp_path / "memoro.db")
    memoro = Memoro(store, Settings(home=tmp_path), embedder=HashEmbedder(), worker=False)
    for user in USERS:
        for i in range(30):
            memoro.record_turn(user, f"c{i % 4}", f"{user} saw heron number {i}", f"noted {i}")
    memoro.index_pending()
    yield memoro
    memoro.close()


def budget(memoro: Memoro) -> Budget:
    store = memoro.store
    assert isinstance(store, SqliteStore)
    return store.budget


def cached_users(memoro: Memoro) -> list[tuple[str, str]]:
    """(kind, user) of every cached entry, least recently used first."""
    found = []
    for entry in budget(memoro).order():
        assert isinstance(entry, tuple)
        kind, key = entry
        found.append((kind, key if kind == "keywords" else key[0]))
    return found


def test_the_budget_drops_the_least_recently_searched_users_and_never_exceeds_its_bytes(
    service: Memoro,
) -> None:
    service.search("u1", "heron")
    one_user = budget(service).used
    assert one_user > 0
    budget(service).limit = 2 * one_user  # room for two users of this size
    for user in ("u2", "u3", "u1"):
        service.search(user, "heron")
        assert budget(service).used <= budget(service).limit
    # a search reads the keyword index, then the vectors, in one read
    assert cached_users(service) == [
        ("keywords", "u3"),
        ("vectors", "u3"),
        ("keywords", "u1"),
        ("vectors", "u1"),
    ]


def test_a_search_after_eviction_returns_the_same_results(service: Memoro) -> None:
    before = {user: service.search(user, "heron number 7", limit=10) for user in USERS}
    budget(service).limit = 1  # nothing stays
    for user in USERS:
        assert service.search(user, "heron number 7", limit=10) == before[user]
    assert budget(service).used == 0 and cached_users(service) == []


def test_a_user_larger_than_the_whole_budget_is_searched_but_not_kept(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "memoro.db", cache_mb=1)
    memoro = Memoro(store, Settings(home=tmp_path), embedder=HashEmbedder(dim=1024), worker=False)
    for i in range(400):  # 400 vectors of 1024 float32 read: more than 1 MB
        memoro.record_turn("big", "c", f"the heron {i}", "x")
    memoro.index_pending()
    (hit,) = memoro.search("big", "heron 399", limit=1)
    assert hit.text.startswith("the heron 399")
    assert budget(memoro).used <= 1 << 20
    memoro.close()


def test_refreshes_and_merged_tails_index_exactly_as_a_fresh_load(
    service: Memoro, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bm25, "TAIL_LIMIT", 7)
    service.search("u1", "heron")
    for round in range(4):  # some refreshes stay in the tail, some merge it
        for i in range(3 + 2 * round):
            service.record_turn("u1", f"n{round}", f"another heron {round} {i}", "late")
        service.index_pending()
        service.search("u1", "heron")
    store = service.store
    assert isinstance(store, SqliteStore)
    fresh = SqliteStore(store.path)
    query = service.search("u1", "heron another late 3", limit=50)
    again = Memoro(fresh, Settings(home=tmp_path), embedder=HashEmbedder(), worker=False)
    assert again.search("u1", "heron another late 3", limit=50) == query
    turns = sorted({t for _, t, _ in store.keyword_search("u1", "heron", 500)})
    assert store.turn_context("u1", turns) == fresh.turn_context("u1", turns)
    assert sorted(store.keyword_search("u1", "heron", 500)) == sorted(
        fresh.keyword_search("u1", "heron", 500)
    )
    again.close()


def other_server(memoro: Memoro, tmp_path: Path) -> Memoro:
    """A second process's view of the same database: what it indexes does
    not touch ``memoro``'s cached indexes."""
    store = memoro.store
    assert isinstance(store, SqliteStore)
    return Memoro(
        SqliteStore(store.path), Settings(home=tmp_path), embedder=HashEmbedder(), worker=False
    )


def test_context_reads_again_for_a_turn_indexed_after_the_index_was_read(
    service: Memoro, tmp_path: Path
) -> None:
    store = service.store
    assert store.keyword_search("u1", "heron", 10)  # the index is read now
    other = other_server(service, tmp_path)
    late = other.record_turn("u1", "c9", "a late egret", "seen")
    other.index_pending()
    # as when the semantic side, which reads later, finds the new turn
    context = store.turn_context("u1", [late.turn_id])
    assert context.neighbors == {late.turn_id: []}
    assert list(context.chunk_turn.values()) == [late.turn_id]
    assert context.turn_lengths == {late.turn_id: 3}  # late, egret, seen
    other.close()


def test_a_conversation_deleted_while_a_search_runs_is_left_out_without_a_warning(
    service: Memoro, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = service.store
    keep = service.record_turn("u1", "keep", "penguins on the ice", "yes")
    service.record_turn("u1", "gone", "penguins in the zoo", "no")
    service.index_pending()
    search_view = store.search_view

    def deleted_in_between(*args: object) -> object:
        # the indexes are read; the conversation goes before the texts are
        view = search_view(*args)  # type: ignore[arg-type]
        service.delete_conversation("u1", "gone")
        return view

    monkeypatch.setattr(store, "search_view", deleted_in_between)
    hits = service.search("u1", "penguins", limit=50)
    assert hits.warnings == ()  # not "not yet embedded": the turn is simply gone
    assert keep.turn_id in [h.turn_id for h in hits]
    assert all(h.conversation_id != "gone" for h in hits)


@pytest.mark.parametrize("seed", range(3))
def test_postings_are_sorted_by_term_even_where_terms_share_their_leading_bits(
    seed: int,
) -> None:
    """The postings sort looks at 32 leading bits first: terms that share
    them (a few in any large history) still end up grouped and in order,
    each term's postings in the order they came, as a full stable sort."""
    rng = np.random.default_rng(seed)
    vocabulary = rng.integers(0, 1 << 62, 400, dtype=np.int64)
    shared = vocabulary[0] >> 31 << 31
    vocabulary[::4] = shared | rng.integers(0, 1 << 31, 100, dtype=np.int64)
    terms = vocabulary[rng.integers(0, 400, 20_000)]
    order, ordered = bm25._by_term(terms)
    expected = np.argsort(terms, kind="stable")
    assert np.array_equal(order, expected)
    assert np.array_equal(ordered, terms[expected])
    docs = np.arange(len(terms), dtype=np.int32)
    built = bm25._Postings.build([(terms, docs, np.ones(len(terms), np.uint16))])
    for term in vocabulary[:40].tolist():
        found, _ = built.find(term)
        assert sorted(found.tolist()) == np.flatnonzero(terms == term).tolist()


@pytest.mark.parametrize("limit", [1, 7, 40, 500])
def test_keyword_hits_with_equal_scores_come_in_chunk_order_whatever_the_load_order(
    limit: int,
) -> None:
    """Equal BM25 scores are ordered by chunk id, also at the cut: a full
    build and a saved copy plus newer chunks number documents differently
    and must still rank alike (C4)."""
    rng = np.random.default_rng(limit)
    chunk = rng.permutation(300).astype(np.int64) + 1000
    scores = rng.choice(np.array([0, 0.5, 1.25, 2.0], np.float32), 300)
    expected = sorted(range(300), key=lambda d: (-scores[d], chunk[d]))
    expected = [d for d in expected if scores[d] > 0][:limit]
    for _ in range(3):
        hits = rng.permutation(np.flatnonzero(scores > 0))
        best = bm25._best(hits, scores, chunk, limit)
        assert best.tolist() == expected


def test_loads_pause_the_garbage_collector_until_the_last_one_ends() -> None:
    """Bulk loads on two threads share one pause of the cyclic collector;
    it runs again after the last, and stays off if it was off before."""
    import gc

    from memoro.store.memory.budget import bulk_load

    assert gc.isenabled()
    first, second = bulk_load(), bulk_load()
    first.__enter__()
    second.__enter__()
    assert not gc.isenabled()
    first.__exit__(None, None, None)
    assert not gc.isenabled()  # the second load still runs
    second.__exit__(None, None, None)
    assert gc.isenabled()
    gc.disable()
    try:
        with bulk_load():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def near_ties(seed: int, chunks: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Vectors (several windows for some chunks) that differ from each other
    by about as much as int8 rounding does, so a coarse ranking is wrong."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(dim).astype(np.float32)
    windows = rng.integers(1, 4, chunks)
    rows = base + 0.3 * rng.standard_normal((int(windows.sum()), dim)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows, np.repeat(np.arange(chunks, dtype=np.int64) + 100, windows)


def scorer(rows: np.ndarray, row_chunk: np.ndarray, query: np.ndarray) -> Scorer:
    start = np.flatnonzero(np.diff(row_chunk, prepend=-1))
    quantized = Quantized.of(rows)
    groups = _Groups(
        Rows.of(quantized),
        start,
        row_chunk[start],
        row_chunk[start] * 10,  # the turn of each chunk
        np.maximum.reduceat(quantized.error, start),
    )
    return Scorer(groups, query)


@pytest.mark.parametrize("segment", [vectors.SEGMENT, 700])
@pytest.mark.parametrize("seed", range(5))
def test_compact_vectors_rank_the_top_chunks_exactly_as_float32_does(
    seed: int, segment: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also with most rows sealed (700 a segment here), whose coarse scores
    come from the query in integers: their bound widens by as much, and the
    top chunks are still exactly float32's."""
    monkeypatch.setattr(vectors, "SEGMENT", segment)
    rows, row_chunk = near_ties(seed, 3000, 96)
    query = rows[7] + 1e-3 * np.random.default_rng(seed + 100).standard_normal(96)
    query = (query / np.linalg.norm(query)).astype(np.float32)
    exact_rows = rows @ query
    exact = {int(c): float(exact_rows[row_chunk == c].max()) for c in np.unique(row_chunk)}
    ranked = sorted(exact, key=lambda c: -exact[c])
    found = scorer(rows, row_chunk, query)
    top = found.top(50)
    assert [c for c, _, _ in top] == ranked[:50]
    assert [t for _, t, _ in top] == [c * 10 for c in ranked[:50]]
    assert [s for _, _, s in top] == pytest.approx([exact[c] for c in ranked[:50]], abs=1e-5)
    some = [*ranked[500:520], 5]  # 5 is no chunk
    assert found.scores(some) == pytest.approx({c: exact[c] for c in ranked[500:520]}, abs=1e-5)


def test_the_coarse_scan_alone_would_misrank_these_vectors() -> None:
    """The test above can fail: int8 alone gets this order wrong."""
    rows, _ = near_ties(0, 3000, 96)
    query = rows[7]
    quantized = Quantized.of(rows)
    coarse = quantized.coarse_scores(query)
    assert list(np.argsort(-coarse)[:50]) != list(np.argsort(-(rows @ query))[:50])


def test_cache_mb_is_a_whole_number_of_megabytes(tmp_path: Path) -> None:
    settings = Settings.from_env({"MEMORO_CACHE_MB": "512", "MEMORO_HOME": str(tmp_path)})
    assert settings.cache_mb == 512
    store = settings.open_store()
    assert store.budget.limit == 512 << 20
    store.close()
    assert Settings.from_env({"MEMORO_HOME": str(tmp_path)}).cache_mb == 256
    for bad in ("0", "-5", "1.5", "lots", "2000000"):
        with pytest.raises(ConfigError, match=r"MEMORO_CACHE_MB must be a whole number"):
            Settings.from_env({"MEMORO_CACHE_MB": bad, "MEMORO_HOME": str(tmp_path)})


def test_merged_postings_keep_each_terms_chunks_in_order_so_coverage_is_exact(
    service: Memoro, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The share of a query the best match holds is found by a binary search
    of each term's postings: they must list their chunks in index order
    after a tail merges into the main postings (built from several pieces)."""
    monkeypatch.setattr(bm25, "TAIL_LIMIT", 7)
    store = service.store
    assert isinstance(store, SqliteStore)
    service.search("u1", "heron")
    for round in range(3):
        for i in range(8):  # each round merges the tail
            service.record_turn("u1", f"m{round}", f"a grey heron {round} {i} wades", "late")
        service.index_pending()
        service.search("u1", "heron")
    index = store.keywords._users["u1"]
    for a, b in zip(index.main.starts[:-1], index.main.starts[1:], strict=True):
        assert np.all(np.diff(index.main.docs[a:b]) > 0)
    fresh = SqliteStore(store.path)
    for query in ("grey heron wades", "heron number 7", "saw heron 2 wades", "late heron"):
        assert store.keyword_search("u1", query, 10).coverage == pytest.approx(
            fresh.keyword_search("u1", query, 10).coverage
        )
    fresh.close()


def test_what_two_searches_read_since_the_index_was_cached_is_added_once(
    service: Memoro,
) -> None:
    """Two searches at once can read the same newly indexed chunks; the
    second to add them finds them there and adds nothing."""
    store = service.store
    assert isinstance(store, SqliteStore)
    model = HashEmbedder().model_id
    service.search("u1", "heron")
    index, entry = store.keywords.cached("u1"), store.vectors.cached("u1", model)
    assert index is not None and entry is not None
    since = Since(index.max_chunk, model, entry.max_id)
    service.record_turn("u1", "c9", "a heron again", "late")
    service.index_pending()
    found = store._changes("u1", since)
    assert len(found.chunks.ids) == 1 and sum(len(v.ids) for v in found.vectors) == 1
    for _ in range(2):
        assert store.keywords.take("u1", index, found) is not None
        assert store.vectors.take("u1", model, entry, found) is not None
    fresh = SqliteStore(store.path)
    assert sorted(index.chunk.tolist()) == sorted(fresh.keywords._fresh("u1").chunk.tolist())
    assert store.keyword_search("u1", "heron again", 50) == fresh.keyword_search(
        "u1", "heron again", 50
    )
    query = HashEmbedder().embed_query("heron again")
    assert store.semantic("u1", model, query).top(50) == fresh.semantic("u1", model, query).top(50)
    fresh.close()


def test_the_int8_products_graph_is_the_one_onnx_builds() -> None:
    """The scan's ONNX graph is kept serialized (building it imports the
    ``onnx`` package, seconds); it must be what ``onnx`` builds."""
    assert int8.graph() == int8.GRAPH


def test_sealed_rows_score_as_the_rows_they_were_and_their_copy_saves_them_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows sealed a segment at a time — loaded at once or added a few at a
    time — keep every value: their fine scores are those of the same rows
    unsealed (within 1e-6), and ``full`` gives back every row."""
    monkeypatch.setattr(vectors, "SEGMENT", 100)
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((437, 64)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1)[:, None]
    whole = Quantized.of(rows)
    grown = Rows.of(Quantized.of(rows[:30]))
    for a in range(30, 437, 61):
        grown = grown.extend(Quantized.of(rows[a : a + 61]))
    for sealed in (Rows.of(whole), grown):
        assert len(sealed.sealed) == 4 and len(sealed) == 437
        back = sealed.full()
        for name in ("coarse", "fine", "scale", "fine_scale", "error"):
            assert np.array_equal(getattr(back, name), getattr(whole, name))
        query = rows[11]
        coarse, extra = sealed.coarse_scores(query)
        assert extra is not None and float(extra.max()) < 1e-5
        assert np.allclose(coarse, whole.coarse_scores(query), atol=1e-6)
        picked = np.array([0, 5, 99, 100, 250, 399, 400, 436])
        assert np.allclose(
            sealed.fine_scores(picked, query, coarse), whole.fine_scores(picked, query), atol=1e-6
        )
