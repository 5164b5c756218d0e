"""The worker that drains the durable job queue: index finished turns
(chunk, embed, store — no LLM involved, C2) or purge a deleted conversation
(C6). It runs in a thread inside ``memoro serve``/the Python API, or as its
own process (``memoro worker``); any number can share one database. On
PostgreSQL, a worker is woken by NOTIFY the moment any process queues a job.

Jobs are claimed in batches — live turns first, then imports round-robin
across users — and the turns of a batch are embedded together, since the
model is fastest on several windows at once; each job still commits on its
own, so a crash loses nothing and indexes nothing twice. A job that fails is
retried with exponential backoff; after MAX_ATTEMPTS it is set aside as
failed with its error (``memoro jobs``) and never blocks the jobs behind it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from memoro.history.chunking import chunk, turn_text
from memoro.history.embed import Embedder
from memoro.models import Job
from memoro.store.base import Store

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
Floats = npt.NDArray[np.float32]


def backoff(attempts: int) -> float:
    """Seconds before retry number ``attempts`` + 1."""
    return float(min(2**attempts, 300))


@dataclass
class _Indexing:
    job: Job
    turn_id: int
    chunks: list[str]


class _Failed(Exception):
    """A step failed and its job was released for a retry."""


_FAILED: list[Floats] = []
"""Stands for the vectors of a turn whose embedding failed."""


class Worker:
    """Claims due jobs a batch at a time and runs them."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder | None,
        name: str | None = None,
        *,
        lease_seconds: float = LEASE_SECONDS,
        retry_after: Callable[[int], float] = backoff,
        batch: int = BATCH_JOBS,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_seconds = lease_seconds
        self.retry_after = retry_after
        self.batch = batch
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self, user_id: str | None = None) -> int:
        """Claim a batch of due jobs (only ``user_id``'s, if given) and run
        it; return how many jobs were claimed (0: none was due)."""
        claimed = self.store.claim_jobs(self.name, self.lease_seconds, self.batch, user_id=user_id)
        left = list(claimed)
        try:
            while left:
                self._run_group(left)
                if left:  # a long batch keeps hold of what it has not reached
                    self.store.extend_leases(left, self.name, self.lease_seconds)
        except BaseException:
            # interrupted (Ctrl-C, shutdown): every job still held goes back at
            # once instead of waiting for its lease to run out (a finished job
            # is gone and a failed one released, so neither is touched)
            self.store.return_jobs(claimed, self.name)
            raise
        return len(claimed)

    def run_until_idle(
        self, progress: Callable[[int], None] | None = None, *, user_id: str | None = None
    ) -> int:
        """Run batches until no job is due; return how many jobs ran.
        ``progress`` gets the number of jobs of each batch."""
        ran = 0
        while not self._stop.is_set():
            n = self.run_once(user_id)
            if not n:
                break
            ran += n
            if progress is not None:
                progress(n)
        return ran

    def _run_group(self, left: list[Job]) -> None:
        """Run the next job, or the next run of turns to index (up to
        GROUP_CHARS of text), taking them off ``left``."""
        if left[0].kind != "index_turn":
            job = left.pop(0)
            with contextlib.suppress(_Failed):
                self._guarded(job, self._purge, job)
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
        except Exception:  # one bad turn must not fail the others: embed each alone
            vectors = []
            for g in group:
                try:
                    vectors.append(self._guarded(g.job, self._embed, [g.chunks])[0])
                except _Failed:
                    vectors.append(_FAILED)
        model = self.embedder.model_id if self.embedder else None
        for g, embedded in zip(group, vectors, strict=True):
            if embedded is not _FAILED:
                with contextlib.suppress(_Failed):
                    self._guarded(
                        g.job,
                        self.store.save_index,
                        g.job,
                        self.name,
                        g.turn_id,
                        g.chunks,
                        embedded,
                        model,
                    )

    def _chunks(self, job: Job) -> _Indexing | None:
        turn_id = int(str(job.payload["turn_id"]))
        turn = self.store.get_turn(job.user_id, turn_id)
        if turn is None or turn.indexed:
            return None
        return _Indexing(job, turn_id, chunk(turn_text(turn.question, turn.answer)))

    def _embed(self, turns: list[list[str]]) -> list[list[Floats] | None]:
        """Every chunk of every turn in one call; None for each turn when
        there is no embedder (keyword search only)."""
        if self.embedder is None:
            return [None] * len(turns)
        flat = [c for chunks in turns for c in chunks]
        vectors = self.embedder.embed_documents(flat) if flat else []
        out: list[list[Floats] | None] = []
        pos = 0
        for chunks in turns:
            out.append(list(vectors[pos : pos + len(chunks)]))
            pos += len(chunks)
        return out

    def _notice_model_change(self) -> None:
        """Say so when indexed chunks lack vectors from the current model
        (C8): their users' searches use keywords alone until a reindex."""
        if self.embedder is None:
            return
        missing, total = self.store.count_chunks_missing_vectors(self.embedder.model_id)
        if missing:
            log.warning(
                "%d of %d indexed chunks have no vector from %s (the embedding model changed);"
                " search uses keywords alone for their users until `memoro reindex` runs",
                missing,
                total,
                self.embedder.model_id,
            )

    def _purge(self, job: Job) -> None:
        if job.kind != "purge_conversation":
            raise ValueError(f"unknown job kind {job.kind!r}")
        self.store.purge_conversation(job, self.name, str(job.payload["conversation_id"]))

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
        """Run jobs in this thread until ``stop`` is called."""
        self._stop.clear()
        self._loop()

    # -- as a background thread --------------------------------------------

    def start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="memoro-worker", daemon=True)
            self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float | None = 30) -> None:
        """Stop after the job in hand; an unfinished job goes back to the
        queue when its lease ends."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _loop(self) -> None:
        try:
            self._notice_model_change()
        except Exception:  # the database is not there yet; the loop says so
            log.debug("could not count chunks without vectors", exc_info=True)
        # on PostgreSQL, NOTIFY wakes the worker as soon as any process queues
        # a job; polling stays for retries that come due and for SQLite
        threading.Thread(
            target=self.store.listen_for_jobs,
            args=(self._wake.set, self._stop),
            name="memoro-job-listener",
            daemon=True,
        ).start()
        while not self._stop.is_set():
            try:
                self.run_until_idle()
            except Exception:  # the database is busy or gone; try again later
                log.exception("worker loop error")
            self._wake.wait(IDLE_POLL_SECONDS)
            self._wake.clear()
