"""The worker that drains the durable job queue: index finished turns
(chunk, embed, store — no LLM involved) or purge a deleted conversation.
It runs in a thread inside ``memoro serve``/the Python API, or as its
own process (``memoro worker``); any number can share one database. On
PostgreSQL, a worker is woken by NOTIFY the moment any process queues a job.

Jobs are claimed in batches — live turns first, then imports round-robin
across users — and the turns of a batch are embedded together, since the
model is fastest on several windows at once; each job still commits on its
own, so a crash loses nothing and indexes nothing twice. A job that fails is
retried with exponential backoff; after MAX_ATTEMPTS it is set aside as
failed with its error (``memoro jobs``) and never blocks the jobs behind it.
When it runs out of due jobs, the worker brings the search indexes of the
large users whose chunks it changed up to date, so the copies of them kept
in the database follow (``prepare_changed``), and queues the jobs that come
due with time rather than with a write (``Schedule``: memory reviews).

Keyword search never waits on the embedding model: when the model cannot be
loaded (its weights are not installed), turns are chunked and indexed for
keyword search all the same, and the worker gives those chunks their vectors
once the model loads (``add_missing_vectors``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from memoro import metrics
from memoro.errors import ConfigError, MemoroError, StoreError
from memoro.history.chunking import chunk, turn_text
from memoro.history.embed import Embedder, LocalEmbedder
from memoro.models import Job
from memoro.store.base import Store, TurnIndex

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Floats = npt.NDArray[np.float32]

log = logging.getLogger("memoro.worker")

MAX_ATTEMPTS = 5
LEASE_SECONDS = 60.0
IDLE_POLL_SECONDS = 1.0
BATCH_JOBS = 32
"""Jobs claimed at once."""
GROUP_CHARS = 48_000
"""Text embedded in one call (about 50 model windows, a second or two); the
leases of a batch's remaining jobs are renewed between groups."""

T = TypeVar("T")


CGROUP = Path("/sys/fs/cgroup")


def usable_cores(cgroup: Path = CGROUP) -> int:
    """The CPU cores this process may use: those it may run on (its
    affinity, not the host's count), at most its cgroup's CPU limit rounded
    up (a container started with ``--cpus 2`` on a 16-core host uses 2)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    limit = cgroup_cpu_limit(cgroup)
    return max(1, min(cores, limit)) if limit is not None else cores


def cgroup_cpu_limit(cgroup: Path = CGROUP) -> int | None:
    """The CPU limit of the cgroup mounted at ``cgroup`` (a container's
    own), in whole cores rounded up; None without one. cgroup v2 keeps it
    in ``cpu.max`` ("200000 100000", or "max 100000" for none), v1 in
    ``cpu/cpu.cfs_quota_us`` and ``cpu/cpu.cfs_period_us`` (-1: none)."""
    try:
        v2 = cgroup / "cpu.max"
        if v2.is_file():
            quota, period = v2.read_text().split()[:2]
        else:
            quota = (cgroup / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (cgroup / "cpu" / "cpu.cfs_period_us").read_text().strip()
        if quota in ("max", "-1") or int(period) <= 0:
            return None
        return max(1, -(-int(quota) // int(period)))
    except (OSError, ValueError):
        return None


def _hostname() -> str:
    """This machine's name: socket.gethostname() without loading socket
    where os.uname() says the same (every command makes a worker's name)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


def backoff(attempts: int) -> float:
    """Seconds before retry number ``attempts`` + 1."""
    return float(min(2**attempts, 300))


@dataclass(frozen=True)
class Lease:
    """What a job handler holds: the worker's name (to finish the job in the
    same transaction as its result) and a way to keep the job past its
    lease while it is still at work."""

    worker: str
    renew: Callable[[], None]


Handler = Callable[[Job, Lease], None]
"""Runs one job of a kind the worker does not know itself, and finishes it."""


@dataclass(frozen=True)
class Schedule:
    """Jobs that come due with time rather than with a write: every
    ``every`` seconds the worker calls ``queue``, which queues the ones due
    now as ordinary jobs (their handler runs them) and says how many."""

    every: float
    queue: Callable[[], int]


PREPARE_EVERY = 300.0
"""Seconds a user whose chunks changed waits, while the worker is still
busy, before their search indexes are brought up to date (at once when the
worker runs out of due jobs)."""

SWEEP_EVERY = 3600.0
"""Seconds between a worker's looks for uploads cut off by a server that
stopped mid-way (``Store.drop_stale_uploads``) and, with a retention period,
for conversations past it (``Store.expire_conversations``)."""

MODEL_RETRY_SECONDS = 60.0
"""How often a worker whose embedding model could not be loaded tries again,
to give the chunks indexed meanwhile their vectors."""
VECTOR_BATCH = 32
"""Chunks given their vectors at once, between the worker's looks at its jobs."""

UNREACHABLE_STOP_SECONDS = 2.0
"""How long a stop waits for the worker's threads while the database
cannot be reached: a thread waiting on it then waits for nothing, and the
jobs it holds go back to the queue when their leases end."""

LONG_JOBS = frozenset({"import_file", "review_block"})
"""Kinds that can take minutes: run alone, the rest of their batch given back."""


@dataclass
class _Indexing:
    job: Job
    turn_id: int
    question: str
    chunks: list[str]


class _Failed(Exception):
    """A step failed and its job was released for a retry."""


_FAILED: list[Floats] = []
"""Stands for the vectors of a turn whose embedding failed."""


class Worker:
    """Claims due jobs a batch at a time and runs them, on ``threads``
    threads at once (one per core by default). Each thread embeds one model
    window at a time on one core, so while one thread writes its results to
    the database another is embedding; measured, that indexes 40-60 % more
    turns per second than one thread whose model runs use every core."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder | None,
        name: str | None = None,
        *,
        threads: int = 1,
        lease_seconds: float = LEASE_SECONDS,
        retry_after: Callable[[int], float] = backoff,
        batch: int = BATCH_JOBS,
        handlers: Mapping[str, Handler] | None = None,
        model_retry: float = MODEL_RETRY_SECONDS,
        retain_days: int = 0,
        schedules: Sequence[Schedule] = (),
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.handlers = dict(handlers or {})
        self.schedules = list(schedules)
        self._scheduled = [-s.every for s in self.schedules]  # monotonic: none yet
        self.name = name or f"{_hostname()}:{os.getpid()}:{os.urandom(4).hex()}"
        self.threads = max(1, threads)
        self.lease_seconds = lease_seconds
        self.retry_after = retry_after
        self.batch = batch
        self._stop = threading.Event()
        self._wakes = [threading.Event() for _ in range(self.threads)]
        self._running: list[threading.Thread] = []
        self._progress = threading.Lock()
        self._changed: dict[str, float] = {}  # user -> when first changed since prepared
        self._swept = -SWEEP_EVERY  # monotonic time of the last sweep: none yet
        self._upkeep = threading.Lock()  # guards the two above
        self._vectors_due = False  # chunks were indexed without the model's vectors
        self.model_retry = model_retry
        self.retain_days = retain_days  # 0: conversations are kept for ever
        self._retry_model_at = 0.0  # monotonic time
        self._unreachable = False  # the database could not be reached lately
        self._reach = threading.Lock()  # guards the one above

    def run_once(self, user_id: str | None = None) -> int:
        """Claim a batch of due jobs (only ``user_id``'s, if given) and run
        it in this thread; return how many jobs were claimed (0: none was
        due). Told to stop, it gives back what it has not started."""
        claimed = self.store.claim_jobs(self.name, self.lease_seconds, self.batch, user_id=user_id)
        left = list(claimed)
        try:
            while left and not self._stop.is_set():
                self._run_group(left)
                if left:  # a long batch keeps hold of what it has not reached
                    self.store.extend_leases(left, self.name, self.lease_seconds)
        except BaseException:
            # interrupted (Ctrl-C): every job still held goes back at once
            # instead of waiting for its lease to run out (a finished job is
            # gone and a failed one released, so neither is touched)
            self.store.return_jobs(claimed, self.name)
            raise
        if left:
            self.store.return_jobs(left, self.name)
        return len(claimed)

    def run_until_idle(
        self, progress: Callable[[int], None] | None = None, *, user_id: str | None = None
    ) -> int:
        """Run batches on this thread and ``threads - 1`` more until no job
        is due; return how many jobs ran. ``progress`` gets the number of
        jobs of each batch (from any of the threads, one call at a time)."""
        helpers = [_Drain(self, progress, user_id) for _ in range(self.threads - 1)]
        for helper in helpers:
            helper.start()
        try:
            ran = self._drain(progress, user_id)
        except BaseException:
            self._stop.set()  # the helpers give back what they hold and end
            for helper in helpers:
                helper.join()
            self._stop.clear()
            raise
        for helper in helpers:
            helper.join()
            if helper.error is not None:
                raise helper.error
            ran += helper.ran
        return ran

    def _drain(self, progress: Callable[[int], None] | None, user_id: str | None) -> int:
        ran = 0
        while not self._stop.is_set():
            n = self.run_once(user_id)
            if not n:
                break
            ran += n
            if progress is not None:
                with self._progress:
                    progress(n)
            self.prepare_changed(waited=PREPARE_EVERY)
        self.prepare_changed()
        swept, scheduled = self._sweep(), self._schedule()
        if (swept or scheduled) and not self._stop.is_set():
            ran += self._drain(progress, user_id)  # the purges or scheduled jobs it queued
        return ran

    def _schedule(self) -> int:
        """Queue the scheduled jobs that are due, each schedule at most once
        in its period; how many were queued."""
        queued = 0
        for i, schedule in enumerate(self.schedules):
            now = time.monotonic()
            with self._upkeep:
                if now - self._scheduled[i] < schedule.every:
                    continue
                self._scheduled[i] = now
            try:
                queued += schedule.queue()
            except Exception:  # the next period tries again
                log.warning("queueing scheduled jobs failed", exc_info=True)
        return queued

    def _sweep(self) -> bool:
        """Delete uploads cut off by a stopped server and conversations past
        the retention period, once in SWEEP_EVERY; whether it queued purges."""
        now = time.monotonic()
        with self._upkeep:
            if now - self._swept < SWEEP_EVERY:
                return False
            self._swept = now
        try:
            if dropped := self.store.drop_stale_uploads():
                log.info("deleted %d upload(s) cut off by a server that stopped", dropped)
        except Exception as exc:  # the next sweep tries again
            log.warning(
                "deleting uploads cut off by a stopped server failed: %s",
                one_line(exc),
                exc_info=not isinstance(exc, StoreError),
            )
        if not self.retain_days:
            return False
        try:
            cutoff = datetime.now(UTC) - timedelta(days=self.retain_days)
            expired = self.store.expire_conversations(cutoff)
        except Exception as exc:  # the next sweep tries again
            log.warning(
                "deleting conversations past retention failed: %s",
                one_line(exc),
                exc_info=not isinstance(exc, StoreError),
            )
            return False
        if expired:
            log.info("deleted %d conversation(s) older than %d days", expired, self.retain_days)
        return expired > 0

    def note_changed(self, user_ids: Iterable[str]) -> None:
        """The chunks or vectors of ``user_ids`` changed."""
        now = time.monotonic()
        with self._upkeep:
            for user_id in user_ids:
                self._changed.setdefault(user_id, now)

    def prepare_changed(self, waited: float = 0.0) -> None:
        """Bring the search indexes of the users whose chunks changed at
        least ``waited`` seconds ago up to date, as their next search would:
        a large user's saved copies then follow what was indexed, so their
        first search on any server loads a copy instead of building from
        every row (seconds at 100k chunks)."""
        now = time.monotonic()
        with self._upkeep:
            due = [u for u, at in self._changed.items() if now - at >= waited]
            for user_id in due:
                del self._changed[user_id]
        model = self.embedder.model_id if self.embedder is not None else None
        for i, user_id in enumerate(due):
            if self._stop.is_set():  # the rest wait for the next pass
                self.note_changed(due[i:])
                return
            try:
                self.store.prepare_search(user_id, model)
            except Exception as exc:  # an optimisation: the next search builds instead
                log.warning(
                    "preparing the search indexes of a user failed: %s",
                    one_line(exc),
                    exc_info=not isinstance(exc, StoreError),
                )

    def _run_group(self, left: list[Job]) -> None:
        """Run the next job, or the next run of turns to index (up to
        GROUP_CHARS of text), taking them off ``left``."""
        if left[0].kind != "index_turn":
            job = left.pop(0)
            if job.kind in LONG_JOBS and left:  # the rest must not wait for it
                self.store.return_jobs(left, self.name)
                left.clear()
            with contextlib.suppress(_Failed):
                self._guarded(job, self._other, job)
            return
        group: list[_Indexing] = []
        size = 0
        while left and left[0].kind == "index_turn" and size < GROUP_CHARS:
            job = left.pop(0)
            try:
                found = self._guarded(job, self._chunks, job)
            except _Failed:
                continue
            if found is None:  # gone or already indexed
                self.store.finish_job(job, self.name)
                continue
            group.append(found)
            size += sum(map(len, found.chunks))
        if not group:
            return
        try:
            vectors = self._embed([g.chunks for g in group])
        except ConfigError:
            # the model cannot be loaded here (it said why, once): index for
            # keyword search now; the vectors follow when it loads
            self._vectors_due = True
            vectors = [None] * len(group)
        except Exception:  # one bad turn must not fail the others: embed each alone
            vectors = []
            for g in group:
                try:
                    vectors.append(self._guarded(g.job, self._embed, [g.chunks])[0])
                except _Failed:
                    vectors.append(_FAILED)
        by_user: dict[str, list[TurnIndex]] = {}
        for g, embedded in zip(group, vectors, strict=True):
            if embedded is not _FAILED:
                turn = TurnIndex(g.job, g.turn_id, g.chunks, embedded, g.question)
                by_user.setdefault(g.job.user_id, []).append(turn)
        for user_id, turns in by_user.items():
            self._save(user_id, turns)

    def _save(self, user_id: str, turns: list[TurnIndex]) -> None:
        """Store one user's embedded turns in one transaction (one flush to
        disk for the group, not one a turn); if that fails, each turn on its
        own, so a bad turn fails alone."""
        model = self.embedder.model_id if self.embedder else None
        try:
            done = self.store.save_indexes(self.name, turns, model)
        except Exception:  # the turns one by one say which failed
            log.debug("saving %d turns at once failed", len(turns), exc_info=True)
            done = []
            for turn in turns:
                try:
                    done += self._guarded(
                        turn.job, self.store.save_indexes, self.name, [turn], model
                    )
                except _Failed:
                    done.append(False)
        if any(done):
            metrics.observe_indexed(sum(done))
            self.note_changed([user_id])

    def _chunks(self, job: Job) -> _Indexing | None:
        turn_id = int(str(job.payload["turn_id"]))
        turn = self.store.get_turn(job.user_id, turn_id)
        if turn is None or turn.indexed:
            return None
        return _Indexing(job, turn_id, turn.question, chunk(turn_text(turn.question, turn.answer)))

    def _embed(self, turns: list[list[str]]) -> list[list[Floats] | None]:
        """Every chunk of every turn in one call; None for each turn when
        there is no embedder (keyword search only)."""
        if self.embedder is None:
            return [None] * len(turns)
        flat = [c for chunks in turns for c in chunks]
        start = time.perf_counter()
        vectors = self.embedder.embed_documents(flat) if flat else []
        metrics.observe_embedding(len(flat), time.perf_counter() - start)
        out: list[list[Floats] | None] = []
        pos = 0
        for chunks in turns:
            out.append(list(vectors[pos : pos + len(chunks)]))
            pos += len(chunks)
        return out

    def _check_vectors(self) -> None:
        """At start: chunks without a vector from the current model were
        indexed while it could not be loaded (this worker gives them their
        vectors), or by another model (a reindex is the operator's call)."""
        if self.embedder is None:
            return
        model = self.embedder.model_id
        missing, total = self.store.count_chunks_missing_vectors(model)
        if not missing:
            return
        if set(self.store.vector_models()) - {model}:
            log.warning(
                "%d of %d indexed chunks have no vector from %s (the embedding model changed);"
                " search uses keywords alone for their users until `memoro reindex` runs",
                missing,
                total,
                model,
            )
        else:
            self._vectors_due = True

    def _fill_vectors(self) -> bool:
        """Give a batch of chunks indexed without the model their vectors,
        when there are some and the model loads; True if more may wait."""
        if not self._vectors_due or self.embedder is None:
            return False
        if time.monotonic() < self._retry_model_at:
            return False
        model = self.embedder.model_id
        try:
            if set(self.store.vector_models()) - {model}:
                self._vectors_due = False  # a change of model: left to `memoro reindex`
                return False
            done = add_missing_vectors(self.store, self.embedder, VECTOR_BATCH)
        except MemoroError:  # still no model (it said why, once), or the endpoint is down
            self._retry_model_at = time.monotonic() + self.model_retry
            return False
        self.note_changed(done)
        if not done:
            self._vectors_due = False
        return bool(done)

    def _other(self, job: Job) -> None:
        if job.kind == "purge_conversation":
            self.store.purge_conversation(job, self.name, str(job.payload["conversation_id"]))
            self.note_changed([job.user_id])
        elif job.kind in self.handlers:
            renew = lambda: self.store.extend_leases([job], self.name, self.lease_seconds)  # noqa: E731
            self.handlers[job.kind](job, Lease(self.name, renew))
        else:
            raise ValueError(f"unknown job kind {job.kind!r}")

    def _guarded(self, job: Job, step: Callable[..., T], *args: Any) -> T:
        """Run ``step(*args)`` for ``job``. A failure is recorded on the job
        (a retry with backoff, or set aside after MAX_ATTEMPTS) and raises
        _Failed."""
        try:
            return step(*args)
        except Exception as exc:  # any failure is recorded on the job, never lost
            log.warning("job %s (%s) failed: %s", job.id, job.kind, exc)
            retry = self.retry_after(job.attempts) if job.attempts < MAX_ATTEMPTS else None
            self.store.release_job(job, self.name, f"{type(exc).__name__}: {exc}", retry)
            raise _Failed from exc

    def run_forever(self) -> None:
        """Run jobs until ``stop`` is called (a signal handler may call
        it), then wait for the job in hand as ``stop`` does. The jobs run on
        background threads; this one only waits, so that a stop is never
        held up by a database that stopped answering mid-query."""
        self._stop.clear()
        self._start_threads(first=0)
        while not self._stop.wait(IDLE_POLL_SECONDS):
            pass
        self.stop()
        if self._running:
            log.info(
                "stopping without %d worker thread(s) still waiting on the database;"
                " the jobs they hold go back to the queue when their leases end",
                len(self._running),
            )

    # -- in the background ---------------------------------------------------

    def start(self) -> None:
        """Run jobs on background threads until ``stop`` is called, each at
        a lower CPU priority than the process (``yield_to_requests``): in a
        server, its requests come first."""
        if not any(t.is_alive() for t in self._running):
            self._stop.clear()
            self._start_threads(first=0, background=True)

    def wake(self) -> None:
        """A job was queued: every idle thread looks at once."""
        for event in self._wakes:
            event.set()

    def stop(self, timeout: float | None = 30) -> None:
        """Stop after the group of turns in hand, waiting at most
        ``timeout`` seconds for it (UNREACHABLE_STOP_SECONDS while the
        database cannot be reached); jobs not started yet go back to the
        queue at once."""
        self._stop.set()
        self.wake()
        if self._unreachable and (timeout is None or timeout > UNREACHABLE_STOP_SECONDS):
            timeout = UNREACHABLE_STOP_SECONDS
        self._join(timeout)

    def _start_threads(self, first: int, background: bool = False) -> None:
        # on PostgreSQL, NOTIFY wakes the worker as soon as any process queues
        # a job; polling stays for retries that come due and for SQLite
        listener = threading.Thread(
            target=self.store.listen_for_jobs,
            args=(self.wake, self._stop),
            name="memoro-job-listener",
            daemon=True,
        )
        listener.start()
        self._running = [
            threading.Thread(
                target=self._loop, args=(i, background), name=f"memoro-worker-{i}", daemon=True
            )
            for i in range(first, self.threads)
        ]
        for thread in self._running:
            thread.start()

    def _join(self, timeout: float | None = None) -> None:
        """Wait for the threads, ``timeout`` seconds for all of them."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._running:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        self._running = [t for t in self._running if t.is_alive()]

    def _cannot_reach(self, exc: StoreError) -> None:
        """The database is down or cut off: said once, not on every try
        (nor when the stop itself closed the connections)."""
        with self._reach:
            if self._unreachable or self._stop.is_set():
                return
            self._unreachable = True
        log.warning(
            "cannot reach the database (%s); indexing goes on when it answers", one_line(exc)
        )

    def _reached(self) -> None:
        with self._reach:
            if not self._unreachable:
                return
            self._unreachable = False
        log.info("the database answers again; indexing goes on")

    def _loop(self, i: int, background: bool = False) -> None:
        if background:
            yield_to_requests()
        if i == 0:
            try:
                self._check_vectors()
                if isinstance(self.embedder, LocalEmbedder):
                    self.embedder.warm()  # load (or first build) the model before a search
            except Exception:  # the same error comes back, with its job, in the loop
                log.debug("could not prepare the worker", exc_info=True)
        wake = self._wakes[i]
        while not self._stop.is_set():
            more = False
            try:
                self._drain(None, None)
                more = i == 0 and self._fill_vectors()  # jobs first, a batch at a time
            except StoreError as exc:  # the database is gone or cut off: try again later
                self._cannot_reach(exc)
            except Exception:
                if not self._stop.is_set():
                    log.exception("worker loop error")
            else:
                self._reached()
            if not more:
                wake.wait(IDLE_POLL_SECONDS)
                wake.clear()


def one_line(exc: BaseException) -> str:
    """An error's message on one line (a driver's may take several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


NICE = 10
"""How far below the process's CPU priority a server's worker threads run
(Linux's nice: a thread at +10 gets about a tenth of a core a request thread
also wants, and every core nothing else wants)."""


def yield_to_requests() -> None:
    """Lower this thread's CPU priority by NICE, so a server's requests
    (prompt fetches, searches) never wait for a core behind indexing. Linux
    keeps a priority per thread; elsewhere this thread stays as it is."""
    try:
        me = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, me, min(19, os.getpriority(os.PRIO_PROCESS, me) + NICE))
    except (AttributeError, OSError):  # not Linux, or not allowed: as it was
        log.debug("could not lower the worker thread's priority", exc_info=True)


def add_missing_vectors(store: Store, embedder: Embedder, batch: int) -> dict[str, int]:
    """Embed up to ``batch`` chunks that have no vector from ``embedder``'s
    model and store the vectors beside any other model's; how many chunks of
    each user got theirs (empty: none was missing). Two workers doing this
    at once only repeat work: a chunk's vectors from a model replace its
    earlier ones."""
    model = embedder.model_id
    todo = store.chunks_missing_vectors(model, batch)
    if not todo:
        return {}
    vectors = embedder.embed_documents([text for _, _, text in todo])
    by_user: dict[str, dict[int, Floats]] = {}
    for (chunk_id, user_id, _), v in zip(todo, vectors, strict=True):
        by_user.setdefault(user_id, {})[chunk_id] = v
    for user_id, mine in by_user.items():
        store.add_vectors(model, user_id, mine)
    return {user_id: len(mine) for user_id, mine in by_user.items()}


class _Drain(threading.Thread):
    """One more thread of ``Worker.run_until_idle``."""

    def __init__(
        self, worker: Worker, progress: Callable[[int], None] | None, user_id: str | None
    ) -> None:
        super().__init__(name="memoro-worker-helper", daemon=True)
        self.worker, self.progress, self.user_id = worker, progress, user_id
        self.ran = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.ran = self.worker._drain(self.progress, self.user_id)
        except BaseException as exc:  # handed to the caller's thread
            self.error = exc
