"""The job queue's fairness and batching, on SQLite and PostgreSQL: a live
turn never waits behind another user's import, imports take turns, a
command works through its own user's jobs only, and a batch interrupted
halfway gives back what it had not started."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memoro.history.worker import Worker
from memoro.models import JobStatus, NewTurn
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.testing import HashEmbedder
from tests.conftest import _backend


@pytest.fixture(params=["sqlite", "postgres"])
def queue_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    backend = _backend(request, tmp_path)
    yield backend
    backend.close()


def _turns(n: int, topic: str) -> list[NewTurn]:
    return [NewTurn(f"c{i % 20}", f"imported turn {i} about {topic}", "ok") for i in range(n)]


def _wait_until_found(service: Memoro, user: str, query: str, seconds: float) -> float:
    started = time.monotonic()
    while not service.search(user, query, mode="keyword"):
        assert time.monotonic() - started < seconds, f"{user}'s turn was not searchable in time"
        time.sleep(0.01)
    return time.monotonic() - started


def test_a_live_turn_is_searchable_within_seconds_while_another_user_imports_2000(
    queue_store: Any, tmp_path: Path
) -> None:
    # each batch takes a tenth of a second to embed: the import needs 6 s or more
    service = Memoro(
        queue_store, Settings(home=tmp_path), embedder=HashEmbedder(delay=0.1), worker=True
    )
    service.import_turns("importer", _turns(2000, "tides"))
    service.record_turn("live", "chat", "where did I park the bicycle", "level 3")
    # what shows the live turn did not queue behind the import is the import's
    # progress when it was found; the deadline only stops a hung test (a loaded
    # machine slows both alike)
    _wait_until_found(service, "live", "bicycle", seconds=60)
    assert service.pending_jobs("importer") > 1000  # the import is far from done
    service.close()


def test_imports_of_different_users_take_turns(queue_store: Any, tmp_path: Path) -> None:
    service = Memoro(
        queue_store, Settings(home=tmp_path), embedder=HashEmbedder(delay=0.1), worker=True
    )
    service.import_turns("big", _turns(2000, "tides"))
    service.import_turns("small", _turns(40, "kites"))
    started = time.monotonic()
    while service.pending_jobs("small"):
        # the deadline only stops a hung test: the check of the big import below
        # says whether the small one waited for it
        assert time.monotonic() - started < 60, "the small import waited for the big one"
        time.sleep(0.01)
    assert service.pending_jobs("big") > 1000
    service.close()


def test_index_user_works_through_that_users_jobs_only(queue_store: Any, tmp_path: Path) -> None:
    service = Memoro(queue_store, Settings(home=tmp_path), embedder=HashEmbedder(), worker=False)
    service.import_turns("other", _turns(50, "tides"))
    service.import_turns("me", _turns(70, "kites"))
    left: list[int] = []
    assert service.index_user("me", progress=left.append) == 0
    assert left[-1] == 0 and service.pending_jobs("me") == 0
    assert service.pending_jobs("other") == 50
    assert len(service.search("me", "kites", limit=50)) == 50


def test_an_import_is_stored_once_and_indexed_after_live_turns(
    queue_store: Any, tmp_path: Path
) -> None:
    service = Memoro(queue_store, Settings(home=tmp_path), embedder=HashEmbedder(), worker=False)
    first = service.import_turns("ann", _turns(30, "tides"))
    again = service.import_turns("ann", _turns(30, "tides"))
    assert sum(r.created for r in first) == 30 and not any(r.created for r in again)
    live = service.record_turn("ann", "chat", "a live question", "a live answer")
    (job, *rest) = queue_store.claim_jobs("w", 60, 5)
    assert job.payload == {"turn_id": live.turn_id} and not job.bulk
    assert len(rest) == 4 and all(j.bulk for j in rest)


class _Interrupting(HashEmbedder):
    """Embeds one batch, then is interrupted (as by Ctrl-C) in the next."""

    calls = 0

    def embed_documents(self, texts: Sequence[str]) -> list[np.ndarray]:
        self.calls += 1
        if self.calls == 2:
            raise KeyboardInterrupt
        return super().embed_documents(texts)


def test_an_interrupted_batch_gives_back_what_it_had_not_started(
    queue_store: Any, tmp_path: Path
) -> None:
    service = Memoro(queue_store, Settings(home=tmp_path), embedder=HashEmbedder(), worker=False)
    long_turns = [NewTurn("c", f"turn {i} " + "word " * 9000, "ok") for i in range(12)]
    service.import_turns("ann", long_turns)
    worker = Worker(queue_store, _Interrupting(), name="interrupted")
    with pytest.raises(KeyboardInterrupt):
        worker.run_once()
    jobs = queue_store.list_jobs()
    indexed = 12 - len(jobs)
    assert 0 < indexed < 12  # the first group was saved, job by job
    assert all(j.status is JobStatus.PENDING and j.attempts == 0 for j in jobs)
    assert service.index_pending() == len(jobs)
    assert len(service.search("ann", "word", limit=50, mode="keyword")) == 12


def test_bulk_jobs_are_claimed_in_turn_across_users(queue_store: Any, tmp_path: Path) -> None:
    service = Memoro(queue_store, Settings(home=tmp_path), embedder=None, worker=False)
    for user, n in (("a-big", 100), ("b-small", 3), ("c-small", 3)):
        service.import_turns(user, _turns(n, user))
    first = queue_store.claim_jobs("w", 60, 9)
    assert [j.user_id for j in first] == ["a-big"] * 3 + ["b-small"] * 3 + ["c-small"] * 3
    # the next claim starts after the last user served, then wraps around
    second = queue_store.claim_jobs("w", 60, 4)
    assert {j.user_id for j in second} == {"a-big"}
    assert [j.id for j in second] == sorted(j.id for j in second)
    assert min(j.id for j in second) > max(j.id for j in first if j.user_id == "a-big")
