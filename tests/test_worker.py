"""The durable job queue and its worker (C1, C2, C6): nothing pending is
lost to a crash or restart, failures never block the queue, every turn is
indexed exactly once."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memoro.history.worker import MAX_ATTEMPTS, Worker, cgroup_cpu_limit, usable_cores
from memoro.models import JobStatus
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.base import TurnIndex
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder


def _open(path: Path, **kwargs: object) -> Memoro:
    embedder = kwargs.pop("embedder", HashEmbedder())
    return Memoro(
        SqliteStore(path / "memoro.db"),
        Settings(home=path),
        embedder=embedder,
        **kwargs,  # type: ignore[arg-type]
    )


def test_pending_work_survives_a_restart(tmp_path: Path) -> None:
    first = _open(tmp_path, worker=False)
    recorded = first.record_turn("ann", "c", "remember the pelican", "sure")
    first.close()
    second = _open(tmp_path, worker=False)
    assert second.pending_jobs() == 1
    assert second.index_pending() == 1
    assert [h.turn_id for h in second.search("ann", "pelican")] == [recorded.turn_id]
    second.close()


def test_the_background_thread_indexes_without_being_asked(tmp_path: Path) -> None:
    memoro = _open(tmp_path, worker=True)
    recorded = memoro.record_turn("ann", "c", "the walrus question", "answered")
    deadline = time.monotonic() + 60
    while not memoro.search("ann", "walrus"):
        assert time.monotonic() < deadline, "the background worker never indexed the turn"
        time.sleep(0.01)
    assert memoro.search("ann", "walrus")[0].turn_id == recorded.turn_id
    memoro.close()


def test_a_job_that_keeps_failing_is_set_aside_and_never_blocks_the_queue(
    tmp_path: Path,
) -> None:
    memoro = _open(tmp_path, worker=False, embedder=HashEmbedder(fail_on="POISON"))
    memoro.worker = Worker(memoro.store, memoro.embedder, retry_after=lambda n: 0.0)
    bad = memoro.record_turn("ann", "c", "POISON pill", "x")
    good = [memoro.record_turn("ann", "c", f"healthy turn {i}", "ok") for i in range(3)]
    memoro.index_pending()
    (failed,) = memoro.store.list_jobs(JobStatus.FAILED)
    assert failed.payload == {"turn_id": bad.turn_id} and failed.attempts == MAX_ATTEMPTS
    assert failed.last_error is not None and "POISON" in failed.last_error
    assert {h.turn_id for h in memoro.search("ann", "healthy turn", limit=10)} == {
        g.turn_id for g in good
    }
    memoro.worker.embedder = HashEmbedder()
    assert memoro.store.retry_job(failed.id)
    memoro.index_pending()
    assert memoro.store.list_jobs() == []
    memoro.close()


def test_a_failed_attempt_is_retried_later_with_backoff(tmp_path: Path) -> None:
    memoro = _open(tmp_path, worker=False, embedder=HashEmbedder(fail_on="FLAKY"))
    memoro.record_turn("ann", "c", "FLAKY once", "x")
    assert memoro.index_pending() == 1  # one attempt, then it waits
    (job,) = memoro.store.list_jobs()
    assert (job.status, job.attempts) == (JobStatus.PENDING, 1)
    assert job.run_after.timestamp() > time.time()
    memoro.close()


WORKER = """
import sys
from memoro.history.worker import Worker
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder
worker = Worker(SqliteStore(sys.argv[1]), HashEmbedder(delay=0.02), lease_seconds=1.0)
worker.run_forever()
"""


def test_a_worker_killed_mid_job_loses_nothing_and_indexes_each_turn_once(
    tmp_path: Path,
) -> None:
    memoro = _open(tmp_path, worker=False)
    turns = [memoro.record_turn("ann", f"c{i % 7}", f"turn {i} " * 300, "ok") for i in range(60)]
    db = tmp_path / "memoro.db"
    with subprocess.Popen([sys.executable, "-c", WORKER, str(db)]) as proc:
        probe = sqlite3.connect(db, timeout=30)
        deadline = time.monotonic() + 60
        while (
            probe.execute("SELECT count(*) FROM turns WHERE indexed_at IS NOT NULL").fetchone()[0]
            < 10
        ):
            assert time.monotonic() < deadline, "the worker made no progress"
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
    survivor = Worker(memoro.store, memoro.embedder, lease_seconds=1.0)
    deadline = time.monotonic() + 60
    while memoro.pending_jobs():
        assert time.monotonic() < deadline, "a job was lost"
        survivor.run_until_idle()
        time.sleep(0.05)  # a dead worker's lease runs out after one second
    rows = probe.execute("SELECT turn_id, count(*) FROM chunks GROUP BY turn_id").fetchall()
    assert sorted(rows) == sorted((t.turn_id, 1) for t in turns)
    assert probe.execute("SELECT count(*) FROM chunks WHERE length > 0").fetchone()[0] == 60
    assert probe.execute("SELECT count(DISTINCT chunk_id) FROM vectors").fetchone()[0] == 60
    probe.close()
    memoro.close()


def test_after_the_purge_a_deleted_conversation_is_in_no_file_while_the_store_is_open(
    tmp_path: Path,
) -> None:
    memoro = _open(tmp_path, worker=False)
    memoro.record_turn("ann", "keep", "ordinary words about the weather", "sunny")
    for i in range(3):
        memoro.record_turn(
            "ann", "gone", f"xylophonequartz{i} confidential", f"zebracanyon{i} private reply"
        )
    memoro.index_pending()
    memoro.store.checkpoint()  # type: ignore[attr-defined]
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert b"xylophonequartz" in data and b"zebracanyon" in data

    memoro.delete_conversation("ann", "gone")
    memoro.index_pending()  # runs the purge, which truncates the WAL
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    for secret in (b"xylophonequartz", b"zebracanyon", b"confidential", b"private reply"):
        assert secret not in data, secret
    assert b"ordinary words about the weather" in data
    memoro.close()


def test_closing_finishes_the_job_in_hand(tmp_path: Path) -> None:
    """Graceful shutdown: close() waits for the job being indexed, so nothing
    is left half done or stuck as running."""
    memoro = _open(tmp_path, worker=True, embedder=HashEmbedder(delay=0.3))
    recorded = memoro.record_turn("ann", "c", "a slow turn to index", "ok")
    deadline = time.monotonic() + 60
    while not memoro.store.list_jobs(JobStatus.RUNNING):
        assert time.monotonic() < deadline, "the worker never started the job"
        time.sleep(0.005)
    memoro.close()
    reopened = _open(tmp_path, worker=False)
    assert reopened.store.list_jobs() == []
    assert reopened.conversation_turns("ann", "c")[0].indexed
    assert [h.turn_id for h in reopened.search("ann", "slow turn")] == [recorded.turn_id]
    reopened.close()


@pytest.mark.parametrize(
    ("files", "limit"),
    [
        ({"cpu.max": "150000 100000\n"}, 2),  # cgroup v2: 1.5 CPUs round up
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "100000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1),  # v1
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({"cpu.max": "garbage\n"}, None),
        ({}, None),
    ],
)
def test_index_threads_follow_a_containers_cpu_limit(
    tmp_path: Path, files: dict[str, str], limit: int | None
) -> None:
    """A container limited to fewer CPUs than the host's (``--cpus``) indexes
    on that many threads, not on one per host core."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cgroup_cpu_limit(tmp_path) == limit
    cores = usable_cores(tmp_path)
    assert cores == min(len(os.sched_getaffinity(0)), limit or 10**6)


def test_a_turn_whose_index_cannot_be_stored_fails_alone(tmp_path: Path) -> None:
    """A group of turns is stored in one transaction; when that fails, each
    turn is stored on its own, so only the bad one is retried later (C2)."""
    memoro = _open(tmp_path, worker=False)
    bad = memoro.record_turn("ann", "c", "the unstorable one", "x")
    good = [memoro.record_turn("ann", "c", f"healthy turn {i}", "ok") for i in range(3)]
    store = memoro.store
    save = store.save_indexes
    groups = []

    def refuse_the_bad_turn(worker: str, turns: list[TurnIndex], model: str | None) -> list[bool]:
        groups.append(len(turns))
        if any(t.turn_id == bad.turn_id for t in turns):
            raise sqlite3.IntegrityError("this turn cannot be stored")
        return save(worker, turns, model)

    store.save_indexes = refuse_the_bad_turn  # type: ignore[method-assign]
    memoro.index_pending()
    assert groups[0] == 4  # all four at once first
    (job,) = store.list_jobs()
    assert job.payload == {"turn_id": bad.turn_id} and job.attempts == 1
    assert job.last_error is not None and "cannot be stored" in job.last_error
    found = {h.turn_id for h in memoro.search("ann", "healthy turn", limit=10)}
    assert found == {g.turn_id for g in good}
    memoro.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a priority per thread is Linux's")
def test_a_servers_worker_threads_yield_the_cpu_to_its_requests(tmp_path: Path) -> None:
    """The worker threads a serving process starts run NICE below it, so a
    prompt fetch or a search never waits for a core behind indexing; a
    thread that indexes because it was asked to (index_pending) does not."""
    import threading

    from memoro.history.worker import NICE

    base = os.getpriority(os.PRIO_PROCESS, 0)
    memoro = _open(tmp_path, worker=True)
    deadline = time.monotonic() + 60
    while True:
        workers = [t for t in threading.enumerate() if t.name.startswith("memoro-worker-")]
        priorities = {os.getpriority(os.PRIO_PROCESS, t.native_id or 0) for t in workers}
        if workers and priorities == {min(19, base + NICE)}:
            break
        assert time.monotonic() < deadline, f"worker threads at {priorities}, not lowered"
        time.sleep(0.01)
    assert os.getpriority(os.PRIO_PROCESS, 0) == base  # this thread is as it was
    memoro.close()
