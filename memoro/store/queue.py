"""The durable job queue, written once for both backends: jobs live in the
same database as the data they work on, so a job is queued in the same
transaction as the turn that needs it and finished in the same transaction
as its result. A claimed job holds a lease; when its worker dies the lease
runs out and another worker takes it. Claiming itself is per backend
(PostgreSQL skips locked rows, SQLite has one writer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memoro.models import Job, JobStatus
from memoro.store.dialect import Conn, Dialect, SqlBackend, utcnow


def job_from_row(d: Dialect, row: Any) -> Job:
    return Job(
        id=row["id"],
        kind=row["kind"],
        user_id=row["user_id"],
        payload=d.read_json(row["payload"]),
        status=JobStatus(row["status"]),
        attempts=row["attempts"],
        run_after=d.read_time(row["run_after"]),
        locked_by=row["locked_by"],
        last_error=row["last_error"],
        created_at=d.read_time(row["created_at"]),
        bulk=bool(row["lane"]),
    )


def finish(conn: Conn, job: Job, worker: str) -> bool:
    """Remove a job this worker still holds; False when its lease was lost."""
    done = conn.execute("DELETE FROM jobs WHERE id = ? AND locked_by = ?", (job.id, worker))
    return bool(done.rowcount == 1)


class SqlQueue(SqlBackend):
    """The queue methods of a store, except claiming."""

    def _enqueue(
        self, conn: Conn, kind: str, user_id: str, payload: dict[str, object], bulk: bool = False
    ) -> None:
        at = self.dialect.time(utcnow())
        conn.execute(
            "INSERT INTO jobs (kind, user_id, payload, run_after, created_at, lane)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (kind, user_id, self.dialect.json(payload), at, at, int(bulk)),
        )
        self._notify(conn)

    def extend_leases(self, jobs: Sequence[Job], worker: str, lease_seconds: float) -> None:
        until, args = self.dialect.later(lease_seconds)
        with self._queue() as conn:
            conn.executemany(
                f"UPDATE jobs SET locked_until = {until} WHERE id = ? AND locked_by = ?",
                [(*args, job.id, worker) for job in jobs],
            )

    def return_jobs(self, jobs: Sequence[Job], worker: str) -> None:
        with self._queue() as conn:
            conn.executemany(
                "UPDATE jobs SET status = 'pending', locked_by = NULL, locked_until = NULL,"
                " attempts = attempts - 1 WHERE id = ? AND locked_by = ?",
                [(job.id, worker) for job in jobs],
            )

    def postpone_job(self, job: Job, worker: str, seconds: float) -> None:
        run_after, args = self.dialect.later(seconds)
        with self._queue() as conn:
            conn.execute(
                f"UPDATE jobs SET status = 'pending', locked_by = NULL, locked_until = NULL,"
                f" attempts = attempts - 1, run_after = {run_after} WHERE id = ? AND locked_by = ?",
                (*args, job.id, worker),
            )

    def finish_job(self, job: Job, worker: str) -> bool:
        with self._queue() as conn:
            return finish(conn, job, worker)

    def release_job(self, job: Job, worker: str, error: str, retry_in: float | None) -> None:
        with self._queue() as conn:
            if retry_in is None:
                conn.execute(
                    "UPDATE jobs SET status = 'failed', last_error = ?, locked_by = NULL,"
                    " locked_until = NULL WHERE id = ? AND locked_by = ?",
                    (error, job.id, worker),
                )
            else:
                run_after, args = self.dialect.later(retry_in)
                conn.execute(
                    f"UPDATE jobs SET status = 'pending', last_error = ?, run_after = {run_after},"
                    " locked_by = NULL, locked_until = NULL WHERE id = ? AND locked_by = ?",
                    (error, *args, job.id, worker),
                )

    def list_jobs(self, status: JobStatus | None = None, *, limit: int = 100) -> list[Job]:
        which, args = ("", ()) if status is None else (" WHERE status = ?", (status.value,))
        with self._queue(write=False) as conn:
            rows = conn.execute(
                f"SELECT * FROM jobs{which} ORDER BY id LIMIT ?", (*args, limit)
            ).fetchall()
        return [job_from_row(self.dialect, row) for row in rows]

    def count_jobs(self, user_id: str | None = None) -> dict[JobStatus, int]:
        mine, args = ("", ()) if user_id is None else (" WHERE user_id = ?", (user_id,))
        with self._queue(write=False) as conn:
            rows = conn.execute(
                f"SELECT status, count(*) AS n FROM jobs{mine} GROUP BY status", args
            ).fetchall()
        counts = dict.fromkeys(JobStatus, 0)
        counts.update({JobStatus(r["status"]): r["n"] for r in rows})
        return counts

    def retry_job(self, job_id: int) -> bool:
        now, args = self.dialect.later(0)
        with self._queue() as conn:
            done = conn.execute(
                f"UPDATE jobs SET status = 'pending', attempts = 0, run_after = {now}"
                " WHERE id = ? AND status = 'failed'",
                (*args, job_id),
            )
            return bool(done.rowcount == 1)
