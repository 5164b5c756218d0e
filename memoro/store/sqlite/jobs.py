"""The durable job queue on SQLite: jobs live in the same file as the data
they work on, so enqueueing commits with the turn that needs it, and a job is
finished in the same transaction as its result. A claimed job holds a lease;
when its worker dies, the lease runs out and another worker takes it."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from memoro.models import Job, JobStatus
from memoro.store.sqlite._db import Database, iso, now


def enqueue(conn: sqlite3.Connection, kind: str, user_id: str, payload: dict[str, object]) -> None:
    at = now()
    conn.execute(
        "INSERT INTO jobs (kind, user_id, payload, run_after, created_at) VALUES (?, ?, ?, ?, ?)",
        (kind, user_id, json.dumps(payload), at, at),
    )


def finish(conn: sqlite3.Connection, job: Job, worker: str) -> bool:
    """Remove a job this worker still holds; False when its lease was lost."""
    cur = conn.execute("DELETE FROM jobs WHERE id = ? AND locked_by = ?", (job.id, worker))
    return cur.rowcount == 1


def _job(row: sqlite3.Row) -> Job:
    return Job(
        id=row["id"],
        kind=row["kind"],
        user_id=row["user_id"],
        payload=json.loads(row["payload"]),
        status=JobStatus(row["status"]),
        attempts=row["attempts"],
        run_after=datetime.fromisoformat(row["run_after"]),
        locked_by=row["locked_by"],
        last_error=row["last_error"],
        created_at=datetime.fromisoformat(row["created_at"]),
    )


class Jobs:
    """Queue methods of SqliteStore."""

    db: Database

    def listen_for_jobs(self, wake: Callable[[], None], stop: threading.Event) -> None:
        """SQLite cannot signal other processes: a worker there polls (in
        one process, the service wakes its worker thread itself)."""

    def claim_job(self, worker: str, lease_seconds: float) -> Job | None:
        """Take the oldest job that is due, or whose worker's lease ran out."""
        at = now()
        until = iso(datetime.now(UTC) + timedelta(seconds=lease_seconds))
        with self.db.write() as conn:
            # two index-ordered probes instead of one OR, which would sort the queue
            row = (
                conn.execute(
                    "SELECT id FROM jobs WHERE status = 'pending' AND run_after <= ?"
                    " ORDER BY id LIMIT 1",
                    (at,),
                ).fetchone()
                or conn.execute(
                    "SELECT id FROM jobs WHERE status = 'running' AND locked_until <= ?"
                    " ORDER BY id LIMIT 1",
                    (at,),
                ).fetchone()
            )
            if row is None:
                return None
            claimed = conn.execute(
                "UPDATE jobs SET status = 'running', locked_by = ?, locked_until = ?,"
                " attempts = attempts + 1 WHERE id = ? RETURNING *",
                (worker, until, row["id"]),
            ).fetchone()
        return _job(claimed)

    def release_job(self, job: Job, worker: str, error: str, retry_in: float | None) -> None:
        """Record a failure: retry after ``retry_in`` seconds, or set the job
        aside as failed (``None``) so it never blocks the queue."""
        with self.db.write() as conn:
            if retry_in is None:
                conn.execute(
                    "UPDATE jobs SET status = 'failed', last_error = ?, locked_by = NULL,"
                    " locked_until = NULL WHERE id = ? AND locked_by = ?",
                    (error, job.id, worker),
                )
            else:
                run_after = iso(datetime.now(UTC) + timedelta(seconds=retry_in))
                conn.execute(
                    "UPDATE jobs SET status = 'pending', last_error = ?, run_after = ?,"
                    " locked_by = NULL, locked_until = NULL WHERE id = ? AND locked_by = ?",
                    (error, run_after, job.id, worker),
                )

    def finish_job(self, job: Job, worker: str) -> bool:
        with self.db.write() as conn:
            return finish(conn, job, worker)

    def list_jobs(self, status: JobStatus | None = None, *, limit: int = 100) -> list[Job]:
        if status is None:
            rows = self.db.connect().execute("SELECT * FROM jobs ORDER BY id LIMIT ?", (limit,))
        else:
            rows = self.db.connect().execute(
                "SELECT * FROM jobs WHERE status = ? ORDER BY id LIMIT ?", (status.value, limit)
            )
        return [_job(row) for row in rows]

    def count_jobs(self) -> dict[JobStatus, int]:
        rows = self.db.connect().execute("SELECT status, count(*) FROM jobs GROUP BY status")
        counts = dict.fromkeys(JobStatus, 0)
        counts.update({JobStatus(status): n for status, n in rows})
        return counts

    def retry_job(self, job_id: int) -> bool:
        """Put a failed job back in the queue."""
        with self.db.write() as conn:
            cur = conn.execute(
                "UPDATE jobs SET status = 'pending', attempts = 0, run_after = ?"
                " WHERE id = ? AND status = 'failed'",
                (now(), job_id),
            )
            return cur.rowcount == 1
