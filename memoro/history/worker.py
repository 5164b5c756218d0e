"""The worker that drains the durable job queue: index a finished turn
(chunk, embed, store — no LLM involved, C2) or purge a deleted conversation
(C6). It runs in a thread inside ``memoro serve``/the Python API, or as its
own process (``memoro worker``); any number can share one database. On
PostgreSQL, a worker is woken by NOTIFY the moment any process queues a job.

A job that fails is retried with exponential backoff; after MAX_ATTEMPTS it
is set aside as failed with its error (``memoro jobs``) and never blocks the
jobs behind it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable

from memoro.history.chunking import chunk, turn_text
from memoro.history.embed import Embedder
from memoro.models import Job
from memoro.store.base import Store

log = logging.getLogger("memoro.worker")

MAX_ATTEMPTS = 5
LEASE_SECONDS = 60.0
IDLE_POLL_SECONDS = 1.0


def backoff(attempts: int) -> float:
    """Seconds before retry number ``attempts`` + 1."""
    return float(min(2**attempts, 300))


class Worker:
    """Claims jobs one at a time and runs them."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder | None,
        name: str | None = None,
        *,
        lease_seconds: float = LEASE_SECONDS,
        retry_after: Callable[[int], float] = backoff,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_seconds = lease_seconds
        self.retry_after = retry_after
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> bool:
        """Run the next due job; False when there was none."""
        job = self.store.claim_job(self.name, self.lease_seconds)
        if job is None:
            return False
        try:
            self._handle(job)
        except Exception as exc:  # any failure is recorded on the job, never lost
            log.warning("job %s (%s) failed: %s", job.id, job.kind, exc)
            retry = self.retry_after(job.attempts) if job.attempts < MAX_ATTEMPTS else None
            self.store.release_job(job, self.name, f"{type(exc).__name__}: {exc}", retry)
        return True

    def run_until_idle(self, progress: Callable[[], None] | None = None) -> int:
        """Run jobs until none is due; return how many ran."""
        ran = 0
        while not self._stop.is_set() and self.run_once():
            ran += 1
            if progress is not None:
                progress()
        return ran

    def _handle(self, job: Job) -> None:
        if job.kind == "index_turn":
            self._index(job, int(str(job.payload["turn_id"])))
        elif job.kind == "purge_conversation":
            self.store.purge_conversation(job, self.name, str(job.payload["conversation_id"]))
        else:
            raise ValueError(f"unknown job kind {job.kind!r}")

    def _index(self, job: Job, turn_id: int) -> None:
        turn = self.store.get_turn(job.user_id, turn_id)
        if turn is None or turn.indexed:
            self.store.finish_job(job, self.name)
            return
        chunks = chunk(turn_text(turn.question, turn.answer))
        vectors = self.embedder.embed_documents(chunks) if self.embedder and chunks else None
        model = self.embedder.model_id if self.embedder else None
        self.store.save_index(job, self.name, turn_id, chunks, vectors, model)

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
