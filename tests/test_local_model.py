"""The default local embedding model: the NumPy encoder reproduces
sentence-transformers, and every part of a long chunk is embedded (C7)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memoro.history.embed import LocalEmbedder
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.sqlite import SqliteStore

REFERENCE = json.loads((Path(__file__).parent / "vectors" / "minilm-reference.json").read_text())


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


@pytest.mark.parametrize("case", REFERENCE["cases"], ids=lambda c: c["text"][:20])
def test_numpy_minilm_matches_sentence_transformers(local: LocalEmbedder, case: dict) -> None:  # type: ignore[type-arg]
    (windows,) = local.embed_documents([case["text"]])
    expected = np.asarray(case["vector"], dtype=np.float32)
    assert windows.shape == (1, 384)
    assert np.abs(windows[0] - expected).max() < 1e-5
    assert np.abs(local.embed_query(case["text"]) - expected).max() < 1e-5


def test_a_long_text_is_embedded_in_overlapping_windows_covering_all_of_it(
    local: LocalEmbedder,
) -> None:
    text = " ".join(f"word{i}" for i in range(600))
    (windows,) = local.embed_documents([text])
    ids, _ = local._encoder().token_ids(text)
    step = local.window - local.overlap
    assert windows.shape[0] == len(range(0, len(ids) - local.overlap, step))
    assert (windows.shape[0] - 1) * step + local.window >= len(ids)
    assert np.allclose(np.linalg.norm(windows, axis=1), 1.0, atol=1e-5)


def test_c7_a_word_near_the_end_of_a_4000_character_chunk_is_found_by_semantic_search(
    tmp_path: Path, local: LocalEmbedder
) -> None:
    memoro = Memoro(
        SqliteStore(tmp_path / "memoro.db"), Settings(home=tmp_path), embedder=local, worker=False
    )
    filler = (
        "We went through the quarterly budget spreadsheet line by line, checking each"
        " department's travel costs, software licences and office supplies against the plan. "
    ) * 24
    ending = "By the way, I finally adopted a small grey kitten and named her Pepper."
    long_turn = memoro.record_turn("ann", "c1", "Budget review notes", f"{filler}{ending}")
    for i, topic in enumerate(["gardening tomatoes", "a trip to Lisbon", "learning the cello"]):
        memoro.record_turn("ann", f"c{i + 2}", f"Tell me about {topic}", f"Sure, {topic}.")
    memoro.index_pending()
    (chunk,) = (
        memoro.store.db.connect()
        .execute(  # type: ignore[attr-defined]
            "SELECT text FROM chunks WHERE turn_id = ?", (long_turn.turn_id,)
        )
        .fetchall()
    )
    assert 3500 < len(chunk[0]) <= 4000 and chunk[0].endswith("Pepper.")
    hits = memoro.search("ann", "did I get a new pet cat?", mode="semantic", limit=1)
    assert hits[0].turn_id == long_turn.turn_id
    memoro.close()
